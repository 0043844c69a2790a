/**
 * On PostgreSQL, plain creates and token look-ups that arrive together share one statement
 * (src/db/coalescer.ts): two statements of a kind out at once, the next taking every call that
 * queued meanwhile. Each call must still get exactly its own answer: its row, "not written"
 * when its form moved on or a unique value was taken (by anyone, including another call of the
 * same statement), and its own token's owner, revoked or not. A statement held up by a lock
 * must not hold up calls for other forms.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { findUnrevokedTokenWithOthers } from '../src/modules/accounts/repository.js';
import { hashToken } from '../src/crypto/secrets.js';
import { Coalescer, sharedCountsOf } from '../src/db/coalescer.js';
import type { SubmissionRow } from '../src/db/schema.js';
import * as repo from '../src/modules/submissions/repository.js';
import { assertOwnRows, plainCreate, sharedCounters, uniqueEmailForm } from './support/alone-creates.js';
import { startTestApp, TEST_PG_URL, type TestAccount, type TestApp } from './support/helpers.js';
import { assertHourBounds } from './support/submission-fixtures.js';

interface Sent {
  text: string;
  name?: string;
}

describe('statements shared by calls that arrive together (PostgreSQL)', { skip: TEST_PG_URL === undefined }, () => {
  let app: TestApp;
  let a: TestAccount;
  const sent: Sent[] = [];
  /** The SQLSTATE of every statement that failed. */
  const failures: string[] = [];
  const original = pg.Client.prototype.query;
  before(async () => {
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const [first] = args;
      const config = typeof first === 'object' && first !== null ? (first as { name?: string; text?: string }) : {};
      const text = typeof first === 'string' ? first : config.text;
      if (text !== undefined) sent.push({ text, name: config.name });
      const result = (original as (...a: unknown[]) => unknown).apply(this, args);
      if (result instanceof Promise) result.catch((e: { code?: string }) => failures.push(String(e.code)));
      return result;
    } as typeof original;
    app = await startTestApp();
    a = await app.account();
  });
  after(async () => {
    pg.Client.prototype.query = original;
    await app.close();
  });

  const newForm = (name: string) => uniqueEmailForm(app, a, name);
  const create = (form: { id: number; email: number }, address: string, note: string, now?: number) =>
    plainCreate(a, form, address, note, now);
  const counters = (kind: string) => sharedCounters(app, kind);

  const insertsSince = (from: number) => sent.slice(from).filter((s) => /INSERT INTO submissions\b/.test(s.text));
  const countOf = async (formId: number) => (await a.get(`/forms/${formId}`)).body.submissionsCount as number;

  it('writes creates queued together in one statement, each with its own row, values, index and count', async () => {
    const form = await newForm('Together');
    const counted = await counters('submission_create');
    const from = sent.length;
    const db = app.server.ctx.db;
    // Issued in one turn: the first statement out takes them all when its connection comes.
    const calls = Array.from({ length: 12 }, (_, i) => {
      const c = create(form, `p${i}@example.com`, i === 5 ? '' : i === 6 ? 'placed' : `note${i}`);
      return repo.createAlone(db, c.row, c.w, c.w.data, form.revision);
    });
    const rows = await Promise.all(calls);
    const inserts = insertsSince(from);
    assert.equal(inserts.length, 1, 'twelve creates, one statement');
    assert.ok(inserts[0]!.name, 'prepared');
    assert.match(inserts[0]!.text, /jsonb_to_recordset/);
    const now = await counters('submission_create');
    assert.deepEqual(
      [now.statements - counted.statements, now.calls - counted.calls, now.madeAgain - counted.madeAgain],
      [1, 12, 0],
    );
    assertOwnRows(rows, form);
    assert.deepEqual(
      rows.map((r) => r!.latitude),
      rows.map((_, i) => (i === 6 ? 52.5 : null)),
    );
    // Only the ids come back from the statement: each answer, made from what was sent, is the
    // row as it is stored, to the data's text.
    const columns = Object.keys(rows[0]!) as (keyof SubmissionRow)[];
    const stored = await db
      .selectFrom('submissions')
      .select(columns)
      .where('form_id', '=', form.id)
      .orderBy('id')
      .execute();
    assert.deepEqual(
      stored,
      [...rows].sort((x, y) => x!.id - y!.id),
    );
    assert.equal(await countOf(form.id), 12);
    // The index holds each row's own words, and the row with none is still a row.
    const found = await a.get(`/forms/${form.id}/submissions?keyword=note7`);
    assert.deepEqual(
      found.body.submissions.map((s: { id: number }) => s.id),
      [rows[7]!.id],
    );
    assert.equal((await a.get(`/forms/${form.id}/submissions?keyword=common`)).body.total, 11);
    const { rows: vectors } = await sql<{ id: number; v: string }>`
      SELECT id, search_vector::text AS v FROM submissions WHERE id = ${rows[5]!.id}`.execute(db);
    assert.equal(vectors[0]!.v, '');
    // One hour row's worth of counts: every create is in the form's hourly total.
    const { rows: hours } = await sql<{ n: number }>`
      SELECT sum(n)::int AS n FROM submission_hours WHERE form_id = ${form.id}`.execute(db);
    assert.equal(hours[0]!.n, 12);
    // And the hour's id bounds hold every id of the statement's rows.
    await assertHourBounds(db, form.id);
  });

  it('answers each create of a failed statement alone: a value taken inside it, or a form that moved on', async () => {
    const form = await newForm('Taken');
    const other = await newForm('Moved on');
    const db = app.server.ctx.db;
    const first = create(form, 'first@example.com', 'x');
    assert.ok(await repo.createAlone(db, first.row, first.w, first.w.data, form.revision));
    const counted = await counters('submission_create');
    const from = sent.length;
    // Their statement fails three ways; each is then made alone.
    const calls = [
      create(form, 'a1@example.com', 'x'),
      create(form, 'a2@example.com', 'x'),
      ...Array.from({ length: 10 }, (_, i) =>
        create(
          i === 9 ? other : form,
          i === 3 || i === 4 ? 'same@example.com' : i === 8 ? 'first@example.com' : `b${i}@example.com`,
          'x',
        ),
      ),
    ].map((c, i) => repo.createAlone(db, c.row, c.w, c.w.data, i === 11 ? other.revision + 1 : form.revision));
    const rows = await Promise.all(calls);
    const written = rows.map((r) => r !== undefined);
    // Of the two with one address, one gets in.
    assert.equal(written[5]! !== written[6]!, true, `one of the two: ${written}`);
    assert.deepEqual(
      written.filter((_, i) => i !== 5 && i !== 6),
      [true, true, true, true, true, true, true, true, false, false],
    );
    const inserts = insertsSince(from);
    assert.equal(inserts.filter((s) => /jsonb_to_recordset/.test(s.text)).length, 1);
    assert.equal(inserts.length, 1 + 12, 'the statement, then each alone');
    assert.equal((await counters('submission_create')).madeAgain - counted.madeAgain, 12);
    assert.equal(await countOf(form.id), 1 + 2 + 7);
    assert.equal(await countOf(other.id), 0);
    const { rows: values } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM submission_unique_values WHERE form_id = ${form.id}`.execute(db);
    assert.equal(values[0]!.n, 10);
  });

  it('makes each create with events of a failed statement again as a statement of its own, with its outbox rows', async () => {
    const form = await newForm('Taken, with events');
    const db = app.server.ctx.db;
    const first = create(form, 'first@example.com', 'x');
    assert.ok(await repo.createAlone(db, first.row, first.w, first.w.data, form.revision));
    // A job of its own for each create, with its id; not due for an hour, so no worker takes it.
    const jobsOf = (tag: string) => (row: SubmissionRow) => [
      {
        kind: 'test.held',
        payload: JSON.stringify({ id: row.id, tag }),
        runAt: Date.now() + 3_600_000,
        maxAttempts: 1,
      },
    ];
    const from = sent.length;
    const rows = await Promise.all(
      Array.from({ length: 6 }, (_, i) => create(form, i === 4 ? 'first@example.com' : `e${i}@example.com`, 'x')).map(
        (c, i) => repo.createAlone(db, c.row, c.w, c.w.data, form.revision, jobsOf(`e${i}`)),
      ),
    );
    assert.deepEqual(
      rows.map((r) => r !== undefined),
      [true, true, true, true, false, true],
      'all but the taken value, which the caller then makes in a transaction',
    );
    const inserts = insertsSince(from);
    assert.equal(inserts.length, 1 + 6, 'the shared statement, then each alone');
    assert.ok(inserts.every((s) => /INSERT INTO jobs/.test(s.text)));
    const jobs = await db.selectFrom('jobs').select('payload').where('kind', '=', 'test.held').execute();
    const idOf = new Map(
      jobs.map((j) => JSON.parse(j.payload) as { id: number; tag: string }).map((j) => [j.tag, j.id]),
    );
    assert.deepEqual(
      [...idOf].sort(),
      rows.flatMap((r, i) => (r ? [[`e${i}`, r.id]] : [])).sort(),
      'one job for each create written, with its id; none for the one refused',
    );
    await db.deleteFrom('jobs').where('kind', '=', 'test.held').execute();
  });

  it('lets creates for other forms through while two wait for a form that another transaction holds', async () => {
    const held = await newForm('Held');
    const free = await newForm('Free');
    const db = app.server.ctx.db;
    const locker = new pg.Client({ connectionString: app.config.databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM forms WHERE id = $1 FOR UPDATE', [held.id]);
      // Two statements out, one after the other, each stuck on the lock.
      const waiting: Promise<unknown>[] = [];
      for (const i of [0, 1]) {
        const c = create(held, `h${i}@example.com`, 'x');
        waiting.push(repo.createAlone(db, c.row, c.w, c.w.data, held.revision));
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
      // Without the slow statements' escape this one would queue behind them until the lock goes.
      const c = create(free, 'f@example.com', 'x');
      const through = await Promise.race([
        repo.createAlone(db, c.row, c.w, c.w.data, free.revision),
        new Promise<'held up'>((resolve) => setTimeout(() => resolve('held up'), 5_000).unref()),
      ]);
      assert.notEqual(through, 'held up');
      assert.ok(through);
      // What the worker's yield reads: the two held calls wait, the one through does not.
      assert.equal(sharedCountsOf('submission_create').waiting, 2);
      await locker.query('COMMIT');
      const after = await Promise.all(waiting);
      assert.ok(after.every((r) => r !== undefined));
      assert.equal(sharedCountsOf('submission_create').waiting, 0);
      assert.equal(await countOf(held.id), 2);
    } finally {
      await locker.end();
    }
  });

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('does not deadlock with a transaction that locks the forms of a shared statement the other way round', async () => {
    const f1 = await newForm('First');
    const f2 = await newForm('Second');
    const db = app.server.ctx.db;
    const locker = new pg.Client({ connectionString: app.config.databaseUrl });
    await locker.connect();
    try {
      failures.length = 0;
      await locker.query('BEGIN');
      await locker.query('UPDATE forms SET updated_at = updated_at WHERE id = $1', [f2.id]);
      const c1 = create(f1, 'd1@example.com', 'x');
      const c2 = create(f2, 'd2@example.com', 'x');
      const both = Promise.all([
        repo.createAlone(db, c1.row, c1.w, c1.w.data, f1.revision),
        repo.createAlone(db, c2.row, c2.w, c2.w.data, f2.revision),
      ]);
      await sleep(200);
      // A statement that held the first form while it waited for the second would close a cycle here.
      await locker.query('UPDATE forms SET updated_at = updated_at WHERE id = $1', [f1.id]);
      await locker.query('COMMIT');
      const rows = await both;
      assert.deepEqual(
        rows.map((r) => r !== undefined),
        [true, true],
      );
      assert.ok(!failures.includes('40P01'), `no deadlock: ${failures}`);
    } finally {
      await locker.end();
    }
  });

  it('does not deadlock two shared statements that hold unique values the other way round', async () => {
    const form = await newForm('Crossing');
    const db = app.server.ctx.db;
    const seed = create(form, 'seed@example.com', 'x');
    const seeded = await repo.createAlone(db, seed.row, seed.w, seed.w.data, form.revision);
    const holder = new pg.Client({ connectionString: app.config.databaseUrl });
    await holder.connect();
    try {
      failures.length = 0;
      // Holds z: the first statement waits there, after it wrote x.
      await holder.query('BEGIN');
      await holder.query(
        'INSERT INTO submission_unique_values (submission_id, form_id, field_id, value_norm) VALUES ($1, $2, $3, $4)',
        [seeded!.id, form.id, form.email, 'z@example.com'],
      );
      const batch = (addresses: string[]) =>
        Promise.all(
          addresses.map((address) => {
            const c = create(form, address, 'x');
            return repo.createAlone(db, c.row, c.w, c.w.data, form.revision);
          }),
        );
      const first = batch(['x@example.com', 'z@example.com', 'y@example.com']);
      await sleep(200);
      const second = batch(['y@example.com', 'x@example.com']);
      await sleep(200);
      await holder.query('ROLLBACK');
      const [one, two] = await Promise.all([first, second]);
      assert.deepEqual(
        [...one, ...two].map((r) => r !== undefined),
        [true, true, true, false, false],
      );
      assert.ok(!failures.includes('40P01'), `no deadlock: ${failures}`);
    } finally {
      await holder.end();
    }
  });

  it("writes nothing for a form of another account's in a shared statement, and the others", async () => {
    const mine = await newForm('Mine');
    const b = await app.account('Someone else');
    const theirs = (await b.post('/forms', { name: 'Theirs', fields: [{ type: 'text', label: 'Note' }] })).body as {
      id: number;
    };
    const db = app.server.ctx.db;
    const c1 = create(mine, 'm1@example.com', 'x');
    const c2 = create({ id: theirs.id, email: mine.email }, 'm2@example.com', 'x');
    const c3 = create(mine, 'm3@example.com', 'x');
    const rows = await Promise.all([
      repo.createAlone(db, c1.row, c1.w, c1.w.data, mine.revision),
      repo.createAlone(db, c2.row, c2.w, c2.w.data, mine.revision),
      repo.createAlone(db, c3.row, c3.w, c3.w.data, mine.revision),
    ]);
    assert.deepEqual(
      rows.map((r) => r !== undefined),
      [true, false, true],
    );
    assert.equal((await b.get(`/forms/${theirs.id}`)).body.submissionsCount, 0);
  });

  it('gives each token look-up of a shared statement its own owner, and none to a revoked or unknown token', async () => {
    const b = await app.account('Other');
    const made = (await a.post('/tokens', { name: 'to revoke' })).body as { id: number; token: string };
    assert.equal((await a.delete(`/tokens/${made.id}`)).status, 200);
    const db = app.server.ctx.db;
    const from = sent.length;
    const tokens = [a.token, b.token, made.token, 'fw_pat_' + 'x'.repeat(43), a.token, b.token, a.token, b.token];
    const found = await Promise.all(tokens.map((t) => findUnrevokedTokenWithOthers(db, hashToken(t))));
    assert.deepEqual(
      found.map((f) => f?.owner.accountId),
      [a.accountId, b.accountId, undefined, undefined, a.accountId, b.accountId, a.accountId, b.accountId],
    );
    assert.deepEqual(
      found.map((f) => f?.owner.tokenHash),
      tokens.map((t, i) => (i === 2 || i === 3 ? undefined : hashToken(t))),
    );
    const lookUps = sent.slice(from).filter((s) => /from "access_tokens"/.test(s.text));
    assert.equal(lookUps.length, 1, 'eight look-ups, one statement');
    assert.match(lookUps[0]!.text, /ANY\(/);
    // Through the API, many at once, each request gets its own answer.
    const replies = await Promise.all(tokens.map((token) => app.request('GET', '/api/v2025/forms', { token })));
    assert.deepEqual(
      replies.map((r) => r.status),
      [200, 200, 401, 401, 200, 200, 200, 200],
    );
  });

  it('sends a statement beside one out only once half a full one is queued, and then at once', async () => {
    const batches: number[][] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const coalescer = new Coalescer<number, number>(
      app.server.ctx.db,
      async (_connection, items) => {
        batches.push(items);
        if (batches.length === 1) await held;
        return items.map((i) => i + 100);
      },
      { kind: 'test_half_full', max: 8, inFlight: 2, slowMs: 60_000 },
    );
    const arrived = async (n: number) => {
      while (batches.length < n) await sleep(5);
    };
    const answers = [coalescer.call(0)];
    try {
      await arrived(1);
      // One at a time, as requests arrive: three are not half of 8, so they wait for the one out.
      for (const i of [1, 2, 3]) {
        answers.push(coalescer.call(i));
        await sleep(30);
      }
      assert.deepEqual(batches, [[0]]);
      // The fourth makes half: a second statement goes beside the one still out, with all four.
      answers.push(coalescer.call(4));
      await arrived(2);
      assert.deepEqual(batches, [[0], [1, 2, 3, 4]]);
      // Beside one out again, a lone call waits for it; once none is out it goes at once, alone.
      answers.push(coalescer.call(5));
      await sleep(30);
      assert.equal(batches.length, 2);
    } finally {
      // Also when an assertion failed: the held statement keeps a pool connection until then.
      release();
    }
    assert.deepEqual(await Promise.all(answers), [100, 101, 102, 103, 104, 105]);
    assert.deepEqual(batches, [[0], [1, 2, 3, 4], [5]]);
  });
});
