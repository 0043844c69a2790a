import type { Selectable } from 'kysely';
import type { IdempotencyKeysTable } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export type IdempotencyRow = Selectable<IdempotencyKeysTable>;

/** Who holds a claim: the process running the first request, and the token of this claim. */
export interface Claim {
  owner: number;
  token: string;
}

export async function findKey(db: Executor, accountId: number, key: string): Promise<IdempotencyRow | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('idem_key', '=', key)
    .executeTakeFirst();
}

export async function insertClaim(
  db: Executor,
  accountId: number,
  key: string,
  requestHash: string,
  claim: Claim,
  now: number,
): Promise<void> {
  await db
    .insertInto('idempotency_keys')
    .values({
      account_id: accountId,
      idem_key: key,
      request_hash: requestHash,
      state: 'running',
      created_at: now,
      owner: claim.owner,
      token: claim.token,
    })
    .execute();
}

/** Moves a running claim to a new owner, if it is still the claim that was judged abandoned (its token, null on old claims). */
export async function takeOverClaim(
  db: Executor,
  accountId: number,
  key: string,
  abandoned: string | null,
  claim: Claim,
  now: number,
): Promise<boolean> {
  const r = await db
    .updateTable('idempotency_keys')
    .set({ owner: claim.owner, token: claim.token, created_at: now })
    .where('account_id', '=', accountId)
    .where('idem_key', '=', key)
    .where('state', '=', 'running')
    .where((eb) => (abandoned === null ? eb('token', 'is', null) : eb('token', '=', abandoned)))
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/** Lets go of a claim, if this request still holds it. */
export async function releaseClaim(db: Executor, accountId: number, key: string, token: string): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', accountId)
    .where('idem_key', '=', key)
    .where('state', '=', 'running')
    .where('token', '=', token)
    .execute();
}

export async function deleteExpired(db: Executor, accountId: number, before: number): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', accountId)
    .where('created_at', '<', before)
    .execute();
}

/** Records the response, if this request still holds the claim; false when another request took it over. */
export async function saveResponse(
  db: Executor,
  accountId: number,
  key: string,
  token: string,
  status: number,
  body: string,
): Promise<boolean> {
  const r = await db
    .updateTable('idempotency_keys')
    .set({ state: 'done', response_status: status, response_body: body })
    .where('account_id', '=', accountId)
    .where('idem_key', '=', key)
    .where('state', '=', 'running')
    .where('token', '=', token)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}
