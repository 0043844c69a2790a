/**
 * Reads kept under the database's change epoch (src/db/change-epoch.ts): the token look-up,
 * the form read and the forms list. Each case warms the second server's copies first (the
 * same request twice), then changes the data through the other server, as another process
 * would, or through the same one, and finds the change at once: a revoked token refused, a
 * changed form and a new submission count shown, another account's form still 404. On
 * PostgreSQL nothing is kept, and the same cases hold.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { migrateToLatest } from '../src/db/migrate.js';
import { changeEpoch } from '../src/db/change-epoch.js';
import {
  openFreshDatabase,
  openSqliteFile,
  dialectName,
  startTestApp,
  type TestAccount,
  type TestApp,
} from './support/helpers.js';

interface FormBody {
  id: number;
  name: string;
  submissionsCount: number;
  fields?: unknown[];
}

describe(`reads kept under the change epoch (${dialectName})`, () => {
  let a: TestApp;
  let b: TestApp;
  let owner: TestAccount;
  let formId: number;

  /** The same API call as owner's, made to server b. */
  const onB = <T>(method: string, path: string, token: string, body?: unknown) =>
    b.request<T>(method, `/api/v2025${path}`, { token, body });

  before(async () => {
    a = await startTestApp();
    b = await startTestApp({}, a);
    owner = await a.account('Epoch');
    const form = await owner.post<FormBody>('/forms', {
      name: 'First',
      fields: [{ type: 'text', label: 'Name' }],
    });
    assert.equal(form.status, 200, form.text);
    formId = form.body.id;
  });

  after(async () => {
    await b.close();
    await a.close();
  });

  /** Reads twice on b, so that whatever b keeps is warm. */
  async function warm(path: string, token = owner.token) {
    for (let i = 0; i < 2; i++) assert.equal((await onB('GET', path, token)).status, 200);
  }

  it('refuses a token revoked through the other server at once', async () => {
    const made = await owner.post<{ id: number; token: string }>('/tokens', { name: 'short-lived' });
    assert.equal(made.status, 200, made.text);
    await warm('/forms', made.body.token);
    const revoked = await owner.delete(`/tokens/${made.body.id}`);
    assert.equal(revoked.status, 200, revoked.text);
    const after = await onB('GET', '/forms', made.body.token);
    assert.equal(after.status, 401);
    assert.equal((after.body as { code: string }).code, 'token_invalid');
  });

  it('refuses a token revoked through the same server at once', async () => {
    const made = await owner.post<{ id: number; token: string }>('/tokens', { name: 'same server' });
    await warm(`/forms/${formId}`, made.body.token);
    assert.equal((await onB('DELETE', `/tokens/${made.body.id}`, owner.token)).status, 200);
    assert.equal((await onB('GET', `/forms/${formId}`, made.body.token)).status, 401);
  });

  it('refuses a kept token once it expires, with nothing written in between', async () => {
    const made = await owner.post<{ id: number; token: string }>('/tokens', { name: 'expiring', expiresInDays: 1 });
    await warm(`/forms/${formId}`, made.body.token);
    b.server.ctx.clock.advance(86_400_000 + 1000);
    try {
      assert.equal((await onB('GET', `/forms/${formId}`, made.body.token)).status, 401);
    } finally {
      b.server.ctx.clock.advance(-(86_400_000 + 1000));
    }
  });

  it('shows a form changed through the other server at once, in the read and in the list', async () => {
    await warm(`/forms/${formId}?withFields=true`);
    await warm('/forms');
    const renamed = await owner.put(`/forms/${formId}`, { name: 'Renamed elsewhere' });
    assert.equal(renamed.status, 200, renamed.text);
    const read = await onB<FormBody>('GET', `/forms/${formId}?withFields=true`, owner.token);
    assert.equal(read.body.name, 'Renamed elsewhere');
    const list = await onB<{ forms: FormBody[] }>('GET', '/forms', owner.token);
    assert.equal(list.body.forms.find((f) => f.id === formId)?.name, 'Renamed elsewhere');
  });

  it('shows a new field added through the same server at once', async () => {
    await warm(`/forms/${formId}?withFields=true`);
    const before = await onB<FormBody>('GET', `/forms/${formId}?withFields=true`, owner.token);
    const added = await onB('POST', `/forms/${formId}/fields`, owner.token, { type: 'email', label: 'Email' });
    assert.equal(added.status, 200, added.text);
    const read = await onB<FormBody>('GET', `/forms/${formId}?withFields=true`, owner.token);
    assert.equal(read.body.fields?.length, (before.body.fields?.length ?? 0) + 1);
  });

  it('counts a submission made through the other server at once, in the read and in the list', async () => {
    await warm(`/forms/${formId}`);
    await warm('/forms');
    const count = (await onB<FormBody>('GET', `/forms/${formId}`, owner.token)).body.submissionsCount;
    const made = await owner.post(`/forms/${formId}/submissions`, { fields: [] });
    assert.equal(made.status, 200, made.text);
    assert.equal((await onB<FormBody>('GET', `/forms/${formId}`, owner.token)).body.submissionsCount, count + 1);
    const list = await onB<{ forms: FormBody[] }>('GET', '/forms', owner.token);
    assert.equal(list.body.forms.find((f) => f.id === formId)?.submissionsCount, count + 1);
  });

  it("answers 404 for another account's form whose read is kept, and lists only the caller's forms", async () => {
    await warm(`/forms/${formId}`);
    await warm('/forms');
    const other = await a.account('Other');
    assert.equal((await onB('GET', `/forms/${formId}`, other.token)).status, 404);
    assert.equal((await onB('GET', `/forms/${formId}?withFields=true`, other.token)).status, 404);
    const list = await onB<{ forms: FormBody[]; total: number }>('GET', '/forms', other.token);
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.forms, []);
    assert.equal(list.body.total, 0);
  });

  it('shows a hosted page as changed through the other server at once (SQLite; PostgreSQL views may lag a second)', async () => {
    const made = await owner.post<FormBody & { url: string }>('/forms', {
      name: 'Page before',
      fields: [{ type: 'text', label: 'Name' }],
    });
    const path = new URL(made.body.url).pathname;
    for (let i = 0; i < 2; i++) assert.match((await b.request('GET', path)).text, /Page before/);
    assert.equal((await owner.put(`/forms/${made.body.id}`, { name: 'Page after' })).status, 200);
    if (dialectName === 'sqlite') assert.match((await b.request('GET', path)).text, /Page after/);
    assert.equal((await owner.delete(`/forms/${made.body.id}`)).status, 200);
    if (dialectName === 'sqlite') assert.notEqual((await b.request('GET', path)).status, 200);
  });

  it('drops a deleted form from the read and the list at once', async () => {
    const made = await owner.post<FormBody>('/forms', { name: 'Short-lived form' });
    await warm(`/forms/${made.body.id}`);
    await warm('/forms?pageSize=100');
    assert.equal((await owner.delete(`/forms/${made.body.id}`)).status, 200);
    assert.equal((await onB('GET', `/forms/${made.body.id}`, owner.token)).status, 404);
    const list = await onB<{ forms: FormBody[] }>('GET', '/forms?pageSize=100', owner.token);
    assert.ok(!list.body.forms.some((f) => f.id === made.body.id));
  });
});

