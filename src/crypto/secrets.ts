import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kdf, ScryptParams } from './hasher.js';

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

/**
 * A scrypt hash of the password; kdf is the process's bounded hasher (src/crypto/hasher.ts).
 * With sameSaltAs (another stored hash), the salt of that hash: the hashes of one email in
 * several accounts share a salt, so that signing in derives one key however many accounts
 * the email is in (see verifyPasswords).
 */
export async function hashPassword(password: string, kdf: Kdf, sameSaltAs?: string): Promise<string> {
  const salt = (sameSaltAs === undefined ? undefined : parseHash(sameSaltAs)?.salt) ?? randomBytes(16);
  const key = await kdf(password, salt, 32, kdf.params);
  return storedHash(kdf.params, salt, key);
}

function storedHash({ N, r, p }: ScryptParams, salt: Buffer, key: Buffer): string {
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/**
 * A hash that no password matches, made with params: checked in place of an unknown email's,
 * so that a wrong email takes as long as a wrong password.
 */
export function unmatchableHash(params: ScryptParams): string {
  return storedHash(params, Buffer.alloc(16), Buffer.alloc(32));
}

interface ParsedHash {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  key: Buffer;
}

function parseHash(stored: string): ParsedHash | undefined {
  const [scheme, n, r, p, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !key) return undefined;
  const parsed = {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    salt: Buffer.from(salt, 'base64'),
    key: Buffer.from(key, 'base64'),
  };
  // An empty key would equal an empty derivation: a damaged hash must match no password.
  return parsed.key.length >= 16 && parsed.salt.length > 0 ? parsed : undefined;
}

export async function verifyPassword(password: string, stored: string, kdf: Kdf): Promise<boolean> {
  return (await verifyPasswords(password, [stored], kdf))[0]!;
}

/**
 * Whether the password is the one of each stored hash. The key is derived once per distinct
 * salt (and parameters), one after the other to bound memory: hashes that share a salt cost
 * one derivation together, so the time says nothing about how many there are. Each derivation
 * is one call of kdf, so it takes one slot of the bounded hasher and counts once.
 */
export async function verifyPasswords(password: string, stored: readonly string[], kdf: Kdf): Promise<boolean[]> {
  const derived = new Map<string, Buffer>();
  const results: boolean[] = [];
  for (const hash of stored) {
    const parsed = parseHash(hash);
    if (!parsed) {
      results.push(false);
      continue;
    }
    const id = `${parsed.N}$${parsed.r}$${parsed.p}$${parsed.salt.toString('base64')}$${parsed.key.length}`;
    let actual = derived.get(id);
    if (!actual) {
      actual = await kdf(password, parsed.salt, parsed.key.length, { N: parsed.N, r: parsed.r, p: parsed.p });
      derived.set(id, actual);
    }
    results.push(timingSafeEqual(actual, parsed.key));
  }
  return results;
}
