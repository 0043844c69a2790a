import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import { hashToken } from '../crypto/secrets.js';
import { UnauthorizedError } from '../errors.js';
import { findLiveToken, type TokenOwner } from '../modules/accounts/repository.js';
import type { TokenUsage } from '../modules/tokens/usage.js';
import { countAuthFailure } from './rate-limit.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: TokenOwner | null;
  }
}

// Token shape: a short prefix and 43 base64url characters; anything else is not looked up.
const BEARER = /^Bearer ([A-Za-z0-9_]{1,16}_[A-Za-z0-9_-]{20,128})$/;

/**
 * Requires a live bearer token on every route of the scope it is registered in. The token
 * is looked up in the database on every request (one indexed read, no cache), so a revoked
 * token stops working at once in every process.
 */
export function requireBearerToken(scope: FastifyInstance, ctx: AppContext, usage: TokenUsage): void {
  scope.addHook('onRequest', async (request) => {
    const header = request.headers.authorization;
    if (header === undefined) throw new UnauthorizedError('Send an access token as Authorization: Bearer <token>', 'token_missing');
    const match = BEARER.exec(header);
    if (!match?.[1]) throw new UnauthorizedError('The Authorization header is not a bearer token', 'token_malformed');
    const now = ctx.clock.now();
    const owner = await findLiveToken(ctx.db, hashToken(match[1]), now);
    if (!owner) {
      // A token that was looked up and not found is a guess or a stale token: counted per address.
      await countAuthFailure(ctx, request.ip);
      throw new UnauthorizedError('The access token is unknown, expired or revoked', 'token_invalid');
    }
    if (owner.clientId === null) usage.record(owner.tokenId, now);
    request.principal = owner;
  });
}

/** The caller of an authenticated route. */
export function principal(request: FastifyRequest): TokenOwner {
  if (!request.principal) throw new UnauthorizedError();
  return request.principal;
}
