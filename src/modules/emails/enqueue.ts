import { jobOf, type JobRequest } from '../../jobs/outbox.js';
import type { FieldLogic } from '../fields/schemas.js';
import type { FieldType } from '../fields/types.js';
import { packEntries } from '../submissions/packed-entries.js';
import type { Submission } from '../submissions/schemas.js';
import { logicHolds, type StoredValue } from '../submissions/values.js';
import { confirmationAddress } from './compose.js';
import { sendEmailJob } from './jobs.js';
import type { PayloadEntry } from './payload.js';
import type { EmailToJudge } from './repository.js';

/**
 * What this target reads of a submission event (events/publish.ts): declared here, as a part
 * of SubmissionEvent, so that publish.ts can list this target without an import cycle.
 */
export interface EmailEvent {
  type: string;
  accountId: number;
  formId: number;
  submissionId: number;
  sealed: boolean;
  submission: Pick<Submission, 'timestamp' | 'data'> | null;
}

/**
 * The event target of emails: for a new submission, one emails.send job per confirmation and
 * notification of its form (emailsToJudge) whose conditions hold. Emails go on
 * submission.created only: an edit or a delete is not a new response to confirm or notify.
 * Rendering waits for the job, off the request.
 */
export function submissionEmailsFor(emails: readonly EmailToJudge[], event: EmailEvent): JobRequest[] {
  if (event.type !== 'submission.created' || !event.submission || emails.length === 0) return [];

  // Encrypted forms' events carry no values: their conditions see every field empty.
  const data: readonly PayloadEntry[] = event.sealed ? [] : event.submission.data;
  // Made for the first email with conditions, if any: most have none.
  let judged: { fields: Map<number, { type: FieldType; options: [] }>; values: Map<number, StoredValue> } | undefined;

  const jobs: JobRequest[] = [];
  for (const email of emails) {
    if (email.logic !== null) {
      const logic = JSON.parse(email.logic) as FieldLogic;
      judged ??= {
        fields: new Map(data.map((e) => [e.field, { type: e.type as FieldType, options: [] }])),
        values: new Map(data.map((e) => [e.field, e.value as StoredValue])),
      };
      const { fields, values } = judged;
      if (logicHolds(logic, fields, (id) => values.get(id)) !== (logic.action === 'show')) continue;
    }
    // A confirmation without an address to go to is no job at all.
    if (email.kind === 'confirmation' && confirmationAddress(data, email.recipient_field_id) === undefined) continue;
    jobs.push(
      jobOf(sendEmailJob, {
        accountId: event.accountId,
        formId: event.formId,
        emailId: email.id,
        kind: email.kind,
        submissionId: event.submissionId,
        timestamp: event.submission.timestamp,
        sealed: event.sealed,
        // The same packed entries as the event's webhook deliveries carry.
        data: packEntries(data),
      }),
    );
  }
  return jobs;
}
