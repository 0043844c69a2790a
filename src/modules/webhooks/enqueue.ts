import type { Transaction } from 'kysely';
import type { AppContext } from '../../context.js';
import type { Database } from '../../db/schema.js';
import { enqueue } from '../../jobs/outbox.js';
import type { Submission } from '../submissions/schemas.js';
import { deliverWebhookJob } from './jobs.js';
import { webhooksOfForm } from './repository.js';
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
  submissionId: number;
  occurredAt: number;
  sealed: boolean;
  submission: Submission | null;
}

/**
 * The webhooks' target of submission events: one delivery job per webhook of the form that
 * asks for the event, in the transaction of the change, carrying the event as it is now.
 * A form without webhooks costs one indexed read.
 */
export async function enqueueWebhookDeliveries(
  trx: Transaction<Database>,
  _ctx: AppContext,
  event: EventForWebhooks,
): Promise<void> {
  const webhooks = await webhooksOfForm(trx, event.formId);
  for (const webhook of webhooks) {
    if (!(JSON.parse(webhook.events) as string[]).includes(event.type)) continue;
    await enqueue(trx, deliverWebhookJob, {
      webhookId: webhook.id,
      messageId: newMessageId(),
      event: {
        type: event.type,
        formId: event.formId,
        submissionId: event.submissionId,
        occurredAt: event.occurredAt,
        sealed: event.sealed,
        submission: event.submission,
      },
    });
  }
}
