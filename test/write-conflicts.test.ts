/**
 * A write that PostgreSQL ends to break a deadlock wrote nothing, and the same request made
 * again would pass: it is answered 503 database_busy with Retry-After, as SQLite's lock held
 * past its wait is (test/sqlite-shared-file.test.ts), not 500. SQLite has one writer at a
 * time and no deadlock between two of them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { transact } from '../src/db/transaction.js';
import { ServiceUnavailableError } from '../src/errors.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

describe(`a write ended by the database (${dialectName})`, { skip: dialectName !== 'postgres' }, () => {
  let app: TestApp;
  let a: TestAccount;
  before(async () => {
    app = await startTestApp();
    a = await app.account();
  });
  after(async () => {
    await app?.close();
  });

  it('is a 503 database_busy, retryable, when PostgreSQL breaks a deadlock, and leaves nothing written', async () => {
    const db = app.server.ctx.db;
    const one = (await a.post('/forms', { name: 'One' })).body.id as number;
    const two = (await a.post('/forms', { name: 'Two' })).body.id as number;
    // Each transaction renames its first form, waits until the other has renamed its own, then
    // renames the other's: a cycle, which PostgreSQL breaks by ending one of them.
    let bothHold!: () => void;
    const held = new Promise<void>((resolve) => (bothHold = resolve));
    let holding = 0;
    const rename = (first: number, second: number, name: string) =>
      transact(db, async (trx) => {
        await trx.updateTable('forms').set({ name }).where('id', '=', first).execute();
        if (++holding === 2) bothHold();
        await held;
        await trx.updateTable('forms').set({ name }).where('id', '=', second).execute();
      });
    const outcomes = await Promise.allSettled([rename(one, two, 'A'), rename(two, one, 'B')]);

    const failed = outcomes.filter((o) => o.status === 'rejected');
    assert.equal(failed.length, 1, 'one of the two ended, the other went through');
    const error = failed[0]!.reason as unknown;
    assert.ok(error instanceof ServiceUnavailableError, String(error));
    assert.equal(error.code, 'database_busy');
    assert.equal(error.retryAfterSeconds, 1);
    // The one that went through renamed both; nothing of the other stayed.
    const names = await db.selectFrom('forms').select('name').where('id', 'in', [one, two]).execute();
    assert.equal(new Set(names.map((n) => n.name)).size, 1);
  });
});
