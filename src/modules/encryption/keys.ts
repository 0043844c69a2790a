import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { AppContext } from '../../context.js';
import {
  formPublicKey,
  serviceKey,
  unwrapFormKey,
  WrongPasswordError,
  type FormKeys,
  type WrappedFormKey,
} from '../../crypto/envelope.js';
import type { FormRow } from '../../db/schema.js';
import { UnauthorizedError } from '../../errors.js';
import { throttle } from '../../http/rate-limit.js';
import type { KeyObject } from 'node:crypto';

/** ENCRYPTION_PASSWORD_ATTEMPTS wrong passwords a form takes in this fixed window (on the clock). */
export const PASSWORD_ATTEMPT_WINDOW_SECONDS = 900;

/** The request header that carries a form's encryption password, and the original service's name for it. */
export const PASSWORD_HEADERS = ['x-formwork-encryption-password', 'x-fs-encryption-password'] as const;

export class EncryptionPasswordError extends UnauthorizedError {
  constructor(missing: boolean) {
    super(missing ? 'encryption_password_required' : 'encryption_password_invalid');
  }
}

export function passwordFrom(headers: IncomingHttpHeaders): string | undefined {
  for (const name of PASSWORD_HEADERS) {
    const value = headers[name];
    if (typeof value === 'string' && value !== '') return headerText(value);
  }
  return undefined;
}

/**
 * Node reads a header's bytes as Latin-1. A password set in a JSON body is Unicode, and a
 * client that sends it in a header sends its UTF-8 bytes (curl, most libraries; fetch can
 * only send Latin-1): bytes that make valid UTF-8 are read as UTF-8, others stay Latin-1.
 */
function headerText(value: string): string {
  if (!/[\u0080-\u00ff]/.test(value)) return value;
  const bytes = Buffer.from(value, 'latin1');
  const text = bytes.toString('utf8');
  return Buffer.from(text).equals(bytes) ? text : value;
}

/**
 * Binds a wrapped key to its form, so that a key record copied onto another form does not
 * open. The view key rather than the id: it exists before the form's row, and never changes.
 */
export function keyAad(viewKey: string): string {
  return `formwork form key ${viewKey}`;
}

export function wrappedKeyOf(form: Pick<FormRow, 'encryption_key'>): WrappedFormKey | undefined {
  return form.encryption_key === null ? undefined : (JSON.parse(form.encryption_key) as WrappedFormKey);
}

export function publicKeyOf(form: Pick<FormRow, 'encryption_key'>): KeyObject | undefined {
  const wrapped = wrappedKeyOf(form);
  return wrapped && formPublicKey(wrapped);
}

/**
 * The key that new data of the form (submissions, files) is sealed to: the form's public key
 * while it is encrypted, none from the moment it is being decrypted (the job opens the rest),
 * so that nothing new is sealed behind the job's back.
 */
export function sealingKeyOf(form: Pick<FormRow, 'encryption_key' | 'encryption_state'>): KeyObject | undefined {
  return form.encryption_state === 'decrypting' ? undefined : publicKeyOf(form);
}

/**
 * Whether the form's new data is sealed now (sealingKeyOf, without reading the key): what its
 * events carry, ids without values. Background work that holds values taken before the form
 * was encrypted (a delivery or an email queued then) acts as if it held none.
 */
export function sealsNewData(form: {
  is_encrypted: number | null;
  encryption_state: FormRow['encryption_state'];
}): boolean {
  return form.is_encrypted === 1 && form.encryption_state !== 'decrypting';
}

/** Binds a sealed file to its upload, so that objects swapped between uploads do not open. */
export function fileAad(fileKey: string): string {
  return `formwork file ${fileKey}`;
}

/**
 * Unwrapped form keys kept in memory for a few minutes, so that a client paging through an
 * encrypted form pays for scrypt once, not on every page. An entry is found only by an HMAC
 * of the form, its wrapped key and the password: another password misses and pays scrypt.
 */
export class FormKeyCache {
  private readonly entries = new Map<string, { keys: FormKeys; until: number }>();
  private readonly checking = new Map<string, Promise<FormKeys>>();
  private readonly hmacKey: Buffer;

  constructor(
    private readonly ctx: Pick<AppContext, 'config' | 'clock' | 'rateLimiter' | 'hasher'>,
    private readonly ttlMs = 10 * 60_000,
    private readonly maxEntries = 1000,
  ) {
    this.hmacKey = serviceKey(ctx.config.secretKey, 'form key cache');
  }

  /**
   * The form's keys for this password: 401 when the password is missing or wrong. Every
   * check that reaches scrypt counts against the form's attempt limit (429 beyond it), which
   * both stops guessing and bounds the CPU that scrypt can be made to spend; it also counts
   * against the account's hashing budget, and waits in the process's bounded hasher.
   */
  async unlock(
    form: Pick<FormRow, 'id' | 'account_id' | 'view_key' | 'encryption_key'>,
    password: string | undefined,
  ): Promise<FormKeys> {
    const wrapped = wrappedKeyOf(form);
    if (!wrapped) throw new Error(`form ${form.id} has no key`);
    if (password === undefined) throw new EncryptionPasswordError(true);
    const id = createHmac('sha256', this.hmacKey).update(`${form.id}\0${wrapped.salt}\0${password}`).digest('base64');
    const now = this.ctx.clock.now();
    const hit = this.entries.get(id);
    if (hit && hit.until > now) return hit.keys;
    // Requests that arrive together with the same password share one check (and one attempt).
    let pending = this.checking.get(id);
    if (!pending) {
      pending = this.check(form, wrapped, password, id, now).finally(() => this.checking.delete(id));
      this.checking.set(id, pending);
    }
    return pending;
  }

  private async check(
    form: Pick<FormRow, 'id' | 'account_id' | 'view_key'>,
    wrapped: WrappedFormKey,
    password: string,
    id: string,
    now: number,
  ): Promise<FormKeys> {
    // Counted once the hasher has room: a 503 for a full queue costs the form no attempt.
    const kdf = this.ctx.hasher.kdf({
      account: form.account_id,
      attempt: () =>
        throttle(
          this.ctx.rateLimiter,
          `encryption:form:${form.id}`,
          this.ctx.config.encryptionPasswordAttempts,
          PASSWORD_ATTEMPT_WINDOW_SECONDS,
        ),
    });
    let keys: FormKeys;
    try {
      keys = await unwrapFormKey(wrapped, password, keyAad(form.view_key), kdf);
    } catch (error) {
      if (error instanceof WrongPasswordError) throw new EncryptionPasswordError(false);
      throw error;
    }
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(id, { keys, until: now + this.ttlMs });
    return keys;
  }
}
