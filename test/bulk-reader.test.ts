/**
 * The connection that exports read through (src/db/bulk-reader.ts): on SQLite a read-only
 * connection of its own, which sees what is committed and nothing else and cannot write;
 * on PostgreSQL, and inside a transaction, the database itself.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bulkReaderOf } from '../src/db/bulk-reader.js';
import type { Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { dialectName, openFreshDatabase, TEST_PG_URL } from './support/helpers.js';

let db: Db;
let cleanup: () => Promise<void>;

before(async () => {
  ({ db, drop: cleanup } = await openFreshDatabase());
  await migrateToLatest(db);
});
after(async () => {
  await cleanup();
});

const accountNames = async (reader: ReturnType<typeof bulkReaderOf>) =>
  (await reader.selectFrom('accounts').select('name').orderBy('id').execute()).map((r) => r.name);

describe(`bulk reader (${dialectName})`, () => {
  it('reads what is committed, and inside a transaction is the transaction', async () => {
    const k = db.kysely;
    const reader = bulkReaderOf(k);
    assert.equal(db.dialect === 'sqlite', reader !== k, 'a connection of its own on SQLite only');
    await k.insertInto('accounts').values({ name: 'Committed', created_at: 1 }).execute();
    assert.deepEqual(await accountNames(reader), ['Committed']);

    await k
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto('accounts').values({ name: 'Uncommitted', created_at: 2 }).execute();
        assert.equal(bulkReaderOf(trx), trx);
        assert.deepEqual(await accountNames(bulkReaderOf(trx)), ['Committed', 'Uncommitted']);
        // A separate connection does not see the open transaction's rows.
        if (reader !== k) assert.deepEqual(await accountNames(reader), ['Committed']);
        throw new Error('roll back');
      })
      .catch((error: Error) => assert.equal(error.message, 'roll back'));
    assert.deepEqual(await accountNames(reader), ['Committed']);
  });

  it('cannot write on SQLite', { skip: TEST_PG_URL !== undefined }, async () => {
    await assert.rejects(
      bulkReaderOf(db.kysely).insertInto('accounts').values({ name: 'Through the reader', created_at: 3 }).execute(),
      /readonly/i,
    );
  });
});
