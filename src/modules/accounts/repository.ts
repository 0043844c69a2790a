import { sql, type Kysely } from 'kysely';
import { sharedStatements } from '../../db/coalescer.js';
import { hotQuery } from '../../db/hot-query.js';
import type { Executor } from '../../db/transaction.js';
import type { Database, UserRow } from '../../db/schema.js';
import type { Caller } from '../permissions/caller.js';

/** The owner of a live token: the request's Caller, and what the token itself allows. */
export interface TokenOwner extends Caller {
  /** SHA-256 of the token: a key that is unique across databases (rate-limit counters). */
  tokenHash: string;
  /** The scopes the token was granted; null for a personal access token that holds every scope. */
  scopes: readonly string[] | null;
  /** The OAuth client the token was issued to, or null for personal access tokens. */
  clientId: number | null;
}

export async function insertAccount(
  db: Executor,
  name: string,
  now: number,
  parentAccountId: number | null = null,
): Promise<number> {
  const row = await db
    .insertInto('accounts')
    .values({ name, created_at: now, parent_account_id: parentAccountId })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function insertUser(
  db: Executor,
  user: { accountId: number; email: string; name: string; passwordHash: string | null; role: UserRow['role'] },
  now: number,
): Promise<number> {
  const row = await db
    .insertInto('users')
    .values({
      account_id: user.accountId,
      email: user.email,
      name: user.name,
      password_hash: user.passwordHash,
      role: user.role,
      created_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function accountExists(db: Executor, accountId: number): Promise<boolean> {
  return (await db.selectFrom('accounts').select('id').where('id', '=', accountId).executeTakeFirst()) !== undefined;
}

export async function accountName(db: Executor, accountId: number): Promise<string | undefined> {
  return (await db.selectFrom('accounts').select('name').where('id', '=', accountId).executeTakeFirst())?.name;
}

export async function findUser(db: Executor, userId: number): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirst();
}

export async function insertToken(
  db: Executor,
  token: {
    accountId: number;
    userId: number;
    hash: string;
    kind: string;
    name: string;
    expiresAt: number | null;
    /** Space-separated; null (the default) for every scope. */
    scope?: string | null;
    prefix?: string | null;
  },
  now: number,
): Promise<number> {
  const row = await db
    .insertInto('access_tokens')
    .values({
      account_id: token.accountId,
      user_id: token.userId,
      token_hash: token.hash,
      kind: token.kind,
      name: token.name,
      created_at: now,
      expires_at: token.expiresAt,
      scope: token.scope ?? null,
      token_prefix: token.prefix ?? null,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

const selectTokenColumns = (db: Executor) =>
  db
    .selectFrom('access_tokens as t')
    .innerJoin('users as u', 'u.id', 't.user_id')
    .select([
      't.id as tokenId',
      't.account_id as accountId',
      't.user_id as userId',
      'u.role as role',
      't.expires_at as expiresAt',
      't.scope as scope',
      't.client_id as clientId',
    ])
    .where('t.revoked_at', 'is', null);

const selectToken = hotQuery(1, (db, hash: string) => selectTokenColumns(db).where('t.token_hash', '=', hash));

/** Several look-ups in one statement (see findUnrevokedTokenWithOthers). */
const selectTokens = hotQuery(1, (db, hashes: string[]) =>
  selectTokenColumns(db)
    .select('t.token_hash as hash')
    .where('t.token_hash', '=', sql<string>`ANY(${hashes}::text[])`),
);

type TokenRow = Awaited<ReturnType<typeof selectToken>>[number];
type UnrevokedToken = { owner: TokenOwner; expiresAt: number | null };

const unrevokedOf = (row: TokenRow, hash: string): UnrevokedToken => ({
  owner: {
    tokenId: row.tokenId,
    tokenHash: hash,
    accountId: row.accountId,
    userId: row.userId,
    role: row.role,
    scopes: row.scope === null ? null : row.scope.split(' ').filter((s) => s !== ''),
    clientId: row.clientId,
  },
  expiresAt: row.expiresAt,
});

/** The live token with this hash and whom it acts for, or undefined. Runs on every request. */
export async function findLiveToken(db: Executor, hash: string, now: number): Promise<TokenOwner | undefined> {
  const found = await findUnrevokedToken(db, hash);
  if (!found || (found.expiresAt !== null && found.expiresAt <= now)) return undefined;
  return found.owner;
}

/** The unrevoked token with this hash, whom it acts for and when it expires (null: never), or undefined. */
export async function findUnrevokedToken(db: Executor, hash: string): Promise<UnrevokedToken | undefined> {
  const [row] = await selectToken(db, hash);
  return row && unrevokedOf(row, hash);
}

/**
 * findUnrevokedToken on a pool (PostgreSQL), in one statement with the look-ups that arrive
 * while it waits for a connection (Coalescer). Each of them arrived before the statement was
 * sent, so each reads the token as it is at its arrival or later: a revocation answered
 * before a request arrived is seen by that request.
 */
export async function findUnrevokedTokenWithOthers(
  db: Kysely<Database>,
  hash: string,
): Promise<UnrevokedToken | undefined> {
  const row = await sharedStatements(db, selectTogether, LOOK_UPS_TOGETHER).call(hash);
  return row && unrevokedOf(row, hash);
}

/**
 * At most 64 tokens in one look-up, one look-up out at a time (see Coalescer). A look-up is
 * one short read: with a second out, each carried about half as many tokens (5.5 against 10
 * under the benchmark's load), and PostgreSQL's start, snapshot and round trip per statement
 * and the driver's per answer cost the service and the server more than the wait for the one
 * out (docs/performance.md, "Twenty-seventh pass").
 */
const LOOK_UPS_TOGETHER = { kind: 'token_look_up', max: 64, inFlight: 1, slowMs: 50 };

async function selectTogether(connection: Executor, hashes: string[]): Promise<(TokenRow | undefined)[]> {
  const distinct = [...new Set(hashes)];
  if (distinct.length === 1) {
    const [row] = await selectToken(connection, distinct[0]!);
    return hashes.map(() => row);
  }
  const rows = new Map((await selectTokens(connection, distinct)).map((r) => [r.hash, r]));
  return hashes.map((h) => rows.get(h));
}

export async function revokeToken(db: Executor, tokenId: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('access_tokens')
    .set({ revoked_at: now })
    .where('id', '=', tokenId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
