import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomBase64url } from '../../crypto/random-pool.js';

/**
 * The signed values of the hosted pages. A load token goes into each page the service
 * renders: it tells when the page was loaded (the minimum time to submit) and serves as the
 * submit's idempotency key (a second click or a reload of the answer submits once).
 */

const LOAD_TOKEN = /^([0-9a-z]{1,12})\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22})$/;

function sign(secret: string, purpose: string, text: string): string {
  return createHmac('sha256', secret).update(`${purpose}\0${text}`).digest('base64url').slice(0, 22);
}

function same(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

/** The last signature made, per form: every page view of a form within one second shares it. */
const lastSignature = new Map<number, { second: number; sig: string }>();

/**
 * The signature covers the form and the second the page was loaded, which is what the checks
 * judge; the random part only makes each page's idempotency key its own (anyone may get a
 * fresh one by loading the page, so it needs no signature).
 */
export function loadToken(secret: string, formId: number, now: number): string {
  const second = Math.floor(now / 1000);
  let last = lastSignature.get(formId);
  if (!last || last.second !== second) {
    if (lastSignature.size > 10_000) lastSignature.clear();
    last = { second, sig: sign(secret, `load:${formId}`, second.toString(36)) };
    lastSignature.set(formId, last);
  }
  return `${second.toString(36)}.${randomBase64url(12)}.${last.sig}`;
}

/** When the page with this token was loaded (to the second), or undefined when the token is not one of ours for this form. */
export function loadedAt(secret: string, formId: number, token: string): number | undefined {
  const m = LOAD_TOKEN.exec(token);
  if (!m || !same(m[3]!, sign(secret, `load:${formId}`, m[1]!))) return undefined;
  return parseInt(m[1]!, 36) * 1000;
}

/**
 * A prefill token: a random id, which names the stored values, and its signature. An
 * encrypted form's token carries a third part, a random key that seals the values and that
 * the service does not keep: the database alone cannot open them, and the link needs no
 * password.
 */
export function prefillToken(secret: string, sealed: boolean): { id: string; token: string; key?: string } {
  const id = randomBytes(16).toString('base64url');
  const token = `${id}.${sign(secret, 'prefill', id)}`;
  if (!sealed) return { id, token };
  const key = randomBytes(16).toString('base64url');
  return { id, token: `${token}.${key}`, key };
}

const PREFILL_TOKEN = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{22})(?:\.([A-Za-z0-9_-]{22}))?$/;

/** The stored id that a prefill token names, and its sealing key if it has one, when its signature holds. */
export function prefillId(secret: string, token: string): { id: string; key?: string } | undefined {
  const m = PREFILL_TOKEN.exec(token);
  if (!m || !same(m[2]!, sign(secret, 'prefill', m[1]!))) return undefined;
  return m[3] === undefined ? { id: m[1]! } : { id: m[1]!, key: m[3] };
}
