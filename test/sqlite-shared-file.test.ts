/**
 * One SQLite file written by several processes (`serve --no-worker` beside `formwork worker`,
 * the command line): the other processes are played by connections of better-sqlite3 of
 * their own, as test/read-epoch.test.ts does.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { transact } from '../src/db/transaction.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { dialectName, openSqliteFile, startTestApp } from './support/helpers.js';

const skip = dialectName !== 'sqlite' ? 'SQLite only' : false;

describe('a SQLite file shared with other processes', { skip }, () => {
  it('holds the write lock from the first read of a transaction, so a commit elsewhere cannot break it', async (t) => {
    const { db, file, drop } = await openSqliteFile();
    t.after(drop);
    await migrateToLatest(db);
    // The other process does not wait: a write lock it cannot have fails it at once.
    const other = new SQLite(file, { timeout: 0 });
    t.after(() => other.close());
    const insert = other.prepare('INSERT INTO accounts (name, created_at) VALUES (?, ?)');

    await transact(db.kysely, async (trx) => {
      // Read first, as most writes do (a check, a count), then write.
      await trx.selectFrom('accounts').select('id').execute();
      // With a deferred BEGIN the other process would commit here, and the write below would
      // fail with SQLITE_BUSY_SNAPSHOT however long busy_timeout is.
      assert.throws(() => insert.run('other process', 1), { code: 'SQLITE_BUSY' });
      await trx.insertInto('accounts').values({ name: 'this process', created_at: 1 }).execute();
    });
    insert.run('other process', 2);
    const names = await db.kysely.selectFrom('accounts').select('name').orderBy('id').execute();
    assert.deepEqual(
      names.map((r) => r.name),
      ['this process', 'other process'],
    );
  });

  it('answers 503 database_busy with Retry-After, writing nothing, when another process keeps the lock past busy_timeout', async (t) => {
    const app = await startTestApp();
    t.after(() => app.close());
    const owner = await app.account();
    const other = new SQLite(join(app.config.dataDir, 'formwork.db'));
    t.after(() => other.close());
    other.exec('BEGIN IMMEDIATE');
    try {
      // busy_timeout is 5 s: the request waits that long for the lock, then gives up.
      const refused = await owner.post('/forms', { name: 'Waits for the lock' });
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.body.code, 'database_busy');
      assert.equal(refused.headers.get('retry-after'), '1');
    } finally {
      other.exec('ROLLBACK');
    }
    const forms = await owner.get('/forms');
    assert.equal(forms.body.forms.length, 0);
    assert.equal((await owner.post('/forms', { name: 'Now it may' })).status, 200);
  });
});
