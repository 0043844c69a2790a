/**
 * PostgreSQL connections that end under the service (a server restart, a failover, an
 * administrator's pg_terminate_backend): the process goes on, the requests that were using
 * them are answered, and the next ones get new connections.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../src/db/schema.js';
import { dialectName, withApps, type Reply, type TestAccount, type TestApp } from './support/helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Ends one backend from another connection of the pool and waits for its end to reach the client. */
async function terminate(db: Kysely<Database>, pid: number): Promise<void> {
  const { rows } = await sql<{ ended: boolean }>`SELECT pg_terminate_backend(${pid}) AS ended`.execute(db);
  assert.equal(rows[0]?.ended, true);
  await sleep(200);
}

const backendPid = async (db: Kysely<Database>) =>
  (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(db)).rows[0]!.pid;

describe(`PostgreSQL connections lost under the service (${dialectName})`, { skip: dialectName !== 'postgres' }, () => {
  let app: TestApp;
  let a: TestAccount;
  withApps((apps) => ({ app, a } = apps), 1);

  it('a connection that ends while checked out and idle neither crashes the process nor stays in the pool', async () => {
    const db = app.server.ctx.db;
    await db.connection().execute(async (held) => {
      await terminate(db, await backendPid(held));
      // The client heard the server's FATAL while no query of it was running; had nothing
      // listened, the 'error' event would have ended the process here.
      await assert.rejects(sql`SELECT 1`.execute(held));
    });
    // In a transaction, between its statements.
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await terminate(db, await backendPid(trx));
        await sql`SELECT 1`.execute(trx);
      }),
    );
    // The pool has dropped the ended connections: every one it hands out now answers.
    const answers = await Promise.all(Array.from({ length: 12 }, () => sql`SELECT 1 AS one`.execute(db)));
    assert.equal(answers.length, 12);
    const created = await a.post('/forms', { name: 'After the loss', fields: [{ type: 'text', label: 'Name' }] });
    assert.equal(created.status, 200, JSON.stringify(created.body));
  });

  it('a connection the server ends during a statement is not handed out again', async () => {
    const db = app.server.ctx.db;
    for (let i = 0; i < 5; i++) {
      await db.connection().execute(async (held) => {
        const pid = await backendPid(held);
        // Its failure taken at once: it may come before the terminating statement's answer.
        const sleeping = sql`SELECT pg_sleep(10)`.execute(held).then(
          () => assert.fail('the statement outlived its connection'),
          (error: unknown) => error,
        );
        await sleep(50);
        await sql`SELECT pg_terminate_backend(${pid})`.execute(db);
        assert.match(String(await sleeping), /terminating connection/);
      });
      // Released just now, before its socket's end arrived: the pool hands out its most
      // recently released connection first.
      await sql`SELECT 1`.execute(db);
    }
  });

  /**
   * Sends a request while another transaction holds what it needs (lock), ends the request's
   * connection once its statement waits on that lock, and gives its answer.
   */
  async function endedWhileWaiting(
    lock: (trx: Transaction<Database>) => Promise<unknown>,
    send: () => Promise<Reply<any>>,
  ): Promise<Reply<any>> {
    const db = app.server.ctx.db;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = db.transaction().execute(async (trx) => {
      await lock(trx);
      locked();
      await released;
    });
    await isLocked;
    const answer = send();
    let waiting: number | undefined;
    for (let i = 0; i < 100 && waiting === undefined; i++) {
      await sleep(20);
      const { rows } = await sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(db);
      waiting = rows[0]?.pid;
    }
    assert.ok(waiting !== undefined, 'the request waits on the lock');
    await sql`SELECT pg_terminate_backend(${waiting})`.execute(db);
    // A request that waits again (made again by the service) gets the lock after a while, so
    // that the test fails on its answer rather than waiting for it forever.
    await Promise.race([answer, sleep(2000)]);
    release();
    await holder;
    return answer;
  }

  const assertUnavailable = (answered: Reply<any>) => {
    assert.equal(answered.status, 503, JSON.stringify(answered.body));
    assert.equal(answered.body.code, 'database_unavailable');
    assert.equal(answered.headers.get('retry-after'), '2');
  };

  it('a write whose connection ends under it is a 503 database_unavailable with Retry-After; made again, it passes', async () => {
    const form = (await a.post('/forms', { name: 'Held' })).body;
    const answered = await endedWhileWaiting(
      (trx) => trx.selectFrom('forms').select('id').where('id', '=', form.id).forUpdate().execute(),
      () => a.put(`/forms/${form.id}`, { name: 'Renamed' }),
    );
    assertUnavailable(answered);
    assert.equal((await a.get(`/forms/${form.id}`)).body.name, 'Held', 'nothing of the update stayed');
    const again = await a.put(`/forms/${form.id}`, { name: 'Renamed' });
    assert.equal(again.status, 200, JSON.stringify(again.body));
  });

  it('a read whose connection ends under it is a 503 database_unavailable too, not a 500', async () => {
    const form = (await a.post('/forms', { name: 'Read' })).body;
    const answered = await endedWhileWaiting(
      (trx) => sql`LOCK TABLE forms IN ACCESS EXCLUSIVE MODE`.execute(trx),
      () => a.get(`/forms/${form.id}`),
    );
    assertUnavailable(answered);
    assert.equal((await a.get(`/forms/${form.id}`)).status, 200);
  });

  it('a create whose connection ends under it is answered 503 and not made again on its own', async () => {
    const form = (await a.post('/forms', { name: 'Create', fields: [{ type: 'text', label: 'Name' }] })).body;
    const fields = (value: string) => ({ fields: [{ id: form.fields[0].id, value }] });
    // The first create keeps the form's definition; the second waits on the form's row, which
    // its statement reads FOR SHARE, and its connection ends there. It may as well have ended
    // after the commit: a second try of the service's own could make it twice.
    assert.equal((await a.post(`/forms/${form.id}/submissions`, fields('first'))).status, 200);
    const answered = await endedWhileWaiting(
      (trx) => trx.selectFrom('forms').select('id').where('id', '=', form.id).forUpdate().execute(),
      () => a.post(`/forms/${form.id}/submissions`, fields('second')),
    );
    assertUnavailable(answered);
    const listed = await a.get(`/forms/${form.id}/submissions`);
    assert.equal(listed.body.submissions.length, 1);
    assert.equal((await a.post(`/forms/${form.id}/submissions`, fields('second'))).status, 200);
  });

  it("every one of the pool's connections ended at once: the next requests are answered on new ones", async () => {
    const db = app.server.ctx.db;
    const form = (await a.post('/forms', { name: 'Restart', fields: [{ type: 'text', label: 'Name' }] })).body;
    // Connections of the pool in use, then idle in it.
    await Promise.all(Array.from({ length: 8 }, () => a.get(`/forms/${form.id}/submissions`)));
    const mine = await backendPid(db);
    await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> ${mine}`.execute(db);
    await sleep(200);
    for (let i = 0; i < 5; i++) {
      const created = await a.post(`/forms/${form.id}/submissions`, {
        fields: [{ id: form.fields[0].id, value: `after ${i}` }],
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
    }
    const listed = await a.get(`/forms/${form.id}/submissions`);
    assert.equal(listed.body.submissions.length, 5);
  });
});
