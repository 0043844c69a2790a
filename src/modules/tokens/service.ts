import type { Kysely } from 'kysely';
import { hashToken, newToken } from '../../crypto/secrets.js';
import type { Database, UserRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { ForbiddenError, invalid, NotFoundError } from '../../errors.js';
import { SCOPES, type Scope } from '../../http/access.js';
import { isoTime } from '../../http/schemas.js';
import {
  findUser as findAnyUser,
  insertToken,
  revokeToken as revokeTokenRow,
  type TokenOwner,
} from '../accounts/repository.js';
import { PAT_PREFIX, tokenPrefix } from '../accounts/service.js';
import { findRefreshToken, revokeGrant } from '../oauth/repository.js';
import { findUser } from '../users/repository.js';
import * as repo from './repository.js';
import { MAX_TOKEN_DAYS, type PersonalToken, type PersonalTokenCreate, type PersonalTokenCreated } from './schemas.js';
import type { UserRef } from '../permissions/caller.js';

const DAY_MS = 86_400_000;

/** What a new token is asked for with; from the command line, scopes are not checked by a schema first. */
type TokenRequest = Omit<PersonalTokenCreate, 'scopes'> & { scopes?: readonly string[] };

export function toPersonalToken(row: repo.PersonalTokenRow): PersonalToken {
  return {
    id: row.id,
    userId: row.user_id,
    name: row.name,
    prefix: row.token_prefix,
    scopes: row.scope === null ? [...SCOPES] : SCOPES.filter((s) => row.scope!.split(' ').includes(s)),
    created: isoTime(row.created_at),
    lastUsed: row.last_used_at === null ? null : isoTime(row.last_used_at),
    expiresAt: row.expires_at === null ? null : isoTime(row.expires_at),
  };
}

/**
 * The scopes a new token gets: the ones asked for, each of which the token making it must
 * hold (a token cannot make a stronger one), or by default the same as that token's.
 * null means every scope. `held` is null for every scope, as for the operator's command.
 */
function scopesFor(requested: readonly string[] | undefined, held: readonly string[] | null): Scope[] | null {
  if (requested === undefined) return held === null ? null : SCOPES.filter((s) => held.includes(s));
  const unknown = requested.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0)
    throw invalid(
      'invalid_request',
      'body.scopes',
      `unknown scope ${unknown.join(', ')}; scopes are ${SCOPES.join(', ')}`,
    );
  if (requested.length === 0) throw invalid('invalid_request', 'body.scopes', 'must name at least one scope');
  if (held !== null) {
    const missing = requested.filter((s) => !held.includes(s));
    if (missing.length > 0) {
      throw new ForbiddenError(
        'insufficient_scope',
        `A token can only be given scopes that the token making it holds; this one lacks ${missing.join(', ')}`,
      );
    }
  }
  return SCOPES.filter((s) => requested.includes(s));
}

function expiryFor(input: Pick<PersonalTokenCreate, 'expiresAt' | 'expiresInDays'>, now: number): number | null {
  if (input.expiresAt !== undefined && input.expiresInDays !== undefined)
    throw invalid('invalid_request', 'body.expiresInDays', 'give expiresAt or expiresInDays, not both');
  if (input.expiresInDays !== undefined) {
    if (!Number.isInteger(input.expiresInDays) || input.expiresInDays < 1 || input.expiresInDays > MAX_TOKEN_DAYS) {
      throw invalid(
        'invalid_request',
        'body.expiresInDays',
        `must be a whole number of days from 1 to ${MAX_TOKEN_DAYS}`,
      );
    }
    return now + input.expiresInDays * DAY_MS;
  }
  if (input.expiresAt === undefined) return null;
  const at = Date.parse(input.expiresAt);
  if (Number.isNaN(at)) throw invalid('invalid_request', 'body.expiresAt', 'must be an ISO 8601 date and time');
  if (at <= now) throw invalid('invalid_request', 'body.expiresAt', 'must be in the future');
  if (at > now + MAX_TOKEN_DAYS * DAY_MS)
    throw invalid('invalid_request', 'body.expiresAt', 'must be at most ten years ahead');
  return at;
}

async function issue(
  trx: Executor,
  user: UserRow,
  input: TokenRequest,
  held: readonly string[] | null,
  now: number,
): Promise<PersonalTokenCreated> {
  const name = input.name.trim();
  if (name === '' || name.length > 200) throw invalid('invalid_request', 'body.name', 'must be 1 to 200 characters');
  const scopes = scopesFor(input.scopes, held);
  const expiresAt = expiryFor(input, now);
  const token = newToken(PAT_PREFIX);
  const id = await insertToken(
    trx,
    {
      accountId: user.account_id,
      userId: user.id,
      hash: hashToken(token),
      kind: 'pat',
      name,
      expiresAt,
      scope: scopes === null ? null : scopes.join(' '),
      prefix: tokenPrefix(token),
    },
    now,
  );
  const row = await repo.findPersonalToken(trx, user.id, id);
  return { ...toPersonalToken(row!), token };
}

