import type { Transaction } from 'kysely';
import type { AppContext } from '../../context.js';
import type { Database } from '../../db/schema.js';
import { enqueueAll, type JobRequest } from '../../jobs/outbox.js';
import { documentJobsFor } from '../docmerge/enqueue.js';
import { activeIntegrationsOf } from '../docmerge/repository.js';
import { emailsToJudge, type EmailToJudge } from '../emails/repository.js';
import { submissionEmailsFor } from '../emails/enqueue.js';
import type { PartialSubmission } from '../partials/schemas.js';
import type { Submission } from '../submissions/schemas.js';
import type { StoredValue } from '../submissions/values.js';
import { webhookDeliveriesFor } from '../webhooks/enqueue.js';
import { webhooksOfForm, type WebhookTarget } from '../webhooks/repository.js';

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
  /**
   * An encrypted form's create only: the values as they were before sealing, for the targets
   * that must act on them later without the password (document merge wraps them in its job).
   */
  plainValues?: ReadonlyMap<number, StoredValue>;
}

/**
 * What the things that act on events (webhooks, emails) read of a form's configuration. Every
 * change to it moves the form's revision, so a submission write that has checked the revision
 * can keep it with the form's cached definition instead of reading it again (see createOnce).
 */
export interface FormEventConfig {
  webhooks: WebhookTarget[];
  emails: EmailToJudge[];
  /** The form's active document-merge integrations. */
  integrations: { id: number }[];
}

/** Whether a form's events go nowhere: no webhook, no email, no document merge. */
export const isQuiet = (c: FormEventConfig): boolean =>
  c.webhooks.length === 0 && c.emails.length === 0 && c.integrations.length === 0;

/** Three indexed reads, usually of no row. */
export async function loadEventConfig(
  trx: Transaction<Database>,
  accountId: number,
  formId: number,
): Promise<FormEventConfig> {
  const [webhooks, emails, integrations] = await Promise.all([
    webhooksOfForm(trx, formId),
    emailsToJudge(trx, accountId, formId),
    activeIntegrationsOf(trx, formId),
  ]);
  return { webhooks, emails, integrations };
}

/**
 * Called by the submission writes, in their transaction, after the change is made, with the
 * form's configuration when the caller already holds it at the revision it checked. The jobs
 * of every target go into the outbox in one statement.
 */
export async function publishSubmissionEvent(
  trx: Transaction<Database>,
  ctx: AppContext,
  event: SubmissionEvent,
  config?: FormEventConfig,
): Promise<void> {
  await enqueueAll(
    trx,
    submissionEventJobs(ctx, event, config ?? (await loadEventConfig(trx, event.accountId, event.formId))),
  );
}

/** The jobs an event causes under the form's configuration: a delivery per webhook, an email, a document. */
export function submissionEventJobs(
  ctx: AppContext,
  event: SubmissionEvent,
  { webhooks, emails, integrations }: FormEventConfig,
): JobRequest[] {
  return [
    ...webhookDeliveriesFor(webhooks, event),
    ...submissionEmailsFor(emails, event),
    ...documentJobsFor(integrations, event, ctx.config.secretKey),
  ];
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

export async function publishPartialEvent(trx: Transaction<Database>, event: PartialEvent): Promise<void> {
  await enqueueAll(trx, webhookDeliveriesFor(await webhooksOfForm(trx, event.formId), event));
}
