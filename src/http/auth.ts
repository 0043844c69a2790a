import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import { hashToken } from '../crypto/secrets.js';
import { UnauthorizedError } from '../errors.js';
import { changeEpoch } from '../db/change-epoch.js';
import { findUnrevokedToken, type TokenOwner } from '../modules/accounts/repository.js';
import type { TokenUsage } from '../modules/tokens/usage.js';
import { countAuthFailure } from './rate-limit.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: TokenOwner | null;
  }
}

// Token shape: a short prefix and 43 base64url characters; anything else is not looked up.
const BEARER = /^Bearer ([A-Za-z0-9_]{1,16}_[A-Za-z0-9_-]{20,128})$/;

/** How many tokens' look-ups a process keeps (see TokenCache); past it the cache starts over. */
const TOKEN_CACHE_ENTRIES = 10_000;

/**
 * Token look-ups kept per process under the database's change epoch (src/db/change-epoch.ts),
 * keyed by the token itself (the process holds each request's token anyway; a hit so costs
 * no SHA-256). An entry is used only while the epoch is the one it was read
 * at: no write of any kind (a revocation, a user's removal or new role, a grant's end, in
 * this process or another) has happened since, so the token is exactly as the database
 * says. Expiry needs no write, so it is checked against the clock on every use. Where the
 * database has no epoch (PostgreSQL) nothing is kept and every request reads the token.
 */
class TokenCache {
  private readonly entries = new Map<string, { epoch: string; owner: TokenOwner; expiresAt: number | null }>();

  get(token: string, epoch: string): { owner: TokenOwner; expiresAt: number | null } | undefined {
    const entry = this.entries.get(token);
    return entry && entry.epoch === epoch ? entry : undefined;
  }

  set(token: string, epoch: string, found: { owner: TokenOwner; expiresAt: number | null }): void {
    if (this.entries.size >= TOKEN_CACHE_ENTRIES && !this.entries.has(token)) this.entries.clear();
    this.entries.set(token, { epoch, ...found });
  }
}

/**
 * Requires a live bearer token on every route of the scope it is registered in. The token
 * is looked up in the database, or on SQLite found in this process's cache while nothing has
 * been written since it was read there (TokenCache), so a revoked token stops working at once
 * in every process.
 */
export function requireBearerToken(scope: FastifyInstance, ctx: AppContext, usage: TokenUsage): void {
  const cache = new TokenCache();
  scope.addHook('onRequest', async (request) => {
    const header = request.headers.authorization;
    if (header === undefined) throw new UnauthorizedError('token_missing');
    const match = BEARER.exec(header);
    if (!match?.[1]) throw new UnauthorizedError('token_malformed');
    const now = ctx.clock.now();
    const token = match[1];
    // Read before the database is: a write in between moves the epoch, and the entry kept is never used.
    const epoch = changeEpoch(ctx.db);
    let found = epoch === undefined ? undefined : cache.get(token, epoch);
    if (!found) {
      found = await findUnrevokedToken(ctx.db, hashToken(token));
      if (found && epoch !== undefined) cache.set(token, epoch, found);
    }
    if (!found || (found.expiresAt !== null && found.expiresAt <= now)) {
      // A token that was looked up and not found is a guess or a stale token: counted per address.
      await countAuthFailure(ctx, request.ip);
      throw new UnauthorizedError('token_invalid');
    }
    const owner = found.owner;
    if (owner.clientId === null) usage.record(owner.tokenId, now);
    request.principal = owner;
  });
}

/** The caller of an authenticated route. */
export function principal(request: FastifyRequest): TokenOwner {
  if (!request.principal) throw new UnauthorizedError('unauthorized');
  return request.principal;
}
