/**
 * On SQLite, plain creates are written by a thread with a connection of its own
 * (src/db/sqlite-create-thread.ts), in batches: creates that arrive while a batch is out go in
 * the next one. Each create must still get exactly its own answer (its row, or "not written"
 * when its form moved on or a unique value was taken, by anyone, including another create of
 * the same batch), the counts, hours and index must hold every row written and nothing else,
 * the main connection's reads must see a batch as soon as its creates are answered, and its
 * writes must take turns with the thread's (sqlite-write-turn.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { stopCreateThread } from '../src/db/sqlite-create-thread.js';
import { WriteTurn } from '../src/db/sqlite-write-turn.js';
import * as repo from '../src/modules/submissions/repository.js';
import { assertOwnRows, deliveriesOf, plainCreate, sharedCounters, uniqueEmailForm } from './support/alone-creates.js';
import { TEST_PG_URL, withApps, type TestAccount, type TestApp } from './support/helpers.js';

describe('the write turn of a SQLite database', () => {
  it('gives the turn to one holder at a time, a waiting main write before a waiting batch', async () => {
    const turn = new WriteTurn();
    const order: string[] = [];
    const entered = (who: string) => () => order.push(who);
    await turn.enterThread();
    const thread2 = turn.enterThread().then(entered('thread 2'));
    const main1 = turn.enterMain().then(entered('main 1'));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(order, [], 'nobody enters while the thread holds the turn');
    turn.leaveThread();
    await main1;
    assert.deepEqual(order, ['main 1'], 'the main write first');
    turn.leaveMain();
    await thread2;
    assert.deepEqual(order, ['main 1', 'thread 2']);
    // thread 2 holds the turn now: a main write enters when it leaves, and only one may leave.
    const main2 = turn.enterMain().then(entered('main 2'));
    turn.leaveThread();
    await main2;
    assert.throws(() => turn.leaveThread(), /did not hold/);
    turn.leaveMain();
  });
});

describe('plain creates written by the create thread (SQLite)', { skip: TEST_PG_URL !== undefined }, () => {
  let app: TestApp;
  let a: TestAccount;
  withApps((apps) => ({ app, a } = apps), 1);

  const newForm = (name: string) => uniqueEmailForm(app, a, name);
  const create = (form: { id: number; email: number }, address: string, note: string) =>
    plainCreate(a, form, address, note);
  const counters = async () => {
    const c = await sharedCounters(app, 'submission_create');
    return { batches: c.statements, creates: c.calls, notWritten: c.madeAgain };
  };
  const countOf = async (formId: number) => (await a.get(`/forms/${formId}`)).body.submissionsCount as number;
  const one = async <T>(query: Promise<{ rows: T[] }>) => (await query).rows[0]!;

  it('writes creates queued together in one batch, each with its own row, values, index, count and hour', async () => {
    const form = await newForm('Together');
    const db = app.server.ctx.db;
    assert.equal(repo.createsAlone(db), true, 'a SQLite file has a create thread');
    // Read, and so kept under the change epoch, before the batch: it must not be served stale after.
    assert.equal(await countOf(form.id), 0);
    const before = await counters();
    const rows = await Promise.all(
      Array.from({ length: 12 }, (_, i) => {
        const c = create(form, `p${i}@example.com`, i === 5 ? '' : i === 6 ? 'placed' : `note${i}`);
        return repo.createAlone(db, c.row, c.w, c.w.data, form.revision);
      }),
    );
    const now = await counters();
    assert.deepEqual(
      [now.batches - before.batches, now.creates - before.creates, now.notWritten - before.notWritten],
      [1, 12, 0],
      'twelve creates, one batch',
    );
    assertOwnRows(rows, form);
    // The answers are the rows as stored.
    const stored = await db
      .selectFrom('submissions')
      .selectAll()
      .where('form_id', '=', form.id)
      .orderBy('id')
      .execute();
    assert.deepEqual(
      stored,
      rows.map((r) => ({ ...r })),
    );
    assert.equal(stored[6]!.latitude, 52.5);
    assert.equal(await countOf(form.id), 12, 'the count read after the answers includes them');
    const found = await a.get(`/forms/${form.id}/submissions?keyword=note7`);
    assert.deepEqual(
      found.body.submissions.map((s: { id: number }) => s.id),
      [rows[7]!.id],
    );
    assert.equal((await a.get(`/forms/${form.id}/submissions?keyword=common`)).body.total, 11);
    assert.equal(
      (await one(sql<{ n: number }>`SELECT sum(n) AS n FROM submission_hours WHERE form_id = ${form.id}`.execute(db)))
        .n,
      12,
    );
    assert.equal(
      (
        await one(
          sql<{ n: number }>`SELECT count(*) AS n FROM submission_unique_values WHERE form_id = ${form.id}`.execute(db),
        )
      ).n,
      12,
    );
  });

  it("adds a batch's creates to each form's count and to each hour's once, each right", async () => {
    const forms = [await newForm('Counts one'), await newForm('Counts two')];
    const db = app.server.ctx.db;
    const hour = 3_600_000;
    const now = Math.floor(Date.now() / hour) * hour;
    const before = await counters();
    // Creates 0–3 an hour ago, 4–9 now; even ones to the first form, odd ones to the second.
    const rows = await Promise.all(
      Array.from({ length: 10 }, (_, i) => {
        const form = forms[i % 2]!;
        const c = plainCreate(a, form, `h${i}@example.com`, 'counted', i < 4 ? now - hour + i : now + i);
        return repo.createAlone(db, c.row, c.w, c.w.data, form.revision);
      }),
    );
    assert.equal((await counters()).batches - before.batches, 1, 'one batch');
    assert.ok(rows.every((r) => r !== undefined));
    for (const form of forms) {
      assert.equal(await countOf(form.id), 5);
      const hours = await sql<{ hour: number; n: number }>`
        SELECT hour, sum(n) AS n FROM submission_hours WHERE form_id = ${form.id} GROUP BY hour ORDER BY hour`.execute(
        db,
      );
      assert.deepEqual(
        hours.rows.map((h) => [h.hour * hour, h.n]),
        [
          [now - hour, 2],
          [now, 3],
        ],
      );
    }
  });

  it('writes nothing for a create whose value is taken or whose form moved on, and the rest of its batch', async () => {
    const form = await newForm('Taken');
    const other = await newForm('Moved on');
    const db = app.server.ctx.db;
    const first = create(form, 'first@example.com', 'x');
    assert.ok(await repo.createAlone(db, first.row, first.w, first.w.data, form.revision));
    const before = await counters();
    const calls = [
      create(form, 'a1@example.com', 'x'),
      create(form, 'same@example.com', 'x'),
      create(form, 'same@example.com', 'x'),
      create(form, 'first@example.com', 'x'),
      create(other, 'o@example.com', 'x'),
      create(form, 'a2@example.com', 'x'),
    ].map((c, i) => repo.createAlone(db, c.row, c.w, c.w.data, i === 4 ? other.revision + 1 : form.revision));
    const written = (await Promise.all(calls)).map((r) => r !== undefined);
    // Of the two with one address, the first in the batch gets in.
    assert.deepEqual(written, [true, true, false, false, false, true]);
    const now = await counters();
    assert.equal(now.batches - before.batches, 1);
    assert.equal(now.notWritten - before.notWritten, 3);
    assert.equal(await countOf(form.id), 4);
    assert.equal(await countOf(other.id), 0);
    const values = await db
      .selectFrom('submission_unique_values')
      .select('value_norm')
      .where('form_id', '=', form.id)
      .orderBy('value_norm')
      .execute();
    assert.deepEqual(
      values.map((v) => v.value_norm),
      ['a1@example.com', 'a2@example.com', 'first@example.com', 'same@example.com'],
    );
    // Nothing of the creates not written stays: no row, no index entry.
    assert.equal((await db.selectFrom('submissions').select('id').where('form_id', '=', form.id).execute()).length, 4);
    assert.equal((await db.selectFrom('submissions').select('id').where('form_id', '=', other.id).execute()).length, 0);
    assert.equal((await a.get(`/forms/${other.id}/submissions?keyword=x`)).body.total, 0);
  });

  it('answers each request through the API, a create the thread did not write made on the main connection', async () => {
    const form = await newForm('Through the API');
    const post = (address: string) =>
      a.post(`/forms/${form.id}/submissions`, {
        fields: [{ id: String(form.email), value: { value: address } }],
      });
    // The first create of a form reads its definition, with its webhooks and emails, and the
    // process keeps it; a create made with a definition that lacks them is made on the main
    // connection, which reads them.
    assert.equal((await post('first@example.com')).status, 200);
    const before = await counters();
    const replies = await Promise.all([
      ...Array.from({ length: 40 }, (_, i) => post(`api${i}@example.com`)),
      post('dup@example.com'),
      post('dup@example.com'),
    ]);
    const statuses = replies.map((r) => r.status);
    assert.deepEqual(statuses.slice(0, 40), Array(40).fill(200));
    assert.deepEqual(statuses.slice(40).sort(), [200, 400], 'one of the two with one value');
    assert.equal(replies.find((r) => r.status === 400)!.body.code, 'not_unique');
    const now = await counters();
    // How many batches depends on how the requests arrive; every create went to the thread.
    assert.ok(now.batches - before.batches >= 1);
    assert.equal(now.creates - before.creates, 42);
    assert.equal(now.notWritten - before.notWritten, 1, 'the second of one value, made again and refused');
    assert.equal(await countOf(form.id), 42);
    const ids = replies.filter((r) => r.status === 200).map((r) => (r.body as { id: number }).id);
    for (const id of [ids[0]!, ids[39]!]) assert.equal((await a.get(`/submissions/${id}`)).status, 200);
  });

  it('writes the outbox rows of a create with events in its batch, each with its own id, record and request id', async () => {
    const form = await newForm('With a webhook');
    const hook = await a.post(`/form/${form.id}/webhook`, { url: 'http://127.0.0.1:9/hook' });
    assert.equal(hook.status, 200, hook.text);
    const post = (address: string, requestId: string) =>
      a.post(
        `/forms/${form.id}/submissions`,
        { fields: [{ id: String(form.email), value: { value: address } }] },
        { headers: { 'x-request-id': requestId } },
      );
    // Keeps the form's definition with its webhook (see the test above).
    assert.equal((await post('first@example.com', 'warm-up')).status, 200);
    const before = await counters();
    const replies = await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => post(`e${i}@example.com`, `request-${i}`)),
      post('first@example.com', 'taken'),
    ]);
    assert.deepEqual(
      replies.map((r) => r.status),
      [...Array(10).fill(200), 400],
    );
    const now = await counters();
    assert.equal(now.creates - before.creates, 11, 'every create went to the thread');
    assert.equal(now.notWritten - before.notWritten, 1, 'the taken value, made again and refused');
    const bySubmission = await deliveriesOf(app, form.id);
    assert.equal(bySubmission.size, 11, 'the warm-up and the ten, nothing for the refused one');
    replies.slice(0, 10).forEach((reply, i) => {
      const id = (reply.body as { id: number }).id;
      const job = bySubmission.get(id);
      assert.ok(job, `a delivery for submission ${id}`);
      assert.equal(job.requestId, `request-${i}`);
      assert.equal(job.record.id, id);
    });
  });

  it('lets the main connection write between batches, and makes creates there once the thread has stopped', async () => {
    const form = await newForm('Turns');
    const post = (address: string) =>
      a.post(`/forms/${form.id}/submissions`, { fields: [{ id: String(form.email), value: { value: address } }] });
    // Form writes (the main connection's) interleaved with creates (the thread's).
    const replies = await Promise.all([
      ...Array.from({ length: 30 }, (_, i) => post(`t${i}@example.com`)),
      ...Array.from({ length: 5 }, (_, i) => a.put(`/forms/${form.id}`, { name: `Turns ${i}` })),
    ]);
    assert.deepEqual(
      replies.map((r) => r.status),
      Array(35).fill(200),
      replies
        .filter((r) => r.status !== 200)
        .map((r) => r.text)
        .join(' '),
    );
    assert.equal(await countOf(form.id), 30);

    await stopCreateThread(app.server.ctx.db);
    assert.equal(repo.createsAlone(app.server.ctx.db), false, 'no thread once stopped');
    const before = await counters();
    const late = await Promise.all([post('late1@example.com'), post('late2@example.com'), post('t1@example.com')]);
    assert.deepEqual(
      late.map((r) => r.status),
      [200, 200, 400],
    );
    assert.equal((await counters()).batches, before.batches, 'none through the thread');
    assert.equal(await countOf(form.id), 32);
  });
});
