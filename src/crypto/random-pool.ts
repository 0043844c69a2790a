import { randomBytes } from 'node:crypto';

// Random bytes for ids made on every request (page tokens, webhook message ids) are drawn in
// blocks: one call into OpenSSL per few hundred ids rather than one each. They are the same
// CSPRNG bytes, each handed out once; nothing here is a key or a secret kept for long.
const BLOCK_BYTES = 4096;
let block = Buffer.alloc(0);
let taken = 0;

/** `bytes` fresh random bytes (at most 256), as base64url. */
export function randomBase64url(bytes: number): string {
  if (bytes > 256) return randomBytes(bytes).toString('base64url');
  if (taken + bytes > block.length) {
    block = randomBytes(BLOCK_BYTES);
    taken = 0;
  }
  taken += bytes;
  return block.toString('base64url', taken - bytes, taken);
}
