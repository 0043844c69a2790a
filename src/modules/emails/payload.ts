import { Type, type Static } from '@sinclair/typebox';
import { PackedEntry, unpackEntry } from '../submissions/packed-entries.js';

/** One value of the submission, as the email shows it. */
const Entry = Type.Object({
  field: Type.Integer(),
  label: Type.String(),
  type: Type.String(),
  value: Type.Unknown(),
  displayValue: Type.String(),
});

/**
 * What a send job holds: which email, and the submission as it was created. The values are
 * kept, not read again at send time, so the email says what was submitted even if the
 * submission is edited or deleted before the job runs; the email's settings are read at send
 * time, so an email deleted meanwhile sends nothing. Encrypted forms' jobs hold no values.
 */
export const SendEmailPayload = Type.Object({
  accountId: Type.Integer(),
  formId: Type.Integer(),
  emailId: Type.Integer(),
  kind: Type.Union([Type.Literal('confirmation'), Type.Literal('notification')]),
  submissionId: Type.Integer(),
  /** ISO 8601: when the submission was made. */
  timestamp: Type.String(),
  sealed: Type.Boolean(),
  /** Packed (submissions/packed-entries.ts); jobs written before packing hold whole entries. */
  data: Type.Array(Type.Union([PackedEntry, Entry])),
});
export type SendEmailPayload = Static<typeof SendEmailPayload>;
export type PayloadEntry = Static<typeof Entry>;

/** A send job's payload with its values unpacked: what composing an email reads. */
export type SubmissionEmail = Omit<SendEmailPayload, 'data'> & { data: PayloadEntry[] };

export function unpackEmailPayload(stored: SendEmailPayload): SubmissionEmail {
  return { ...stored, data: stored.data.map(unpackEntry) };
}

/**
 * The payload as an encrypted form's submission writes it: ids and no values. For a job
 * written before its form was encrypted, which must not send or keep the values in the clear.
 */
export function sealedEmailPayload(stored: SendEmailPayload): SendEmailPayload {
  return { ...stored, sealed: true, data: [] };
}
