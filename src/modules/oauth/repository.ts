import type { Selectable } from 'kysely';
import type { OAuthCodesTable, OAuthRefreshTokensTable } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export async function insertGrant(
  db: Executor,
  g: { clientId: number; userId: number; accountId: number; scope: string },
  now: number,
): Promise<number> {
  const row = await db
    .insertInto('oauth_grants')
    .values({ client_id: g.clientId, user_id: g.userId, account_id: g.accountId, scope: g.scope, created_at: now })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function insertCode(
  db: Executor,
  code: Omit<Selectable<OAuthCodesTable>, 'id' | 'used_at'>,
): Promise<void> {
  await db.insertInto('oauth_codes').values(code).execute();
}

/** A code with what it was issued for; the grant's client, user and state come along. */
export async function findCode(db: Executor, codeHash: string) {
  return db
    .selectFrom('oauth_codes as c')
    .innerJoin('oauth_grants as g', 'g.id', 'c.grant_id')
    .select([
      'c.id',
      'c.grant_id as grantId',
      'c.redirect_uri as redirectUri',
      'c.scope',
      'c.code_challenge as codeChallenge',
      'c.code_challenge_method as codeChallengeMethod',
      'c.expires_at as expiresAt',
      'c.used_at as usedAt',
      'g.client_id as clientId',
      'g.user_id as userId',
      'g.account_id as accountId',
      'g.revoked_at as grantRevokedAt',
    ])
    .where('c.code_hash', '=', codeHash)
    .executeTakeFirst();
}

/** Marks a code used; false when it already was (a concurrent exchange won). */
export async function useCode(db: Executor, id: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('oauth_codes')
    .set({ used_at: now })
    .where('id', '=', id)
    .where('used_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function insertAccessToken(
  db: Executor,
  t: {
    accountId: number;
    userId: number;
    hash: string;
    clientId: number;
    clientName: string;
    grantId: number;
    scope: string;
    expiresAt: number;
  },
  now: number,
): Promise<void> {
  await db
    .insertInto('access_tokens')
    .values({
      account_id: t.accountId,
      user_id: t.userId,
      token_hash: t.hash,
      kind: 'oauth',
      name: t.clientName,
      created_at: now,
      expires_at: t.expiresAt,
      scope: t.scope,
      client_id: t.clientId,
      grant_id: t.grantId,
    })
    .execute();
}

export async function insertRefreshToken(
  db: Executor,
  t: Omit<Selectable<OAuthRefreshTokensTable>, 'id' | 'rotated_at' | 'revoked_at'>,
): Promise<void> {
  await db.insertInto('oauth_refresh_tokens').values(t).execute();
}

export async function findRefreshToken(db: Executor, hash: string) {
  return db
    .selectFrom('oauth_refresh_tokens as r')
    .innerJoin('oauth_grants as g', 'g.id', 'r.grant_id')
    .select([
      'r.id',
      'r.grant_id as grantId',
      'r.scope',
      'r.created_at as createdAt',
      'r.expires_at as expiresAt',
      'r.rotated_at as rotatedAt',
      'r.revoked_at as revokedAt',
      'g.client_id as clientId',
      'g.user_id as userId',
      'g.account_id as accountId',
      'g.revoked_at as grantRevokedAt',
    ])
    .where('r.token_hash', '=', hash)
    .executeTakeFirst();
}

/** Marks a refresh token exchanged; false when it already was (a replay or a concurrent exchange). */
export async function rotateRefreshToken(db: Executor, id: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('oauth_refresh_tokens')
    .set({ rotated_at: now })
    .where('id', '=', id)
    .where('rotated_at', 'is', null)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Ends a grant: every access and refresh token it led to stops working. */
export async function revokeGrant(db: Executor, grantId: number, now: number): Promise<void> {
  await db
    .updateTable('oauth_grants')
    .set({ revoked_at: now })
    .where('id', '=', grantId)
    .where('revoked_at', 'is', null)
    .execute();
  await db
    .updateTable('access_tokens')
    .set({ revoked_at: now })
    .where('grant_id', '=', grantId)
    .where('revoked_at', 'is', null)
    .execute();
  await db
    .updateTable('oauth_refresh_tokens')
    .set({ revoked_at: now })
    .where('grant_id', '=', grantId)
    .where('revoked_at', 'is', null)
    .execute();
}

/** An access token by hash (OAuth or, with no client, personal), with its state, for introspection and revocation. */
export async function findAccessToken(db: Executor, hash: string) {
  return db
    .selectFrom('access_tokens as t')
    .innerJoin('users as u', 'u.id', 't.user_id')
    .select([
      't.id',
      't.client_id as clientId',
      't.grant_id as grantId',
      't.user_id as userId',
      't.account_id as accountId',
      'u.email as email',
      't.scope',
      't.created_at as createdAt',
      't.expires_at as expiresAt',
      't.revoked_at as revokedAt',
    ])
    .where('t.token_hash', '=', hash)
    .executeTakeFirst();
}

export async function userEmail(db: Executor, userId: number): Promise<string | undefined> {
  const row = await db.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirst();
  return row?.email;
}
