import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';
import { open, seal, type FormKeys } from '../../crypto/envelope.js';
import type { FormRow } from '../../db/schema.js';

/**
 * A partial submission of an encrypted form is stored twice sealed: for the owner, like a
 * submission (the form's public key; read with the password), and for the person filling
 * it in, under a key derived from their resume token, which the service keeps only as a
 * hash. So resuming needs no password, and the database alone opens neither copy.
 */
const OWNER_PREFIX = 'penc1:';
const RESUME_PREFIX = 'renc1:';

export function isSealedPartial(data: string): boolean {
  return data.startsWith(OWNER_PREFIX);
}

const aad = (form: Pick<FormRow, 'view_key'>, partialId: number) => `formwork partial ${form.view_key} ${partialId}`;

export function sealForOwner(form: Pick<FormRow, 'view_key'>, key: KeyObject, json: string, partialId: number): string {
  return OWNER_PREFIX + seal(Buffer.from(json), key, aad(form, partialId)).toString('base64');
}

export function openForOwner(form: Pick<FormRow, 'view_key'>, keys: FormKeys, data: string, partialId: number): string {
  return open(Buffer.from(data.slice(OWNER_PREFIX.length), 'base64'), keys, aad(form, partialId)).toString();
}

function resumeKey(resumeToken: string): Buffer {
  return Buffer.from(hkdfSync('sha256', resumeToken, 'formwork partial', 'resume data', 32));
}

export function sealForResume(resumeToken: string, json: string, partialId: number): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', resumeKey(resumeToken), iv);
  cipher.setAAD(Buffer.from(String(partialId)));
  const body = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
  return RESUME_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

export function openForResume(resumeToken: string, data: string, partialId: number): string {
  const raw = Buffer.from(data.slice(RESUME_PREFIX.length), 'base64');
  const decipher = createDecipheriv('aes-256-gcm', resumeKey(resumeToken), raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(String(partialId)));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

export function resumeHash(resumeToken: string): string {
  return createHash('sha256').update(`partial\0${resumeToken}`).digest('hex');
}
