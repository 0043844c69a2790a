import { createHash } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import type { AppContext } from '../../context.js';

/** A short version of a stored image's key, for URLs that may be cached for good (a new image has a new key). */
export const imageVersion = (key: string): string => createHash('sha256').update(key).digest('base64url').slice(0, 12);

/**
 * A stored image's bytes, with its type (read from its bytes when it was stored). A URL that
 * names the current version (v) is cached for good: a new image gets a new key, so a new URL.
 */
export async function sendImage(
  ctx: Pick<AppContext, 'storage'>,
  reply: FastifyReply,
  key: string,
  type: string | null,
  version: string | undefined,
) {
  const stored = await ctx.storage.get(key).catch(() => undefined);
  if (!stored)
    return reply.code(404).type('text/plain; charset=utf-8').header('cache-control', 'no-store').send('Not found');
  const current = version === imageVersion(key);
  return reply
    .headers({
      'content-type': type ?? 'application/octet-stream',
      'content-length': String(stored.size),
      'cache-control': current ? 'public, max-age=31536000, immutable' : 'public, max-age=300',
      etag: `"${imageVersion(key)}"`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'",
      'cross-origin-resource-policy': 'cross-origin',
    })
    .send(stored.stream);
}