describe('the change epoch itself (sqlite; PostgreSQL has none)', () => {
  it('moves with every write, its own or another connection’s, and stays still otherwise', async (t) => {
    const { db, file, drop } = await openSqliteFile();
    t.after(drop);
    await migrateToLatest(db);
    const epoch = () => changeEpoch(db.kysely);
    const first = epoch();
    assert.notEqual(first, undefined);
    await db.kysely.selectFrom('accounts').select('id').execute();
    assert.equal(epoch(), first, 'a read leaves it');
    await db.kysely.insertInto('accounts').values({ name: 'x', created_at: 1 }).execute();
    const second = epoch();
    assert.notEqual(second, first, 'a write of this connection moves it');
    // Statements that change no row change nothing: the worker's idle polls must not end
    // every kept read once a second.
    await db.kysely.updateTable('accounts').set({ name: 'z' }).where('name', '=', 'nobody').execute();
    await db.kysely.deleteFrom('accounts').where('name', '=', 'nobody').returning('id').execute();
    await db.kysely
      .insertInto('accounts')
      .values({ id: 1, name: 'again', created_at: 1 })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    assert.equal(epoch(), second, 'a write that changed no row leaves it');
    let inside: string | undefined = 'unset';
    await db.kysely.transaction().execute(async (trx) => {
      inside = changeEpoch(trx);
      await trx.selectFrom('accounts').select('id').execute();
    });
    assert.equal(inside, undefined, "a transaction's reads are not kept");
    assert.equal(epoch(), second, 'a transaction that changed nothing leaves it');
    await db.kysely.updateTable('accounts').set({ name: 'x' }).where('name', '=', 'x').returning('id').execute();
    const third = epoch();
    assert.notEqual(third, second, 'a write that changed a row (even to the same value) moves it');
    // A rollback moves it: reads on the connection while the transaction was open saw its changes.
    let during: string | undefined;
    await assert.rejects(
      db.kysely.transaction().execute(async (trx) => {
        await trx.insertInto('accounts').values({ name: 'undone', created_at: 1 }).execute();
        during = epoch();
        throw new Error('undo');
      }),
      /undo/,
    );
    assert.notEqual(during, third, 'the change inside the transaction moved it');
    assert.notEqual(epoch(), during, 'the rollback moved it again');
    const fourth = epoch();
    await db.kysely.transaction().execute(async (trx) => {
      await sql`SAVEPOINT s`.execute(trx);
      await trx.insertInto('accounts').values({ name: 'undone', created_at: 1 }).execute();
      during = epoch();
      await sql`ROLLBACK TO s`.execute(trx);
      await sql`RELEASE s`.execute(trx);
    });
    assert.notEqual(during, fourth);
    assert.notEqual(epoch(), during, 'a rollback to a savepoint moves it');
    const fifth = epoch();
    // Another connection, as another process would be.
    const other = new SQLite(file);
    try {
      other.prepare('UPDATE accounts SET name = ? WHERE name = ?').run('y', 'x');
    } finally {
      other.close();
    }
    // The pragma is read once per turn of the event loop: the next turn sees the commit.
    await new Promise((resolve) => setImmediate(resolve));
    assert.notEqual(epoch(), fifth, "another connection's commit moves it");
  });

  it('is undefined on PostgreSQL', { skip: dialectName !== 'postgres' }, async (t) => {
    const { db, drop } = await openFreshDatabase();
    t.after(drop);
    assert.equal(changeEpoch(db.kysely), undefined);
  });
});
