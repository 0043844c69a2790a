import { Type, type Static } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { encryptWith, exportPrivateKey, newFormKeys, serviceKey, wrapFormKey } from '../../crypto/envelope.js';
import type { FormRow, FormUpdate } from '../../db/schema.js';
import { ConflictError, invalid } from '../../errors.js';
import { keyAad } from './keys.js';

export interface EncryptionInput {
  isEncrypted?: boolean;
  encryptionPassword?: string;
  newEncryptionPassword?: string;
}

/** The payload of the job that converts a form's existing submissions; see convert.ts. */
export const ConversionPayload = Type.Object({
  formId: Type.Integer(),
  accountId: Type.Integer(),
  direction: Type.Union([Type.Literal('encrypt'), Type.Literal('decrypt')]),
  /** decrypt only: the private key, wrapped with a key derived from SECRET_KEY (base64). */
  key: Type.Optional(Type.String()),
});
export type ConversionPayload = Static<typeof ConversionPayload>;

export interface EncryptionPlan {
  update: Pick<FormUpdate, 'is_encrypted' | 'encryption_key' | 'encryption_state'>;
  conversion?: ConversionPayload;
}

/** What wraps a private key while a decryption job carries it: derived from SECRET_KEY. */
export function conversionKey(ctx: AppContext): Buffer {
  return serviceKey(ctx.config.secretKey, 'conversion job key');
}

export function conversionKeyAad(formId: number): string {
  return `formwork conversion ${formId}`;
}

function needPassword(property: string, why: string): never {
  throw invalid('encryption_password_required', `body.${property}`, why);
}

// Leading or trailing white space is dropped from a header's value, and a control character
// cannot be in one: a password holding either could be set here and never sent back.
// eslint-disable-next-line no-control-regex
const UNSENDABLE = /^\s|\s$|[\u0000-\u001f\u007f]/;

function checkNewPassword(property: string, password: string): string {
  if (UNSENDABLE.test(password))
    throw invalid(
      'validation_failed',
      `body.${property}`,
      'must not start or end with white space or hold control characters: the password header could not carry it',
    );
  return password;
}

/** A form created with isEncrypted: its key pair, wrapped with the password (one hash of the account's budget). */
export async function encryptionOfNewForm(
  ctx: AppContext,
  accountId: number,
  input: EncryptionInput,
  viewKey: string,
): Promise<EncryptionPlan['update'] | undefined> {
  if (input.isEncrypted !== true) {
    if (input.encryptionPassword !== undefined)
      throw invalid('validation_failed', 'body.encryptionPassword', 'goes with isEncrypted: true');
    return undefined;
  }
  if (input.encryptionPassword === undefined)
    needPassword('encryptionPassword', 'an encrypted form needs a password to protect it with');
  const wrapped = await wrapFormKey(
    newFormKeys(),
    checkNewPassword('encryptionPassword', input.encryptionPassword),
    keyAad(viewKey),
    ctx.hasher.kdf({ account: accountId }),
  );
  return { is_encrypted: 1, encryption_key: JSON.stringify(wrapped) };
}

/**
 * What a form update changes about encryption, worked out before the write transaction
 * (scrypt takes a third of a second and must not hold a transaction open):
 * - isEncrypted true on a plain form: a new key pair wrapped with encryptionPassword; existing
 *   submissions are sealed by a background job.
 * - isEncrypted false on an encrypted form: encryptionPassword must open the key; existing
 *   submissions are opened by a background job, and the form stays encrypted until it is done.
 * - newEncryptionPassword: the key is re-wrapped; no submission is touched.
 * Returns undefined when encryption does not change.
 */
export async function planEncryptionChange(
  ctx: AppContext,
  form: Pick<FormRow, 'id' | 'account_id' | 'view_key' | 'is_encrypted' | 'encryption_key' | 'encryption_state'>,
  input: EncryptionInput,
): Promise<EncryptionPlan | undefined> {
  const encrypted = form.is_encrypted === 1;
  const turnOn = input.isEncrypted === true && !encrypted;
  const turnOff = input.isEncrypted === false && encrypted;
  const rewrap = input.newEncryptionPassword !== undefined;
  if (!turnOn && !turnOff && !rewrap) {
    if (input.encryptionPassword !== undefined && !encrypted && input.isEncrypted !== true) {
      throw invalid(
        'validation_failed',
        'body.encryptionPassword',
        'goes with isEncrypted: true, or with newEncryptionPassword on an encrypted form',
      );
    }
    // A password sent to an encrypted form that changes nothing is still checked: a wrong one
    // answered 200 would let a client believe the form now has that password.
    if (input.encryptionPassword !== undefined && encrypted) await ctx.formKeys.unlock(form, input.encryptionPassword);
    return undefined;
  }
  if (form.encryption_state) {
    throw new ConflictError(
      'encryption_change_running',
      `This form's submissions are still being ${form.encryption_state === 'encrypting' ? 'sealed' : 'opened'}; try again when encryptionState is null`,
    );
  }
  if (rewrap && (!encrypted || input.isEncrypted === false)) {
    throw invalid(
      'validation_failed',
      'body.newEncryptionPassword',
      'changes the password of an encrypted form, which this form is not or stops being',
    );
  }
  if (input.encryptionPassword === undefined) {
    needPassword(
      'encryptionPassword',
      turnOn
        ? 'turning encryption on needs the password to protect the form with'
        : 'needs the current encryption password',
    );
  }
  if (turnOn) {
    const wrapped = await wrapFormKey(
      newFormKeys(),
      checkNewPassword('encryptionPassword', input.encryptionPassword),
      keyAad(form.view_key),
      ctx.hasher.kdf({ account: form.account_id }),
    );
    // Always through the job, even with no submissions: one may land while scrypt runs above.
    return {
      update: { is_encrypted: 1, encryption_key: JSON.stringify(wrapped), encryption_state: 'encrypting' },
      conversion: { formId: form.id, accountId: form.account_id, direction: 'encrypt' },
    };
  }
  // Checked before the current password: a refused new one costs no attempt.
  if (rewrap) checkNewPassword('newEncryptionPassword', input.newEncryptionPassword!);
  const opened = await ctx.formKeys.unlock(form, input.encryptionPassword);
  if (rewrap) {
    const wrapped = await wrapFormKey(
      opened,
      input.newEncryptionPassword!,
      keyAad(form.view_key),
      ctx.hasher.kdf({ account: form.account_id }),
    );
    return { update: { encryption_key: JSON.stringify(wrapped) } };
  }
  // Turning off: the job needs the private key after this request (and after a restart), so it
  // travels in the job wrapped with SECRET_KEY; the data it opens is about to be plain anyway.
  const key = encryptWith(conversionKey(ctx), exportPrivateKey(opened), conversionKeyAad(form.id)).toString('base64');
  return {
    update: { encryption_state: 'decrypting' },
    conversion: { formId: form.id, accountId: form.account_id, direction: 'decrypt', key },
  };
}
