import type { Kysely } from 'kysely';

/**
 * Every keyed request deletes its account's expired keys (account_id = ? AND created_at < ?).
 * With the primary key (account_id, idem_key) and an index on created_at alone, SQLite took
 * the primary key for the equality and read every key the account had ever kept, so a busy
 * account's POSTs slowed as its keys piled up (half the CPU of the hosted form's submit in the
 * benchmark). One index on both columns makes the delete a range read of the expired keys.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('idempotency_keys_created').execute();
  await db.schema
    .createIndex('idempotency_keys_account_created')
    .on('idempotency_keys')
    .columns(['account_id', 'created_at'])
    .execute();
}
