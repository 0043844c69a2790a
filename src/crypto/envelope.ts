import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  randomBytes,
  type DecipherGCM,
  type KeyObject,
} from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import type { Kdf } from './hasher.js';

/**
 * The encryption of encrypted forms.
 *
 * A form's data key is an X25519 key pair made at random when encryption is turned on. The
 * password only wraps the private half (scrypt, then AES-256-GCM), so changing the password
 * re-wraps one small record and touches no data. Each submission and file is sealed to the
 * public half: an ephemeral X25519 agreement, HKDF-SHA256, AES-256-GCM with a fresh key and
 * nonce. That lets the people who fill in a form submit without knowing the password, while
 * nothing the service stores can be read without it.
 */

/** What a form stores: the public key in the clear and the private key wrapped by the password. */
export interface WrappedFormKey {
  v: 1;
  kdf: 'scrypt';
  N: number;
  r: number;
  p: number;
  salt: string;
  iv: string;
  tag: string;
  wrapped: string;
  publicKey: string;
}

export class WrongPasswordError extends Error {
  constructor() {
    super('The encryption password is wrong');
  }
}

export class SealError extends Error {}

function kek(kdf: Kdf, password: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  return kdf(password.normalize('NFC'), salt, 32, { N: params.N, r: params.r, p: params.p });
}

function rawPublic(key: KeyObject): Buffer {
  // The last 32 bytes of an X25519 SPKI are the raw public key.
  return key.export({ format: 'der', type: 'spki' }).subarray(-32);
}

const SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');

export function publicKeyFromRaw(raw: Buffer): KeyObject {
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
}

export interface FormKeys {
  publicKey: KeyObject;
  privateKey: KeyObject;
}

export function newFormKeys(): FormKeys {
  return generateKeyPairSync('x25519');
}

/**
 * Wraps the private key with a key derived from the password; aad binds the record to its
 * form. kdf is the process's bounded hasher (src/crypto/hasher.ts).
 */
export async function wrapFormKey(keys: FormKeys, password: string, aad: string, kdf: Kdf): Promise<WrappedFormKey> {
  const salt = randomBytes(16);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', await kek(kdf, password, salt, kdf.params), iv);
  cipher.setAAD(Buffer.from(aad));
  const der = keys.privateKey.export({ format: 'der', type: 'pkcs8' });
  const wrapped = Buffer.concat([cipher.update(der), cipher.final()]);
  return {
    v: 1,
    kdf: 'scrypt',
    N: kdf.params.N,
    r: kdf.params.r,
    p: kdf.params.p,
    salt: salt.toString('base64'),
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    wrapped: wrapped.toString('base64'),
    publicKey: rawPublic(keys.publicKey).toString('base64'),
  };
}

/** The private key, or WrongPasswordError (GCM's tag is what tells a wrong password). */
export async function unwrapFormKey(
  record: WrappedFormKey,
  password: string,
  aad: string,
  kdf: Kdf,
): Promise<FormKeys> {
  const key = await kek(kdf, password, Buffer.from(record.salt, 'base64'), record);
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(record.iv, 'base64'), { authTagLength: TAG });
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(Buffer.from(record.tag, 'base64'));
  let der: Buffer;
  try {
    der = Buffer.concat([decipher.update(Buffer.from(record.wrapped, 'base64')), decipher.final()]);
  } catch {
    throw new WrongPasswordError();
  }
  const privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  const publicKey = createPublicKey(privateKey);
  // The stored public key is what new data is sealed to: one that is not the private key's
  // own (a record altered in the database) would seal data that this key cannot open.
  if (!rawPublic(publicKey).equals(Buffer.from(record.publicKey, 'base64')))
    throw new SealError("the form's stored public key does not belong to its private key");
  return { privateKey, publicKey };
}

export function formPublicKey(record: WrappedFormKey): KeyObject {
  return publicKeyFromRaw(Buffer.from(record.publicKey, 'base64'));
}

