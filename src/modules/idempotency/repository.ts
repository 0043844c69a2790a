import type { Selectable } from 'kysely';
import type { IdempotencyKeysTable } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export type IdempotencyRow = Selectable<IdempotencyKeysTable>;

export async function findKey(db: Executor, accountId: number, key: string): Promise<IdempotencyRow | undefined> {
  return db.selectFrom('idempotency_keys').selectAll().where('account_id', '=', accountId).where('idem_key', '=', key).executeTakeFirst();
}

export async function insertClaim(db: Executor, accountId: number, key: string, requestHash: string, now: number): Promise<void> {
  await db.insertInto('idempotency_keys').values({ account_id: accountId, idem_key: key, request_hash: requestHash, state: 'running', created_at: now }).execute();
}

export async function deleteKey(db: Executor, accountId: number, key: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('account_id', '=', accountId).where('idem_key', '=', key).execute();
}

export async function deleteExpired(db: Executor, accountId: number, before: number): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('account_id', '=', accountId).where('created_at', '<', before).execute();
}

export async function saveResponse(db: Executor, accountId: number, key: string, status: number, body: string): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ state: 'done', response_status: status, response_body: body })
    .where('account_id', '=', accountId)
    .where('idem_key', '=', key)
    .execute();
}
