import { Type, type Static } from '@sinclair/typebox';
import { decryptWith, encryptWith, serviceKey } from '../../crypto/envelope.js';
import type { StoredValue } from '../submissions/values.js';

/**
 * One document of one integration from one submission. A plain form's values are read from
 * the submission when the job runs. An encrypted form's cannot be (the worker has no
 * password): its job carries them, encrypted with a key derived from SECRET_KEY, and the job
 * drops them once the document is made, or once its last attempt has failed.
 */
export const GeneratePayload = Type.Object({
  integrationId: Type.Integer(),
  accountId: Type.Integer(),
  formId: Type.Integer(),
  submissionId: Type.Integer(),
  /** Encrypted forms only: the values by field id, as JSON, encrypted (base64). */
  values: Type.Optional(Type.String()),
});
export type GeneratePayload = Static<typeof GeneratePayload>;

/** The mail of a made document, to the integration's addresses. */
export const EmailPayload = Type.Object({
  accountId: Type.Integer(),
  formId: Type.Integer(),
  submissionId: Type.Integer(),
  documentId: Type.Integer(),
  to: Type.Array(Type.String()),
  subject: Type.String(),
});
export type EmailPayload = Static<typeof EmailPayload>;

const valuesAad = (submissionId: number) => `formwork docmerge values ${submissionId}`;
const valuesKey = (secretKey: string) => serviceKey(secretKey, 'docmerge job values');

export function wrapValues(secretKey: string, submissionId: number, values: ReadonlyMap<number, StoredValue>): string {
  const json = JSON.stringify(Object.fromEntries(values));
  return encryptWith(valuesKey(secretKey), Buffer.from(json), valuesAad(submissionId)).toString('base64');
}

export function unwrapValues(secretKey: string, submissionId: number, wrapped: string): Map<number, StoredValue> {
  const json = decryptWith(valuesKey(secretKey), Buffer.from(wrapped, 'base64'), valuesAad(submissionId)).toString();
  return new Map(Object.entries(JSON.parse(json) as Record<string, StoredValue>).map(([k, v]) => [Number(k), v]));
}
