import { createHmac, type KeyObject } from 'node:crypto';
import { open, seal, serviceKey, type FormKeys } from '../../crypto/envelope.js';
import type { FormRow } from '../../db/schema.js';

/**
 * How the data of an encrypted form's submission is stored: `enc1:` and the sealed JSON in
 * base64. A row says by itself whether it is sealed, which is what lets the background
 * conversions work row by row and be repeated safely after a restart.
 */
const PREFIX = 'enc1:';

export function isSealed(data: string): boolean {
  return data.startsWith(PREFIX);
}

/** The sealed data is bound to its form and its row: data copied or swapped between rows does not open. */
function dataAad(form: Pick<FormRow, 'view_key'>, submissionId: number): string {
  return `formwork submission ${form.view_key} ${submissionId}`;
}

export function sealData(
  form: Pick<FormRow, 'view_key'>,
  publicKey: KeyObject,
  json: string,
  submissionId: number,
): string {
  return PREFIX + seal(Buffer.from(json), publicKey, dataAad(form, submissionId)).toString('base64');
}

export function openData(form: Pick<FormRow, 'view_key'>, keys: FormKeys, data: string, submissionId: number): string {
  return open(Buffer.from(data.slice(PREFIX.length), 'base64'), keys, dataAad(form, submissionId)).toString();
}

/**
 * What a unique field of an encrypted form stores instead of its value: an HMAC under a key
 * derived from SECRET_KEY. Equal values still collide, so uniqueness holds without the
 * password, and nobody holding only the database can read or test a guess against it.
 */
export function blindValue(secretKey: string, formId: number, fieldId: number, norm: string): string {
  return `h1:${createHmac('sha256', serviceKey(secretKey, 'unique values')).update(`${formId}\0${fieldId}\0${norm}`).digest('base64url')}`;
}