/** Private keys travel inside job payloads wrapped with a key derived from SECRET_KEY. */
export function exportPrivateKey(keys: FormKeys): Buffer {
  return keys.privateKey.export({ format: 'der', type: 'pkcs8' });
}

export function importPrivateKey(der: Buffer): FormKeys {
  const privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

const VERSION = 1;
const EPHEMERAL = 32;
const IV = 12;
const TAG = 16;
/** Bytes a sealed value carries besides its ciphertext: version, ephemeral key, nonce, tag. */
export const SEAL_OVERHEAD = 1 + EPHEMERAL + IV + TAG;

function contentKey(shared: Buffer, ephemeral: Buffer, recipient: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([ephemeral, recipient]), 'formwork seal v1', 32));
}

interface SealHeader {
  header: Buffer;
  key: Buffer;
  iv: Buffer;
}

const rawKeys = new WeakMap<KeyObject, Buffer>();

/** A public key's raw 32 bytes, remembered: exporting costs more than the agreement itself. */
function rawOf(key: KeyObject): Buffer {
  let raw = rawKeys.get(key);
  if (!raw) {
    raw = rawPublic(key);
    rawKeys.set(key, raw);
  }
  return raw;
}

/**
 * The agreement is what costs (a key pair and an X25519 operation, a few hundred microseconds
 * against tens for AES-GCM), so a process seals many values to the same form under one
 * ephemeral key for a while: each value still gets its own random nonce, far below GCM's
 * limit per key, and the ephemeral private key never leaves memory. Opening remembers the
 * content key per ephemeral key, so reading a form's rows costs one agreement per batch of
 * values sealed together rather than one per row.
 */
const SENDER_USES = 100_000;
/**
 * An age in this process's memory, not a time of the service: measured on the monotonic
 * clock (performance.now), which neither a test's ctx.clock nor a system clock step moves.
 */
const SENDER_MS = 10 * 60_000;
const senders = new Map<string, { ephRaw: Buffer; key: Buffer; uses: number; until: number }>();
const opened = new Map<string, Buffer>();
const OPENED_MAX = 10_000;

function sealHeader(recipient: KeyObject): SealHeader {
  const recipientRaw = rawOf(recipient);
  const id = recipientRaw.toString('base64');
  let sender = senders.get(id);
  const now = performance.now();
  if (!sender || sender.uses >= SENDER_USES || sender.until < now) {
    const eph = generateKeyPairSync('x25519');
    const ephRaw = rawPublic(eph.publicKey);
    const key = contentKey(diffieHellman({ privateKey: eph.privateKey, publicKey: recipient }), ephRaw, recipientRaw);
    sender = { ephRaw, key, uses: 0, until: now + SENDER_MS };
    if (senders.size >= 1000) senders.delete(senders.keys().next().value!);
    senders.set(id, sender);
  }
  sender.uses++;
  const iv = randomBytes(IV);
  return { header: Buffer.concat([Buffer.from([VERSION]), sender.ephRaw, iv]), key: sender.key, iv };
}

function openKey(keys: FormKeys, header: Buffer): { key: Buffer; iv: Buffer } {
  if (header.length < 1 + EPHEMERAL + IV || header[0] !== VERSION)
    throw new SealError('not a sealed value of a known version');
  const ephRaw = header.subarray(1, 1 + EPHEMERAL);
  const recipientRaw = rawOf(keys.publicKey);
  const id = `${recipientRaw.toString('base64')}:${ephRaw.toString('base64')}`;
  let key = opened.get(id);
  if (!key) {
    const shared = diffieHellman({ privateKey: keys.privateKey, publicKey: publicKeyFromRaw(ephRaw) });
    key = contentKey(shared, Buffer.from(ephRaw), recipientRaw);
    if (opened.size >= OPENED_MAX) opened.delete(opened.keys().next().value!);
    opened.set(id, key);
  }
  return { key, iv: header.subarray(1 + EPHEMERAL, 1 + EPHEMERAL + IV) };
}

