import { jobOf, type JobRequest } from '../../jobs/outbox.js';
import type { StoredValue } from '../submissions/values.js';
import { generateDocumentJob } from './jobs.js';
import { wrapValues } from './payload.js';

/**
 * What this target reads of a submission event (events/publish.ts), declared here so that
 * publish.ts can list it without an import cycle.
 */
export interface EventForDocmerge {
  type: string;
  accountId: number;
  formId: number;
  submissionId: number;
  sealed: boolean;
  /** The values as stored before sealing; given only by a create of an encrypted form. */
  plainValues?: ReadonlyMap<number, StoredValue>;
}

/**
 * The document-merge target of submission events: one generation job per active integration
 * of the form, for a new submission. Conditions are judged by the job, which sees the values
 * of encrypted forms too; an encrypted form's values travel in the job, wrapped (payload.ts).
 */
export function documentJobsFor(
  integrations: readonly { id: number }[],
  event: EventForDocmerge,
  secretKey: string,
): JobRequest[] {
  if (event.type !== 'submission.created' || integrations.length === 0) return [];
  const values =
    event.sealed && event.plainValues ? wrapValues(secretKey, event.submissionId, event.plainValues) : undefined;
  return integrations.map((integration) =>
    jobOf(generateDocumentJob, {
      integrationId: integration.id,
      accountId: event.accountId,
      formId: event.formId,
      submissionId: event.submissionId,
      ...(values !== undefined && { values }),
    }),
  );
}
