import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { hashToken } from '../crypto/secrets.js';
import type { Database } from '../db/schema.js';
import { UnauthorizedError } from '../errors.js';
import { findLiveToken, type TokenOwner } from '../modules/accounts/repository.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: TokenOwner | null;
  }
}

// Token shape: a short prefix and 43 base64url characters; anything else is not looked up.
const BEARER = /^Bearer ([A-Za-z0-9_]{1,16}_[A-Za-z0-9_-]{20,128})$/;

/** Requires a live bearer token on every route of the scope it is registered in. */
export function requireBearerToken(scope: FastifyInstance, db: Kysely<Database>): void {
  scope.addHook('onRequest', async (request) => {
    const header = request.headers.authorization;
    if (header === undefined) throw new UnauthorizedError('token_missing');
    const match = BEARER.exec(header);
    if (!match?.[1]) throw new UnauthorizedError('token_malformed');
    const owner = await findLiveToken(db, hashToken(match[1]), Date.now());
    if (!owner) throw new UnauthorizedError('token_invalid');
    request.principal = owner;
  });
}

/** The caller of an authenticated route. */
export function principal(request: FastifyRequest): TokenOwner {
  if (!request.principal) throw new UnauthorizedError('unauthorized');
  return request.principal;
}