/** version | ephemeral public key | nonce | ciphertext | tag */
export function seal(plaintext: Buffer, recipient: KeyObject, aad: string): Buffer {
  const { header, key, iv } = sealHeader(recipient);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  return Buffer.concat([header, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
}

export function open(sealed: Buffer, keys: FormKeys, aad: string): Buffer {
  if (sealed.length < SEAL_OVERHEAD) throw new SealError('sealed value too short');
  const { key, iv } = openKey(keys, sealed.subarray(0, 1 + EPHEMERAL + IV));
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG });
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(1 + EPHEMERAL + IV, sealed.length - TAG)), decipher.final()]);
  } catch {
    throw new SealError('the sealed value does not open with this key (altered, or another form)');
  }
}

/** The streaming form of seal(), for files: the same layout, the tag after the last byte. */
export function sealStream(recipient: KeyObject, aad: string): Transform {
  const { header, key, iv } = sealHeader(recipient);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  let started = false;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      if (!started) {
        started = true;
        this.push(header);
      }
      done(null, cipher.update(chunk));
    },
    flush(done: TransformCallback) {
      if (!started) this.push(header);
      this.push(cipher.final());
      done(null, cipher.getAuthTag());
    },
  });
}

/**
 * The streaming form of open(). GCM's tag comes last, so the last 16 bytes are held back
 * until the end; a file that was altered fails the stream at its end, and a reader that
 * must not pass on unchecked bytes should buffer or verify before sending.
 */
export function openStream(keys: FormKeys, aad: string): Transform {
  let pending: Buffer = Buffer.alloc(0);
  let decipher: DecipherGCM | undefined;
  const headerLength = 1 + EPHEMERAL + IV;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      try {
        if (!decipher) {
          if (pending.length < headerLength) return done();
          const { key, iv } = openKey(keys, pending.subarray(0, headerLength));
          decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG });
          decipher.setAAD(Buffer.from(aad));
          pending = pending.subarray(headerLength);
        }
        if (pending.length <= TAG) return done();
        const body = pending.subarray(0, pending.length - TAG);
        pending = pending.subarray(pending.length - TAG);
        done(null, decipher.update(body));
      } catch (error) {
        done(error as Error);
      }
    },
    flush(done: TransformCallback) {
      if (!decipher || pending.length !== TAG) return done(new SealError('sealed file too short'));
      decipher.setAuthTag(pending);
      try {
        done(null, decipher.final());
      } catch {
        done(new SealError('the sealed file does not open with this key (altered, or another form)'));
      }
    },
  });
}

/** A key for one purpose derived from SECRET_KEY (job payloads, blind indexes of unique values). */
export function serviceKey(secretKey: string, purpose: string): Buffer {
  // Remembered: some are derived on every request (idempotency hashes, unique values).
  const id = `${purpose}\0${secretKey}`;
  let key = serviceKeys.get(id);
  if (!key) {
    key = Buffer.from(hkdfSync('sha256', Buffer.from(secretKey), Buffer.alloc(0), `formwork ${purpose}`, 32));
    serviceKeys.set(id, key);
  }
  return key;
}

const serviceKeys = new Map<string, Buffer>();

/** AES-256-GCM under a service key: iv | ciphertext | tag. */
export function encryptWith(key: Buffer, plaintext: Buffer, aad: string): Buffer {
  const iv = randomBytes(IV);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  return Buffer.concat([iv, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
}

export function decryptWith(key: Buffer, sealed: Buffer, aad: string): Buffer {
  if (sealed.length < IV + TAG) throw new SealError('sealed value too short');
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV), { authTagLength: TAG });
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(IV, sealed.length - TAG)), decipher.final()]);
  } catch {
    throw new SealError('does not open with this SECRET_KEY (was it changed?)');
  }
}
