import type { Transaction } from 'kysely';
import type { AppContext } from '../../context.js';
import type { Database } from '../../db/schema.js';
import { enqueueAll, type JobRequest } from '../../jobs/outbox.js';
import { submissionEmailsFor } from '../emails/enqueue.js';
import type { PartialSubmission } from '../partials/schemas.js';
import type { Submission } from '../submissions/schemas.js';
import { webhookDeliveriesFor } from '../webhooks/enqueue.js';

export type SubmissionEventType = 'submission.created' | 'submission.updated' | 'submission.deleted';

/**
 * A change to a submission that webhooks and emails may act on. It is published inside the
 * transaction of the change, so the deliveries it causes are in the outbox exactly when the
 * change commits: a crash can delay one but never lose it or invent one.
 */
export interface SubmissionEvent {
  type: SubmissionEventType;
  accountId: number;
  formId: number;
  submissionId: number;
  /** Epoch ms from ctx.clock: when the change was made. */
  occurredAt: number;
  /** The form is encrypted: deliveries carry ids and no values. */
  sealed: boolean;
  /**
   * The detailed record as the change left it (values absent for an encrypted form), or
   * null when the submission is gone (deleted).
   */
  submission: Submission | null;
}

/**
 * One kind of thing that acts on events (webhooks, emails): it looks at the form's
 * configuration in the transaction and names the jobs it needs, or none. It must stay cheap
 * when the form has nothing configured, since it runs on every submission write.
 */
export type EventTarget = (
  trx: Transaction<Database>,
  ctx: AppContext,
  event: SubmissionEvent,
) => Promise<JobRequest[]>;

const targets: readonly EventTarget[] = [webhookDeliveriesFor, submissionEmailsFor];

/**
 * Called by the submission writes, in their transaction, after the change is made. The jobs
 * of every target go into the outbox in one statement.
 */
export async function publishSubmissionEvent(
  trx: Transaction<Database>,
  ctx: AppContext,
  event: SubmissionEvent,
): Promise<void> {
  const jobs: JobRequest[] = [];
  for (const target of targets) jobs.push(...(await target(trx, ctx, event)));
  await enqueueAll(trx, jobs);
}

/**
 * A partial submission saved (or saved again) on the hosted page. Only webhooks act on it:
 * emails are for finished submissions. Published in the save's transaction, like a
 * submission's events. It never carries the resume token: the service keeps only its hash.
 */
export interface PartialEvent {
  type: 'partial.saved';
  accountId: number;
  formId: number;
  partialSubmissionId: number;
  occurredAt: number;
  sealed: boolean;
  /** The partial as GET /partialsubmission/{id} shows it (no values for an encrypted form). */
  partial: PartialSubmission;
}

export async function publishPartialEvent(
  trx: Transaction<Database>,
  ctx: AppContext,
  event: PartialEvent,
): Promise<void> {
  await enqueueAll(trx, await webhookDeliveriesFor(trx, ctx, event));
}