/**
 * The user of the caller's account whose tokens a request addresses. The owner's are the
 * owner's alone to manage, as the owner's password is; an admin addressing them gets 403.
 */
async function targetUser(db: Executor, who: TokenOwner, userId: number): Promise<UserRow> {
  const user = await findUser(db, who.accountId, userId);
  if (!user) throw new NotFoundError('user_not_found');
  if (user.role === 'owner' && who.userId !== user.id)
    throw new ForbiddenError('owner_protected', "Only the owner manages the owner's tokens");
  return user;
}

export async function listTokens(
  db: Kysely<Database>,
  who: TokenOwner,
  { userId }: UserRef,
): Promise<{ tokens: PersonalToken[] }> {
  const user = await targetUser(db, who, userId);
  return { tokens: (await repo.listPersonalTokens(db, user.id)).map(toPersonalToken) };
}

/**
 * Refuses a request made with an OAuth access token. A personal access token made by one would
 * outlive everything that bounds the application: it does not expire with the access token,
 * and neither deleting the client nor revoking the grant ends it. So only a personal access
 * token (or the operator's command, or an account's creation) makes one, whatever the scopes
 * of the OAuth token.
 */
function refuseOAuthToken(who: TokenOwner): void {
  if (who.clientId !== null) {
    throw new ForbiddenError(
      'insufficient_scope',
      'An OAuth access token cannot make personal access tokens, whatever its scopes; use a personal access token',
    );
  }
}

export async function createToken(
  db: Kysely<Database>,
  who: TokenOwner,
  { userId }: UserRef,
  input: PersonalTokenCreate,
  now: number,
): Promise<PersonalTokenCreated> {
  refuseOAuthToken(who);
  return transact(db, async (trx) => issue(trx, await targetUser(trx, who, userId), input, who.scopes, now));
}

export async function revokeToken(
  db: Kysely<Database>,
  who: TokenOwner,
  { userId, tokenId }: UserRef & { tokenId: number },
  now: number,
): Promise<{ id: number; revoked: true }> {
  return transact(db, async (trx) => {
    const user = await targetUser(trx, who, userId);
    if (!(await repo.findPersonalToken(trx, user.id, tokenId))) throw new NotFoundError('token_not_found');
    await revokeTokenRow(trx, tokenId, now);
    return { id: tokenId, revoked: true as const };
  });
}

// ---------------------------------------------------------------- the operator's command (no caller: any user, every scope)

export async function createTokenForUser(
  db: Kysely<Database>,
  userId: number,
  input: TokenRequest,
  now: number,
): Promise<PersonalTokenCreated> {
  return transact(db, async (trx) => {
    const user = await findAnyUser(trx, userId);
    if (!user) throw new NotFoundError('user_not_found');
    return issue(trx, user, input, null, now);
  });
}

export async function listTokensOfUser(
  db: Kysely<Database>,
  userId: number,
): Promise<{ userId: number; tokens: PersonalToken[] }> {
  if (!(await findAnyUser(db, userId))) throw new NotFoundError('user_not_found');
  return { userId, tokens: (await repo.listPersonalTokens(db, userId)).map(toPersonalToken) };
}

/**
 * Ends a live token named by id or by its value. A personal access token ends alone; an
 * OAuth access or refresh token ends its whole grant, as a replayed one would.
 */
export async function revokeAnyToken(
  db: Kysely<Database>,
  by: { id: number } | { token: string },
  now: number,
): Promise<{ tokenId: number; userId: number; kind: string; revoked: true }> {
  return transact(db, async (trx) => {
    if ('token' in by) {
      // A rotated refresh token still names its grant: ending it is what the holder of a leaked one wants.
      const refresh = await findRefreshToken(trx, hashToken(by.token));
      if (refresh && refresh.grantRevokedAt === null) {
        await revokeGrant(trx, refresh.grantId, now);
        return { tokenId: refresh.id, userId: refresh.userId, kind: 'oauth_refresh', revoked: true as const };
      }
    }
    const found = await repo.findAnyToken(trx, 'id' in by ? { id: by.id } : { hash: hashToken(by.token) });
    if (!found) throw new NotFoundError('token_not_found');
    if (found.grantId !== null) await revokeGrant(trx, found.grantId, now);
    else await revokeTokenRow(trx, found.id, now);
    return { tokenId: found.id, userId: found.userId, kind: found.kind, revoked: true as const };
  });
}
