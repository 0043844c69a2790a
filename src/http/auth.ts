import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import { hashToken } from '../crypto/secrets.js';
import { UnauthorizedError } from '../errors.js';
import { changeEpoch } from '../db/change-epoch.js';
import { findUnrevokedToken, findUnrevokedTokenWithOthers, type TokenOwner } from '../modules/accounts/repository.js';
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

  forget(token: string): void {
    this.entries.delete(token);
  }
}

/**
 * The epoch of the tokens last read on PostgreSQL (BearerTokens.unconfirmedOwner): one that never
 * moves, since such an entry is never taken as the database's word.
 */
const LAST_READ = 'last read';

/**
 * Bearer tokens checked against the database, or on SQLite against this process's cache while
 * nothing has been written since it was read there (TokenCache), so a revoked token stops
 * working at once in every process. One per app: the API's routes (requireBearerToken) and
 * EarlyRoutes share it.
 */
export class BearerTokens {
  private readonly cache = new TokenCache();
  /** On PostgreSQL: each token's owner as last read, for unconfirmedOwner. */
  private readonly lastRead = new TokenCache();

  constructor(
    private readonly ctx: AppContext,
    private readonly usage: TokenUsage,
  ) {}

  /** The owner of the token in an Authorization header; 401 (and an authentication failure counted) when it has none. */
  async owner(header: string | undefined, ip: string): Promise<TokenOwner> {
    if (header === undefined) throw new UnauthorizedError('token_missing');
    const token = BEARER.exec(header)?.[1];
    if (!token) throw new UnauthorizedError('token_malformed');
    const owner = await this.ownerOf(token);
    if (owner) return owner;
    // A token that was looked up and not found is a guess or a stale token: counted per address.
    await countAuthFailure(this.ctx, ip);
    throw new UnauthorizedError('token_invalid');
  }

  /**
   * The owner of the live token in an Authorization header, or undefined (none, or not live),
   * counting nothing: for an early route, which leaves every refusal to the route (owner()).
   */
  async lookUp(header: string | undefined): Promise<TokenOwner | undefined> {
    const token = header === undefined ? undefined : BEARER.exec(header)?.[1];
    return token === undefined ? undefined : this.ownerOf(token);
  }

  private async ownerOf(token: string): Promise<TokenOwner | undefined> {
    const now = this.ctx.clock.now();
    // Read before the database is: a write in between moves the epoch, and the entry kept is never used.
    const epoch = changeEpoch(this.ctx.db);
    let found = epoch === undefined ? undefined : this.cache.get(token, epoch);
    if (!found) {
      const hash = hashToken(token);
      if (epoch === undefined) {
        found = await findUnrevokedTokenWithOthers(this.ctx.db, hash);
        if (found) this.lastRead.set(token, LAST_READ, found);
        else this.lastRead.forget(token);
      } else {
        found = await findUnrevokedToken(this.ctx.db, hash);
        if (found) this.cache.set(token, epoch, found);
      }
    }
    return found && this.live(found, now);
  }

  /**
   * The owner of a live token that this process holds for the database's current epoch,
   * without waiting; undefined in every other case (no or another header, a token not kept,
   * expired, PostgreSQL), where owner() must tell.
   */
  keptOwner(header: string | undefined): TokenOwner | undefined {
    // The epoch first: PostgreSQL has none, and owner() then parses the header alone.
    const epoch = changeEpoch(this.ctx.db);
    if (epoch === undefined || header === undefined) return undefined;
    const token = BEARER.exec(header)?.[1];
    const found = token === undefined ? undefined : this.cache.get(token, epoch);
    return found && this.live(found, this.ctx.clock.now());
  }

  /**
   * On PostgreSQL, the owner of the token in an Authorization header as this process last read
   * it, if it has not expired since, without waiting and without recording its use; undefined
   * in every other case. Not the database's word: the token may have been revoked or its
   * user's role changed since. Only a write that checks the token again in its own statement
   * may act for it (the early create: repository.ts, TokenCheck), and record its use then
   * (confirmedUse); forget() drops it when that check fails.
   */
  unconfirmedOwner(header: string | undefined): TokenOwner | undefined {
    if (header === undefined || changeEpoch(this.ctx.db) !== undefined) return undefined;
    const token = BEARER.exec(header)?.[1];
    const found = token === undefined ? undefined : this.lastRead.get(token, LAST_READ);
    return found && (found.expiresAt === null || found.expiresAt > this.ctx.clock.now()) ? found.owner : undefined;
  }

  /** Records the use of an unconfirmedOwner's token, once a write has found it live. */
  confirmedUse(owner: TokenOwner, now = this.ctx.clock.now()): void {
    // Only personal access tokens show their last use (TokenUsage).
    if (owner.clientId === null) this.usage.record(owner.tokenId, now);
  }

  /** Drops the token in an Authorization header from what unconfirmedOwner answers from. */
  forget(header: string | undefined): void {
    const token = header === undefined ? undefined : BEARER.exec(header)?.[1];
    if (token !== undefined) this.lastRead.forget(token);
  }

  /** The token's owner if it has not expired, its use recorded. */
  private live(found: { owner: TokenOwner; expiresAt: number | null }, now: number): TokenOwner | undefined {
    if (found.expiresAt !== null && found.expiresAt <= now) return undefined;
    this.confirmedUse(found.owner, now);
    return found.owner;
  }
}

/** Requires a live bearer token on every route of the scope it is registered in (BearerTokens). */
export function requireBearerToken(scope: FastifyInstance, tokens: BearerTokens): void {
  // A callback hook: a token this process holds (keptOwner) is answered without a promise and
  // a turn of the microtask queue, on every request that carries it.
  scope.addHook('onRequest', (request, _reply, done) => {
    const kept = tokens.keptOwner(request.headers.authorization);
    if (kept) {
      request.principal = kept;
      return done();
    }
    tokens.owner(request.headers.authorization, request.ip).then((owner) => {
      request.principal = owner;
      done();
    }, done);
  });
}

/** The caller of an authenticated route. */
export function principal(request: FastifyRequest): TokenOwner {
  if (!request.principal) throw new UnauthorizedError('unauthorized');
  return request.principal;
}
