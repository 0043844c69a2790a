import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kdf } from './hasher.js';

/** A random secret with a readable prefix, such as fw_pat_… for personal access tokens. */
export function newToken(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

/**
 * Tokens are 256 random bits, so one SHA-256 is enough to make the stored value useless
 * to a thief while keeping the lookup a single indexed read per request.
 */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** A short random key for public URLs. */
export function newKey(bytes = 12): string {
  return randomBytes(bytes).toString('base64url');
}

// OWASP's scrypt floor: N=2^17, r=8, p=1.
const SCRYPT = { N: 2 ** 17, r: 8, p: 1 };

/** kdf is the process's bounded hasher (src/crypto/hasher.ts). */
export async function hashPassword(password: string, kdf: Kdf): Promise<string> {
  const salt = randomBytes(16);
  const key = await kdf(password, salt, 32, SCRYPT);
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string, kdf: Kdf): Promise<boolean> {
  const [scheme, n, r, p, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !key) return false;
  const expected = Buffer.from(key, 'base64');
  const actual = await kdf(password, Buffer.from(salt, 'base64'), expected.length, { N: Number(n), r: Number(r), p: Number(p) });
  return timingSafeEqual(actual, expected);
}
