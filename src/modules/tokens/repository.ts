import { sql } from 'kysely';
import type { Executor } from '../../db/transaction.js';

const TOKEN_COLUMNS = [
  'id',
  'user_id',
  'account_id',
  'name',
  'token_prefix',
  'scope',
  'created_at',
  'last_used_at',
  'expires_at',
] as const;

export interface PersonalTokenRow {
  id: number;
  user_id: number;
  account_id: number;
  name: string;
  token_prefix: string | null;
  scope: string | null;
  created_at: number;
  last_used_at: number | null;
  expires_at: number | null;
}

/** A user's personal access tokens that were not revoked (expired ones included), oldest first. */
export async function listPersonalTokens(db: Executor, userId: number): Promise<PersonalTokenRow[]> {
  return db
    .selectFrom('access_tokens')
    .select(TOKEN_COLUMNS)
    .where('user_id', '=', userId)
    .where('kind', '=', 'pat')
    .where('revoked_at', 'is', null)
    .orderBy('id')
    .execute();
}

/** One of them, by id; undefined when it is another user's, revoked, or not a personal access token. */
export async function findPersonalToken(
  db: Executor,
  userId: number,
  tokenId: number,
): Promise<PersonalTokenRow | undefined> {
  return db
    .selectFrom('access_tokens')
    .select(TOKEN_COLUMNS)
    .where('id', '=', tokenId)
    .where('user_id', '=', userId)
    .where('kind', '=', 'pat')
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
}

/** A live (not revoked) token by id or by hash, of any kind, with its grant: for the operator's command. */
export async function findAnyToken(db: Executor, by: { id: number } | { hash: string }) {
  return db
    .selectFrom('access_tokens')
    .select(['id', 'user_id as userId', 'kind', 'grant_id as grantId'])
    .$call((q) => ('id' in by ? q.where('id', '=', by.id) : q.where('token_hash', '=', by.hash)))
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
}

const LAST_USED_BATCH = 500;

/**
 * Writes last uses, one statement per 500 tokens. A value never moves back: another process
 * may have written a later use of the same token since this one's was taken.
 */
export async function writeLastUsed(
  db: Executor,
  uses: readonly (readonly [tokenId: number, at: number])[],
): Promise<void> {
  for (let i = 0; i < uses.length; i += LAST_USED_BATCH) {
    const batch = uses.slice(i, i + LAST_USED_BATCH);
    // The cast gives PostgreSQL a type for parameters that only a CASE branch holds.
    const at = sql<number>`case ${sql.ref('id')} ${sql.join(
      batch.map(([id, t]) => sql`when ${id} then cast(${t} as bigint)`),
      sql` `,
    )} end`;
    await db
      .updateTable('access_tokens')
      .set({ last_used_at: at })
      .where(
        'id',
        'in',
        batch.map(([id]) => id),
      )
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
      .execute();
  }
}

/**
 * Ends a user's personal access tokens and OAuth grants (their access and refresh tokens
 * with them), except the token keepTokenId and the grant it belongs to.
 */
export async function revokeUserCredentials(
  db: Executor,
  userId: number,
  keepTokenId: number | undefined,
  now: number,
): Promise<void> {
  const kept =
    keepTokenId === undefined
      ? undefined
      : await db.selectFrom('access_tokens').select('grant_id').where('id', '=', keepTokenId).executeTakeFirst();
  const keepGrantId = kept?.grant_id ?? undefined;
  const otherGrants = db
    .selectFrom('oauth_grants')
    .select('id')
    .where('user_id', '=', userId)
    .$if(keepGrantId !== undefined, (q) => q.where('id', '!=', keepGrantId!));
  await db
    .updateTable('oauth_refresh_tokens')
    .set({ revoked_at: now })
    .where('grant_id', 'in', otherGrants)
    .where('revoked_at', 'is', null)
    .execute();
  await db
    .updateTable('oauth_grants')
    .set({ revoked_at: now })
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .$if(keepGrantId !== undefined, (q) => q.where('id', '!=', keepGrantId!))
    .execute();
  // Personal access tokens and the access tokens of the grants just ended.
  await db
    .updateTable('access_tokens')
    .set({ revoked_at: now })
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .$if(keepTokenId !== undefined, (q) => q.where('id', '!=', keepTokenId!))
    .$if(keepGrantId !== undefined, (q) =>
      q.where((eb) => eb.or([eb('grant_id', 'is', null), eb('grant_id', '!=', keepGrantId!)])),
    )
    .execute();
}
