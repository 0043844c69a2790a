import { jobOf, type JobRequest } from '../../jobs/outbox.js';
import { packSubmission } from '../submissions/packed-entries.js';
import type { Submission } from '../submissions/schemas.js';
import { deliverWebhookJob } from './jobs.js';
import type { WebhookTarget } from './repository.js';
import type { WebhookEvent } from './schemas.js';
import { newMessageId } from './secrets.js';

/**
 * What this target reads of a SubmissionEvent (src/modules/events/publish.ts), written out
 * rather than imported: publish.ts imports this target, and the linter counts type imports
 * in cycles too.
 */
export interface EventForWebhooks {
  type: WebhookEvent;
  formId: number;
  /** Absent on partial.saved, which names a partial instead. */
  submissionId?: number;
  partialSubmissionId?: number;
  occurredAt: number;
  sealed: boolean;
  submission?: Submission | null;
  /** partial.saved: the partial as the API shows it. */
  partial?: unknown;
}

/**
 * The webhooks' target of submission and partial events: one delivery job per webhook of the
 * form (webhooksOfForm) that asks for the event, carrying the event as it is now.
 */
export function webhookDeliveriesFor(webhooks: readonly WebhookTarget[], event: EventForWebhooks): JobRequest[] {
  const jobs: JobRequest[] = [];
  for (const webhook of webhooks) {
    if (!webhook.events.includes(event.type)) continue;
    jobs.push(
      jobOf(deliverWebhookJob, {
        webhookId: webhook.id,
        messageId: newMessageId(),
        event: {
          type: event.type,
          formId: event.formId,
          ...(event.submissionId !== undefined && { submissionId: event.submissionId }),
          ...(event.partialSubmissionId !== undefined && { partialSubmissionId: event.partialSubmissionId }),
          occurredAt: event.occurredAt,
          sealed: event.sealed,
          submission: event.submission ? packSubmission(event.submission) : null,
          ...(event.partial !== undefined && { partial: event.partial }),
        },
      }),
    );
  }
  return jobs;
}
