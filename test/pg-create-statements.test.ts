import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker } from '../src/jobs/worker.js';
import { deliveriesOf } from './support/alone-creates.js';
import { startTestApp, TEST_PG_URL, type TestAccount, type TestApp } from './support/helpers.js';

interface Sent {
  client: pg.Client;
  name?: string;
  text: string;
}

/**
 * On PostgreSQL a plain create is one prepared statement, run without BEGIN and COMMIT
 * (submissions/write.ts, createAlone). What the service sends is read where it leaves: every
 * statement that node-postgres's clients are given, with the client that ran it, so that one
 * flow's statements can be told from the worker's.
 */
describe('what a create sends to PostgreSQL', { skip: TEST_PG_URL === undefined }, () => {
  let app: TestApp;
  let a: TestAccount;
  const sent: Sent[] = [];
  const original = pg.Client.prototype.query;
  before(async () => {
    // Before any connection opens: the pool's clients take their query method when they connect.
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const [first] = args;
      const config = typeof first === 'object' && first !== null ? (first as { name?: string; text?: string }) : {};
      const text = typeof first === 'string' ? first : config.text;
      if (text !== undefined) sent.push({ client: this, name: config.name, text });
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
    // A webhook on loopback: the worker's test below delivers to a receiver of its own.
    app = await startTestApp({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    a = await app.account();
  });
  after(async () => {
    pg.Client.prototype.query = original;
    await app.close();
  });

  /** The creates' statements sent during fn, each with the statement before and after it on its connection. */
  async function createsDuring(fn: () => Promise<void>) {
    const from = sent.length;
    await fn();
    const window = sent.slice(from);
    return window
      .map((s, i) => ({ s, i }))
      .filter(({ s }) => /INSERT INTO submissions\b/.test(s.text))
      .map(({ s, i }) => {
        const same = (j: number) => window[j]?.client === s.client;
        let before = i - 1;
        while (before >= 0 && !same(before)) before--;
        let next = i + 1;
        while (next < window.length && !same(next)) next++;
        return { create: s, before: window[before]?.text.trim(), next: window[next]?.text.trim() };
      });
  }

  const uniqueForm = async () =>
    (
      await a.post('/forms', {
        name: 'Alone',
        fields: [
          { type: 'email', label: 'Email', unique: true },
          { type: 'text', label: 'Note' },
        ],
      })
    ).body as { id: number; fields: { id: number }[] };

  it('sends a plain create as one prepared statement, outside any transaction', async () => {
    const form = await uniqueForm();
    const [email, note] = form.fields.map((f) => f.id);
    const body = (n: number) => ({
      fields: [
        { id: email, value: `p${n}@example.com` },
        { id: note, value: 'hello' },
      ],
    });
    // The first create reads the form's event configuration in its transaction; later ones know it.
    assert.equal((await a.post(`/forms/${form.id}/submissions`, body(1))).status, 200);
    const creates = await createsDuring(async () => {
      const reply = await a.post(`/forms/${form.id}/submissions`, body(2));
      assert.equal(reply.status, 200, reply.text);
    });
    assert.equal(creates.length, 1);
    const [{ create, before, next }] = creates as [(typeof creates)[0]];
    assert.ok(create.name, 'sent by name: prepared once per connection');
    assert.notEqual(before?.toLowerCase(), 'begin');
    assert.notEqual(next?.toLowerCase(), 'commit');
    assert.equal((await a.get(`/forms/${form.id}`)).body.submissionsCount, 2);
  });

  it('writes nothing alone when a unique value is taken, and the transaction then names the field', async () => {
    const form = await uniqueForm();
    const [email] = form.fields.map((f) => f.id);
    const body = { fields: [{ id: email, value: 'taken@example.com' }] };
    assert.equal((await a.post(`/forms/${form.id}/submissions`, body)).status, 200);
    assert.equal(
      (await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: email, value: 'x@example.com' }] })).status,
      200,
    );
    let reply: Awaited<ReturnType<TestAccount['post']>> | undefined;
    const creates = await createsDuring(async () => {
      reply = await a.post(`/forms/${form.id}/submissions`, body);
    });
    assert.equal(reply!.status, 400, reply!.text);
    assert.match(reply!.text, /unique|already/i);
    assert.equal(creates.length, 2, 'the statement alone, then in a transaction');
    assert.notEqual(creates[0]!.before?.toLowerCase(), 'begin');
    assert.equal(creates[1]!.before?.toLowerCase(), 'begin');
    assert.equal((await a.get(`/forms/${form.id}`)).body.submissionsCount, 2);
    assert.equal((await a.get(`/forms/${form.id}/submissions`)).body.total, 2);
  });

  it('writes a create whose form has a webhook in one statement outside any transaction, with its outbox row and notification', async () => {
    const form = await uniqueForm();
    const [email] = form.fields.map((f) => f.id);
    const hook = await a.post(`/form/${form.id}/webhook`, { url: 'https://hooks.example.com/formwork' });
    assert.equal(hook.status, 200, hook.text);
    // The first create after the webhook reads the form's event configuration in its transaction.
    assert.equal(
      (await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: email, value: 'w0@example.com' }] })).status,
      200,
    );
    // What the workers of other processes hear of it.
    const listener = new pg.Client({ connectionString: app.config.databaseUrl });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (m) => heard.push(String(m.payload)));
    await listener.query('LISTEN formwork_jobs');
    const ids: number[] = [];
    for (const n of [1, 2, 3]) {
      // Ids kept past a second are dropped: the third create draws again.
      if (n === 3) await new Promise((r) => setTimeout(r, 1100));
      let id = 0;
      const creates = await createsDuring(async () => {
        const reply = await a.post(`/forms/${form.id}/submissions`, {
          fields: [{ id: email, value: `w${n}@example.com` }],
        });
        assert.equal(reply.status, 200, reply.text);
        id = (reply.body as { id: number }).id;
      });
      assert.equal(creates.length, 1);
      const [{ create, before, next }] = creates as [(typeof creates)[0]];
      assert.ok(create.name, 'prepared');
      assert.match(create.text, /INSERT INTO jobs/);
      assert.match(create.text, /pg_notify/);
      // Its id, which its outbox row carries, is drawn before it: on its connection, with one more
      // for the create after it (takeIds: twice what was taken since the last draw, at least one),
      // which then sends nothing before its statement.
      if (n === 2) assert.doesNotMatch(before ?? '', /nextval/);
      else assert.match(before ?? '', /nextval/);
      ids.push(id);
      assert.notEqual(next?.toLowerCase(), 'commit');
      const jobs = await app.server.ctx.db
        .selectFrom('jobs')
        .select(['payload'])
        .where('kind', '=', 'webhooks.deliver')
        .execute();
      const mine = jobs.filter(
        (j) => (JSON.parse(j.payload) as { event: { submissionId: number } }).event.submissionId === id,
      );
      assert.equal(mine.length, 1, `one delivery for submission ${id}`);
    }
    assert.equal(ids[1], ids[0]! + 1, 'the second id drawn with the first');
    // Drawn anew, after nothing was left: a lone create wastes no id.
    assert.equal(ids[2], ids[1]! + 1, `the third drawn next: ${ids.join(', ')}`);
    for (let i = 0; i < 100 && heard.length < 3; i++) await new Promise((r) => setTimeout(r, 20));
    await listener.end();
    assert.equal(heard.length, 3, 'a notification for each create');
  });

  it('writes the outbox rows of creates with events made together, each with its own id, record and request id', async () => {
    const form = await uniqueForm();
    const [email] = form.fields.map((f) => f.id);
    assert.equal((await a.post(`/form/${form.id}/webhook`, { url: 'https://hooks.example.com/together' })).status, 200);
    const post = (address: string, requestId: string) =>
      a.post(
        `/forms/${form.id}/submissions`,
        { fields: [{ id: email, value: address }] },
        { headers: { 'x-request-id': requestId } },
      );
    // Keeps the form's definition with its webhook.
    assert.equal((await post('first@example.com', 'warm-up')).status, 200);
    const plain = await uniqueForm();
    const [plainEmail] = plain.fields.map((f) => f.id);
    // Its definition kept too, with its (empty) event configuration, which a first create reads in a transaction.
    assert.equal(
      (await a.post(`/forms/${plain.id}/submissions`, { fields: [{ id: plainEmail, value: 'p@example.com' }] })).status,
      200,
    );
    const creates = await createsDuring(async () => {
      const replies = await Promise.all([
        ...Array.from({ length: 30 }, (_, i) => post(`e${i}@example.com`, `request-${i}`)),
        // A value taken: the statement it goes in fails, and its creates are made again.
        post('first@example.com', 'taken'),
        // Creates of a form without events share the statements too.
        ...Array.from({ length: 10 }, (_, i) =>
          a.post(`/forms/${plain.id}/submissions`, { fields: [{ id: plainEmail, value: `p${i}@example.com` }] }),
        ),
      ]);
      assert.deepEqual(
        replies.map((r) => r.status),
        [...Array(30).fill(200), 400, ...Array(10).fill(200)],
        replies.map((r) => r.text).join(' '),
      );
      const bySubmission = await deliveriesOf(app, form.id);
      assert.equal(bySubmission.size, 31, 'the warm-up and the thirty, nothing for the refused one');
      replies.slice(0, 30).forEach((reply, i) => {
        const id = (reply.body as { id: number }).id;
        const job = bySubmission.get(id);
        assert.ok(job, `a delivery for submission ${id}`);
        assert.equal(job.requestId, `request-${i}`);
        // The record delivered is the one answered.
        const { data, ...record } = job.record;
        const { data: answered, ...answer } = reply.body as { data: { field: number; value: unknown }[] };
        assert.deepEqual(record, answer);
        assert.deepEqual(
          data.map((d) => [d[0], d[3]]),
          answered.map((d) => [d.field, d.value]),
        );
      });
    });
    assert.ok(
      creates.some((c) => /INSERT INTO jobs/.test(c.create.text) && /jsonb_to_recordset/.test(c.create.text)),
      'some creates with events went in a shared statement',
    );
    // The statement the taken value was in failed; its other creates were made again alone, each
    // a statement of its own, and only the refused one in a transaction, which said why.
    assert.equal(
      creates.filter((c) => c.before?.toLowerCase() === 'begin').length,
      1,
      creates.map((c) => `${c.before?.slice(0, 40)} -> ${c.create.text.trim().slice(0, 40)}`).join('\n'),
    );
    assert.equal((await a.get(`/forms/${form.id}`)).body.submissionsCount, 31);
    assert.equal((await a.get(`/forms/${plain.id}`)).body.submissionsCount, 11);
  });

  it("runs a delivery's and an email's jobs with a prepared look-up each, and claims and ends runs in one statement", async () => {
    const received: string[] = [];
    const receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        received.push(String(req.headers['webhook-id']));
        res.writeHead(200).end();
      });
    }).listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    try {
      // Only this test's jobs (the tests before left deliveries to hooks.example.com).
      await app.server.ctx.db.deleteFrom('jobs').execute();
      const form = await uniqueForm();
      const [email] = form.fields.map((f) => f.id);
      const { port } = receiver.address() as AddressInfo;
      assert.equal((await a.post(`/form/${form.id}/webhook`, { url: `http://127.0.0.1:${port}/hook` })).status, 200);
      const notification = await a.post(`/forms/${form.id}/notifications`, {
        subject: 'New',
        message: 'New one',
        recipients: ['team@example.com'],
      });
      assert.equal(notification.status, 201, notification.text);
      for (const n of [1, 2, 3])
        assert.equal(
          (await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: email, value: `j${n}@example.com` }] }))
            .status,
          200,
        );
      const from = sent.length;
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      assert.equal(received.length, 3);
      const window = sent.slice(from);
      const matching = (pattern: RegExp) => window.filter((s) => pattern.test(s.text));
      const lookUps = [...matching(/from "webhooks"/), ...matching(/from "form_emails" left join "forms"/)];
      assert.equal(lookUps.length, 6, 'one look-up a job');
      // A claim takes the jobs and logs their runs in one statement.
      const claims = matching(/UPDATE jobs SET state = 'running'/);
      assert.ok(claims.length >= 1);
      for (const claim of claims) assert.match(claim.text, /INSERT INTO job_runs/);
      // An end sets the job's row and its run's together, for every run of its batch: at most a
      // statement a run. The runs are more than the six jobs': a new worker's first housekeeping
      // schedules the recurring chores (the jobs deleted above took theirs), and runDue runs them.
      const ends = matching(/update "?job_runs"?/i);
      const { rows: runs } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM job_runs`.execute(
        app.server.ctx.db,
      );
      assert.ok(
        ends.length >= 1 && ends.length <= runs[0]!.n,
        `ends: ${ends.length} for ${runs[0]!.n} runs ${JSON.stringify(ends.map((e) => e.text.slice(0, 200)))}`,
      );
      for (const end of ends) assert.match(end.text, /UPDATE jobs SET state = e\.state/);
      assert.equal(matching(/^\s*update "jobs"/i).length, 0, 'no job updated apart from its run');
      for (const s of [...lookUps, ...claims, ...ends]) assert.ok(s.name, `prepared: ${s.text.trim().slice(0, 120)}`);
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM job_runs r JOIN jobs j ON j.id = r.job_id
        WHERE j.kind IN ('webhooks.deliver', 'emails.send') AND j.state = 'done' AND r.outcome = 'done'
          AND r.finished_at IS NOT NULL`.execute(app.server.ctx.db);
      assert.equal(rows[0]!.n, 6);
    } finally {
      receiver.closeAllConnections();
      receiver.close();
    }
  });

  it('prepares no statement that reads every column, so a column added by a migration breaks nothing', async () => {
    // The hosted page reads its form with select * (a hotQuery). Prepared, PostgreSQL would refuse
    // it on every connection that had prepared it once the table's columns change ("cached plan
    // must not change result type"), as when a rolling upgrade migrates under a running process.
    const pageOfNewForm = async (name: string) => {
      const form = (await a.post('/forms', { name, fields: [{ type: 'text', label: 'Name' }] })).body as {
        url: string;
      };
      return app.request('GET', new URL(form.url).pathname);
    };
    // Enough pages for every connection of the pool to read a form.
    for (let i = 0; i < 12; i++) assert.equal((await pageOfNewForm(`Before ${i}`)).status, 200);
    await sql`ALTER TABLE forms ADD COLUMN added_later integer`.execute(app.server.ctx.db);
    for (let i = 0; i < 12; i++) {
      const reply = await pageOfNewForm(`After ${i}`);
      assert.equal(reply.status, 200, reply.text);
      assert.match(reply.text, new RegExp(`<h1 class="fw-title">After ${i}</h1>`));
    }
  });
});
