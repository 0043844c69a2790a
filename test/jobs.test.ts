import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, beforeEach, describe, it } from 'node:test';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Type, type TUnknown } from '@sinclair/typebox';
import { CompiledQuery, sql } from 'kysely';
import { ConfigError, loadConfig } from '../src/config.js';
import type { AppContext } from '../src/context.js';
import { transact } from '../src/db/transaction.js';
import { defineJob, type JobKindDefinition } from '../src/jobs/kind.js';
import { enqueue, enqueueAll, jobOf } from '../src/jobs/outbox.js';
import {
  claimDue,
  finishRuns,
  insertJobs,
  listenForJobs,
  outboxStats,
  reclaimExpired,
  type ClaimGroup,
} from '../src/jobs/repository.js';
import { RetryAt } from '../src/jobs/retry.js';
import { createWorker, startWorker } from '../src/jobs/worker.js';
import { startServer } from '../src/server.js';
import { dialectName, startTestApp, type TestApp } from './support/helpers.js';
import { QueryRecorder } from './support/query-recorder.js';
import { batchesJob, spreadJob, TEST_TABLES_SQL, testKinds } from './support/job-handlers.js';
import { nodeArgs } from './support/node-entry.js';

const HOUR = 60 * 60 * 1000;

/** A kind of the tests' own, of any payload; its handler does nothing unless given one. */
function testJob(name: string, options: Partial<Omit<JobKindDefinition<TUnknown>, 'name' | 'payload'>> = {}) {
  return defineJob({ name, payload: Type.Unknown(), handler: async () => {}, ...options });
}

/** Waits for a condition that other processes or workers bring about; the limit only keeps a broken run from hanging. */
async function waitFor<T>(what: string, check: () => Promise<T | undefined | false>, limitMs = 60_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** A job's row and its run log, as the tests read them back. */
const jobRow = (ctx: AppContext, id: number) =>
  ctx.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const jobRuns = (ctx: AppContext, id: number) =>
  ctx.db.selectFrom('job_runs').selectAll().where('job_id', '=', id).orderBy('id').execute();

describe(`background jobs (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  const job = (id: number) => jobRow(ctx, id);
  const runs = (id: number) => jobRuns(ctx, id);

  before(async () => {
    app = await startTestApp();
    ctx = app.server.ctx;
  });
  after(() => app.close());
  // Each test's workers see only that test's jobs.
  beforeEach(() => ctx.db.deleteFrom('jobs').execute());

  it('runs a job only if the transaction that enqueued it commits', async () => {
    const ran: unknown[] = [];
    const note = testJob('test.note', { handler: async (_ctx, j) => void ran.push(j.payload) });
    const worker = createWorker(ctx, { kinds: [note] });
    await assert.rejects(
      transact(ctx.db, async (trx) => {
        await enqueue(trx, note, 'rolled back');
        throw new Error('the change fails');
      }),
      /the change fails/,
    );
    const id = await transact(ctx.db, (trx) => enqueue(trx, note, 'committed'));
    assert.equal(await worker.runDue(), 1);
    assert.deepEqual(ran, ['committed']);
    assert.deepEqual(
      (await ctx.db.selectFrom('jobs').select('id').where('kind', '=', 'test.note').execute()).map((r) => r.id),
      [id],
    );
  });

  it('runs a due job once, marks it done and logs the run', async () => {
    const seen: unknown[] = [];
    const once = testJob('test.once', { handler: async (_ctx, j) => void seen.push({ ...j }) });
    const worker = createWorker(ctx, { kinds: [once] });
    const payload = { formId: 7, keys: ['a', 'b'], nested: { ok: true } };
    const id = await enqueue(ctx.db, once, payload);
    assert.equal(await worker.runDue(), 1);
    assert.equal(await worker.runDue(), 0, 'a done job does not run again');
    assert.deepEqual(seen, [{ id, kind: 'test.once', payload, progress: undefined, attempt: 1 }]);
    const row = await job(id);
    assert.equal(row.state, 'done');
    assert.equal(row.attempts, 1);
    assert.equal(row.lease_token, null);
    assert.ok(row.finished_at! >= row.created_at - 1000);
    const log = await runs(id);
    assert.equal(log.length, 1);
    assert.equal(log[0]!.outcome, 'done');
    assert.equal(log[0]!.attempt, 1);
    assert.equal(log[0]!.worker, worker.id);
    assert.ok(log[0]!.finished_at! >= log[0]!.started_at);
  });

  it(
    "frees a run's slot when its handler returns, while its end is still being written",
    // SQLite's one connection would hold the next claim behind the end's transaction.
    { skip: dialectName === 'sqlite' && 'PostgreSQL only: the end holds one connection, the claim takes another' },
    async () => {
      const endHeld = deferred();
      const endWriting = deferred();
      const secondRan = deferred<string>();
      const slot = testJob('test.slot', {
        concurrency: 1,
        handler: async (_ctx, j, tools) => {
          if (j.payload === 'first')
            tools.atEnd(async () => {
              endWriting.resolve();
              await endHeld.promise;
            });
          else secondRan.resolve(String(j.payload));
        },
      });
      const [first, second] = await enqueueAll(ctx.db, [jobOf(slot, 'first'), jobOf(slot, 'second')]);
      const worker = startWorker(ctx, { kinds: [slot], pollMs: 50 });
      const limit = new AbortController();
      try {
        await endWriting.promise;
        // The one slot took the second job while the first's end waits.
        const timeout = sleep(20_000, 'the second job never started', { signal: limit.signal }).catch(() => '');
        assert.equal(await Promise.race([secondRan.promise, timeout]), 'second');
        assert.equal((await job(first!)).state, 'running', 'the first stays leased until its end is written');
      } finally {
        limit.abort();
        endHeld.resolve();
        await worker.stop();
      }
      assert.equal((await job(first!)).state, 'done');
      assert.equal((await job(second!)).state, 'done');
    },
  );

  it('waits for run_at, read from the context clock', async () => {
    let ran = 0;
    const later = testJob('test.later', { handler: async () => void ran++ });
    const worker = createWorker(ctx, { kinds: [later] });
    const id = await enqueue(ctx.db, later, {}, { runAt: ctx.clock.now() + 2 * HOUR });
    assert.equal(await worker.runDue(), 0);
    ctx.clock.advance(2 * HOUR - 60_000);
    assert.equal(await worker.runDue(), 0, 'a minute early');
    assert.equal((await job(id)).state, 'queued');
    ctx.clock.advance(60_000);
    assert.equal(await worker.runDue(), 1);
    assert.equal(ran, 1);
    assert.equal((await job(id)).state, 'done');
  });

  it('retries a failing job with growing delays, then marks it failed with its error', async () => {
    let calls = 0;
    const fail = testJob('test.fail', {
      maxAttempts: 3,
      handler: async () => {
        calls++;
        throw new Error(`remote answered 503 (call ${calls})`);
      },
    });
    const worker = createWorker(ctx, { kinds: [fail] });
    const id = await enqueue(ctx.db, fail, {});
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 2; attempt++) {
      assert.equal(await worker.runDue(), 1);
      const row = await job(id);
      const log = await runs(id);
      assert.equal(row.state, 'queued');
      assert.equal(row.attempts, attempt);
      assert.equal(row.last_error, `remote answered 503 (call ${attempt})`);
      const delay = row.run_at - log.at(-1)!.finished_at!;
      delays.push(delay);
      assert.equal(await worker.runDue(), 0, 'not before its delay');
      ctx.clock.advance(delay);
    }
    // Default backoff: between half and all of 10 s, then of 20 s.
    assert.ok(delays[0]! >= 5000 && delays[0]! <= 10_000, `first delay ${delays[0]}`);
    assert.ok(delays[1]! >= 10_000 && delays[1]! <= 20_000, `second delay ${delays[1]}`);
    assert.ok(delays[1]! > delays[0]!);

    assert.equal(await worker.runDue(), 1);
    const row = await job(id);
    assert.equal(row.state, 'failed');
    assert.equal(row.attempts, 3);
    assert.equal(row.last_error, 'remote answered 503 (call 3)');
    assert.ok(row.finished_at);
    const log = await runs(id);
    assert.deepEqual(
      log.map((r) => [r.attempt, r.outcome, r.error]),
      [1, 2, 3].map((n) => [n, 'failed', `remote answered 503 (call ${n})`]),
    );
    ctx.clock.advance(24 * HOUR);
    assert.equal(await worker.runDue(), 0, 'a failed job stays failed');
    assert.equal(calls, 3);
  });

  it('fails a job of a kind that has no handler, saying so', async () => {
    const worker = createWorker(ctx, { kinds: [] });
    const once = await enqueue(ctx.db, testJob('test.nobody', { maxAttempts: 1 }), {});
    const retried = await enqueue(ctx.db, testJob('test.nobody'), {});
    assert.equal(await worker.runDue(), 2);
    const failed = await job(once);
    assert.equal(failed.state, 'failed');
    assert.equal(failed.last_error, 'No handler for job kind "test.nobody"');
    assert.equal((await runs(once))[0]!.error, 'No handler for job kind "test.nobody"');
    // Retried like any failure, so that a worker of a newer version may still take it.
    const waiting = await job(retried);
    assert.equal(waiting.state, 'queued');
    assert.equal(waiting.max_attempts, 5);
    assert.equal(waiting.last_error, 'No handler for job kind "test.nobody"');
  });

  it("fails a job whose stored payload does not match its kind's schema at once, without running its handler", async () => {
    const ran: string[][] = [];
    const strict = defineJob({
      name: 'test.strict',
      payload: Type.Object({ keys: Type.Array(Type.String()) }),
      handler: async (_ctx, j) => void ran.push(j.payload.keys),
    });
    const worker = createWorker(ctx, { kinds: [strict] });
    // Written as another version of the code might have: the same kind, a payload this one refuses.
    const id = await enqueue(ctx.db, testJob('test.strict'), { keys: 'a.txt' });
    assert.equal(await worker.runDue(), 1);
    assert.deepEqual(ran, []);
    const row = await job(id);
    assert.equal(row.state, 'failed', 'not retried: every attempt would read the same payload');
    assert.equal(row.attempts, 1);
    assert.equal(row.max_attempts, 5);
    assert.equal(
      row.last_error,
      "The payload of this test.strict job does not match its kind's schema (payload/keys: Expected array)",
    );
    assert.deepEqual(
      (await runs(id)).map((r) => [r.attempt, r.outcome, r.error]),
      [[1, 'failed', row.last_error]],
    );

    const fits = await enqueue(ctx.db, strict, { keys: ['a.txt'] });
    assert.equal(await worker.runDue(), 1);
    assert.deepEqual(ran, [['a.txt']]);
    assert.equal((await job(fits)).state, 'done');
    // Checked by the compiler (npm run typecheck): enqueue takes the payload its kind declares, and nothing else.
    const _typed = async () => {
      // @ts-expect-error keys are strings
      await enqueue(ctx.db, strict, { keys: [1] });
      // @ts-expect-error a property the kind does not declare
      await enqueue(ctx.db, strict, { keys: [], extra: true });
      // @ts-expect-error no payload
      await enqueue(ctx.db, strict);
    };
  });

  it('retries with the attempts and backoff that its kind declares', async () => {
    const flaky = testJob('test.flaky', {
      maxAttempts: 2,
      backoff: { baseMs: 1000, maxMs: 1000 },
      handler: async () => {
        throw new Error('not yet');
      },
    });
    const worker = createWorker(ctx, { kinds: [flaky] });
    const id = await enqueue(ctx.db, flaky, {});
    assert.equal((await job(id)).max_attempts, 2);
    assert.equal(await worker.runDue(), 1);
    const delay = (await job(id)).run_at - (await runs(id))[0]!.finished_at!;
    assert.ok(delay >= 500 && delay <= 1000, `delay ${delay}`);
    ctx.clock.advance(delay);
    assert.equal(await worker.runDue(), 1);
    const row = await job(id);
    assert.equal(row.state, 'failed');
    assert.equal(row.attempts, 2);
  });

  it("retries on its kind's schedule, or at the time the handler names with RetryAt", async () => {
    const answers = ['schedule', 'at', 'schedule', 'at'];
    let calls = 0;
    const scheduled = testJob('test.scheduled', {
      maxAttempts: 5,
      retrySchedule: { delaysMs: [1000, 60_000], jitter: 0.1 },
      handler: async () => {
        const answer = answers[calls++];
        if (answer === 'at') throw new RetryAt('come back in three hours', ctx.clock.now() + 3 * HOUR);
        throw new Error('not yet');
      },
    });
    const worker = createWorker(ctx, { kinds: [scheduled] });
    const id = await enqueue(ctx.db, scheduled, {});
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      assert.equal(await worker.runDue(), 1);
      const row = await job(id);
      assert.equal(row.state, 'queued');
      delays.push(row.run_at - (await runs(id)).at(-1)!.finished_at!);
      ctx.clock.advance(row.run_at - ctx.clock.now());
    }
    assert.ok(delays[0]! >= 900 && delays[0]! <= 1100, `first delay ${delays[0]}`);
    assert.ok(Math.abs(delays[1]! - 3 * HOUR) <= 50, `RetryAt ${delays[1]}`);
    assert.ok(delays[2]! >= 54_000 && delays[2]! <= 66_000, `third delay ${delays[2]}: the schedule's second entry`);
    assert.ok(Math.abs(delays[3]! - 3 * HOUR) <= 50);
    assert.equal((await job(id)).last_error, 'come back in three hours');
    assert.equal(await worker.runDue(), 1);
    assert.equal((await job(id)).state, 'failed', 'RetryAt does not add attempts');
    assert.throws(
      () => testJob('test.both', { backoff: { baseMs: 1, maxMs: 1 }, retrySchedule: { delaysMs: [1], jitter: 0 } }),
      /backoff or retrySchedule, not both/,
    );
    assert.throws(() => testJob('test.empty', { retrySchedule: { delaysMs: [], jitter: 0 } }), /is empty/);
  });

  it('schedules the kinds that declare themselves recurring, one at a time, every so often', async () => {
    let ran = 0;
    const chore = defineJob({
      name: 'test.chore',
      payload: Type.Object({}),
      maxAttempts: 2,
      recurring: { everyMs: 2 * HOUR },
      handler: async () => void ran++,
    });
    const worker = createWorker(ctx, { kinds: [chore] });
    assert.equal(await worker.runDue(), 1);
    assert.equal(ran, 1);
    ctx.clock.advance(HOUR);
    assert.equal(await worker.runDue(), 0, 'it ran within the last two hours');
    ctx.clock.advance(HOUR + 1);
    assert.equal(await worker.runDue(), 1);
    assert.equal(ran, 2);
    const rows = await ctx.db
      .selectFrom('jobs')
      .select(['payload', 'max_attempts', 'state'])
      .where('kind', '=', 'test.chore')
      .execute();
    assert.deepEqual(
      rows,
      [1, 2].map(() => ({ payload: '{}', max_attempts: 2, state: 'done' })),
    );
    assert.equal(
      await createWorker(ctx, { kinds: [] }).runDue(),
      0,
      'a worker not given the kind does not schedule it',
    );
  });

  it('refuses job kinds that could not run as defined', () => {
    const handler = async () => {};
    assert.throws(
      () =>
        defineJob({
          name: 'test.bad',
          payload: Type.Object({ n: Type.Integer() }),
          recurring: { everyMs: HOUR },
          handler,
        }),
      /test\.bad: a recurring kind is enqueued with the payload \{\}, which its schema refuses/,
    );
    assert.throws(
      () => defineJob({ name: 'test.bad', payload: Type.Object({}), maxAttempts: 0, handler }),
      /test\.bad: maxAttempts must be a whole number of at least 1, got 0/,
    );
    assert.throws(() => defineJob({ name: '', payload: Type.Object({}), handler }), /needs a name/);
    assert.throws(
      () => createWorker(ctx, { kinds: [testJob('test.twice'), testJob('test.twice')] }),
      /two job kinds are named "test.twice"/,
    );
  });

  it('takes over a job whose lease ran out and resumes it from its last checkpoint', async () => {
    const processed: number[] = [];
    const hung = deferred();
    const release = deferred();
    let lateCheckpoint: unknown;
    const resume = testJob('test.resume', {
      async handler(_ctx, j, tools) {
        const start = (j.progress as { next: number } | undefined)?.next ?? 0;
        for (let i = start; i < 6; i++) {
          processed.push(i);
          await tools.checkpoint({ next: i + 1 });
          if (j.attempt === 1 && i === 2) {
            // As if this worker's process had frozen: it holds the job past its lease.
            hung.resolve();
            await release.promise;
            lateCheckpoint = await tools.checkpoint({ next: 99 }).then(
              () => 'saved',
              (e: Error) => e.message,
            );
            return;
          }
        }
      },
    });
    const first = createWorker(ctx, { kinds: [resume], leaseMs: 60_000 });
    const second = createWorker(ctx, { kinds: [resume], leaseMs: 60_000 });
    const id = await enqueue(ctx.db, resume, {});
    const firstRun = first.runDue();
    await hung.promise;
    assert.equal(await second.runDue(), 0, 'the lease still holds');
    ctx.clock.advance(60_001);
    assert.equal(await second.runDue(), 1);
    assert.deepEqual(processed, [0, 1, 2, 3, 4, 5], 'the second run started after the last checkpoint');
    assert.equal((await job(id)).state, 'done');

    release.resolve();
    assert.equal(await firstRun, 1);
    assert.match(String(lateCheckpoint), /no longer held by this run/);
    const row = await job(id);
    assert.equal(row.state, 'done', 'the old run changes nothing when it wakes up');
    assert.equal(row.progress, JSON.stringify({ next: 6 }));
    assert.equal(row.attempts, 2);
    assert.deepEqual(
      (await runs(id)).map((r) => [r.attempt, r.worker, r.outcome]),
      [
        [1, first.id, 'lost'],
        [2, second.id, 'done'],
      ],
    );
  });

  it('lets a stopping worker finish its jobs, and puts back the ones it must abort without counting the attempt', async () => {
    const started = deferred();
    const finish = deferred();
    const quickJob = testJob('test.quick', {
      handler: async () => {
        await finish.promise;
      },
    });
    const endlessJob = testJob('test.endless', {
      handler: (_ctx, _j, tools) =>
        new Promise((_resolve, reject) => {
          started.resolve();
          tools.signal.addEventListener('abort', () => reject(tools.signal.reason));
        }),
    });
    const worker = createWorker(ctx, { concurrency: 2, graceMs: 200, kinds: [quickJob, endlessJob] });
    const quick = await enqueue(ctx.db, quickJob, {});
    const endless = await enqueue(ctx.db, endlessJob, {});
    worker.start();
    await started.promise;
    await waitFor('both jobs to be claimed', async () => (await job(quick)).state === 'running');
    const stopped = worker.stop();
    finish.resolve();
    await stopped;
    assert.equal((await job(quick)).state, 'done');
    const put = await job(endless);
    assert.equal(put.state, 'queued');
    assert.equal(put.attempts, 0);
    assert.equal(put.lease_token, null);
    assert.deepEqual(
      (await runs(endless)).map((r) => [r.attempt, r.outcome]),
      [[1, 'interrupted']],
    );
    const next = createWorker(ctx, { kinds: [testJob('test.endless')] });
    assert.equal(await next.runDue(), 1);
    assert.equal((await job(endless)).attempts, 1);
  });

  it('wakes a started worker when this process enqueues a job, without waiting for the next poll', async () => {
    const ran: number[] = [];
    const wake = defineJob({
      name: 'test.wake',
      payload: Type.Number(),
      handler: async (_ctx, j) => void ran.push(j.payload),
    });
    const worker = createWorker(ctx, { pollMs: 3_600_000, kinds: [wake] });
    try {
      worker.start();
      // The first is found by the first look; the second, enqueued after it, only by a wake-up (the next poll is an hour away).
      await enqueue(ctx.db, wake, 1);
      await waitFor('the first job', async () => ran.length === 1);
      await transact(ctx.db, (trx) => enqueue(trx, wake, 2));
      await waitFor('the second job', async () => ran.length === 2);
      assert.deepEqual(ran, [1, 2]);
    } finally {
      await worker.stop();
    }
  });

  it('answers the ids of jobs enqueued together in the order given, each the id of its own row', async () => {
    const first = testJob('test.ids-first');
    const second = testJob('test.ids-second');
    const before = await enqueue(ctx.db, first, 'alone');
    const ids = await transact(ctx.db, (trx) =>
      enqueueAll(trx, [jobOf(second, 'a'), jobOf(first, 'b'), jobOf(second, 'c')]),
    );
    assert.equal(ids.length, 3);
    assert.ok(ids[0]! > before);
    const rows = await Promise.all(ids.map((id) => jobRow(ctx, id)));
    assert.deepEqual(
      rows.map((r) => [r.kind, JSON.parse(r.payload)]),
      [
        ['test.ids-second', 'a'],
        ['test.ids-first', 'b'],
        ['test.ids-second', 'c'],
      ],
    );
    assert.equal((await jobRow(ctx, before)).payload, '"alone"');
  });

  it('claims no more jobs than it asks for, on either database', async () => {
    const many = testJob('test.many');
    await enqueueAll(
      ctx.db,
      Array.from({ length: 30 }, (_, i) => jobOf(many, i)),
    );
    const now = ctx.clock.now();
    const lease = { owner: 'test', token: 'limit-test', until: now + 60_000 };
    const claimed = await claimDue(ctx.db, now, lease, [{ kinds: ['test.many'], pool: 'p' }], { p: 7 });
    assert.equal(claimed.length, 7);
    const running = await ctx.db.selectFrom('jobs').select('id').where('state', '=', 'running').execute();
    assert.equal(running.length, 7);
  });

  it('waits on stop for the run of a job taken back and claimed again, after the run that lost it ended', async () => {
    // The first run ignores its lease running out (and the abort it brings); the job is taken
    // back and run again beside it by the same worker. When the first ends, the second must
    // still be waited for.
    const first = deferred();
    const second = deferred();
    const secondStarted = deferred();
    const stubborn = testJob('test.stubborn', {
      handler: async (_ctx, j, tools) => {
        if (j.attempt === 1) return first.promise;
        secondStarted.resolve();
        // This one keeps its lease, checkpointing far more often than it runs out, so that
        // a slow machine cannot take it back too.
        let released = false;
        void second.promise.then(() => (released = true));
        while (!released) {
          await tools.checkpoint(null);
          await sleep(50);
        }
      },
    });
    const id = await enqueue(ctx.db, stubborn, 'x');
    const firstEnded = deferred();
    const log = {
      info: () => undefined,
      error: () => undefined,
      warn: (_details: object, message: string) => {
        if (message.includes('lease was taken over')) firstEnded.resolve();
      },
    };
    const worker = startWorker(ctx, { kinds: [stubborn], pollMs: 20, leaseMs: 1000, graceMs: 10_000, log });
    try {
      await secondStarted.promise;
      first.resolve();
      // The first run's end, not recorded (the lease being another's), and then its last step.
      await firstEnded.promise;
      await sleep(20);
      assert.deepEqual(
        (await runs(id)).map((r) => r.outcome),
        ['lost', null],
      );
      const stopped = worker.stop().then(() => 'stopped');
      assert.equal(await Promise.race([stopped, sleep(300).then(() => 'still waiting')]), 'still waiting');
      second.resolve();
      assert.equal(await stopped, 'stopped');
    } finally {
      first.resolve();
      second.resolve();
      await worker.stop();
    }
    assert.equal((await job(id)).state, 'done');
  });

  it('records, of two ends of one job in one batch, only the run that holds it, and says which', async () => {
    // A run whose lease ran out (taken back, logged lost) and the job's next run end together.
    const id = await enqueue(ctx.db, testJob('test.twice'), 'x');
    const now = ctx.clock.now();
    const groups: ClaimGroup[] = [{ kinds: ['test.twice'], pool: 'p' }];
    const [stale] = await claimDue(ctx.db, now, { owner: 'a', token: 'stale', until: now + 10 }, groups, { p: 1 });
    assert.deepEqual(await reclaimExpired(ctx.db, now + 20), [id]);
    const [current] = await claimDue(ctx.db, now + 20, { owner: 'b', token: 'current', until: now + HOUR }, groups, {
      p: 1,
    });
    assert.ok(stale && current && stale.id === id && current.id === id && current.runId !== stale.runId);
    const end = (job: typeof stale, at: number) => ({ job, now: at, end: { outcome: 'done' as const }, writes: [] });
    assert.deepEqual(await finishRuns(ctx.db, [end(stale, now + 30), end(current, now + 40)]), [false, true]);
    const stored = await job(id);
    assert.deepEqual([stored.state, stored.finished_at, stored.lease_token], ['done', now + 40, null]);
    assert.deepEqual(
      (await runs(id)).map((r) => [r.id, r.outcome, r.finished_at]),
      [
        [stale.runId, 'lost', now + 20],
        [current.runId, 'done', now + 40],
      ],
    );
  });

  it('claims the oldest due jobs of each pool up to its limit, and kinds no worker knows once the known are drained', async () => {
    const now = ctx.clock.now();
    const row = (kind: string, runAt: number) => ({ kind, payload: 'null', runAt, maxAttempts: 3 });
    const ids = await insertJobs(ctx.db, [
      row('test.s1', now - 50),
      row('test.s2', now - 40),
      row('test.s1', now - 30),
      row('test.s2', now - 20),
      row('test.s1', now + HOUR),
      row('test.o', now - 45),
      row('test.o', now - 35),
      row('test.o', now - 25),
      row('test.unknown', now - 60),
    ]);
    const lease = (token: string) => ({ owner: 'test', token, until: now + 60_000 });
    const groups: ClaimGroup[] = [
      { kinds: ['test.s1', 'test.s2'], pool: '' },
      { kinds: ['test.o'], pool: 'test.o' },
      { except: ['test.s1', 'test.s2', 'test.o'], pool: '', onlyIfDrained: true },
    ];
    // The shared pool takes its three oldest of two kinds, the other pool its two oldest: both
    // full, so the kind no worker knows waits, however old.
    const first = await claimDue(ctx.db, now, lease('first'), groups, { '': 3, 'test.o': 2 });
    assert.deepEqual(
      first.map((j) => j.id),
      [ids[0], ids[5], ids[1], ids[6], ids[2]],
    );
    for (const claimed of first) {
      const stored = await job(claimed.id);
      assert.equal(stored.state, 'running');
      assert.equal(stored.lease_token, 'first');
      assert.equal(stored.attempts, 1);
      assert.equal(claimed.attempts, 1);
      const logged = await runs(claimed.id);
      assert.deepEqual(
        logged.map((r) => [r.id, r.attempt, r.worker, r.outcome]),
        [[claimed.runId, 1, 'test', null]],
      );
    }
    // Room to spare in both pools: they are drained, and the stranger comes with them.
    const second = await claimDue(ctx.db, now, lease('second'), groups, { '': 5, 'test.o': 5 });
    assert.deepEqual(second.map((j) => j.id).sort(), [ids[3], ids[7], ids[8]].sort());
    assert.ok(second.every((j) => j.token === 'second'));
    // What is left is not due.
    assert.deepEqual(await claimDue(ctx.db, now, lease('third'), groups, { '': 5, 'test.o': 5 }), []);
    assert.equal((await job(ids[4]!)).state, 'queued');
  });

  it("counts the outbox per kind for /metrics from each kind's index range, finished jobs unread", async () => {
    const deliver = testJob('test.stats-deliver');
    const mail = testJob('test.stats-mail');
    const now = ctx.clock.now();
    const [, second] = await enqueueAll(ctx.db, [jobOf(deliver, 1), jobOf(deliver, 2), jobOf(deliver, 3)]);
    await enqueue(ctx.db, deliver, 'later', { runAt: now + HOUR });
    await enqueue(ctx.db, mail, 'retried', { runAt: now - 5000 });
    await enqueue(ctx.db, mail, 'retried later', { runAt: now - 1000 });
    const lease = { owner: 'test', token: 'stats-test', until: now + 60_000 };
    assert.equal(
      (await claimDue(ctx.db, now, lease, [{ kinds: ['test.stats-deliver'], pool: 'p' }], { p: 1 })).length,
      1,
    );
    // Finished jobs are kept for days; they are in no count.
    const done = await enqueue(ctx.db, mail, 'done');
    await ctx.db.updateTable('jobs').set({ state: 'done', finished_at: now }).where('id', '=', done).execute();

    const recorder = new QueryRecorder();
    const stats = await outboxStats(ctx.db.withPlugin(recorder), now);
    assert.deepEqual(
      stats.filter((s) => s.kind.startsWith('test.stats-')).sort((x, y) => x.kind.localeCompare(y.kind)),
      [
        // The oldest due one was claimed: the next one written is the oldest due now.
        {
          kind: 'test.stats-deliver',
          due: 2,
          scheduled: 1,
          running: 1,
          oldestDueAt: (await job(second!)).created_at,
        },
        { kind: 'test.stats-mail', due: 2, scheduled: 0, running: 0, oldestDueAt: now - 5000 },
      ].map((s) => ({ ...s, oldestDueAt: Number(s.oldestDueAt) })),
    );
    if (dialectName === 'sqlite') {
      // SQLite keeps no statistics here: a plan that scans reads every finished job.
      for (const query of recorder.compiled(ctx.db)) {
        const { rows } = await ctx.db.executeQuery<{ detail: string }>(
          CompiledQuery.raw(`EXPLAIN QUERY PLAN ${query.sql}`, [...query.parameters]),
        );
        for (const { detail } of rows) assert.doesNotMatch(detail, /^SCAN (jobs|later)\b/, `${query.sql}: ${detail}`);
      }
    }
  });

  // Two shapes of a saturated API's loop: always busy, and busy about five sixths of the time
  // with waits in between, as it is while creates wait for the SQLite create thread or for
  // PostgreSQL (the worker counted that as idle when it needed 90% busy, and delivered at full
  // speed beside a saturated API).
  // The second spins five times as long as its last wait took (at least 35 ms), so that a timer
  // that a loaded machine fires late leaves the loop as busy: the share is what is tested. A
  // third: a loop mostly idle, with 20 of the API's calls waiting for PostgreSQL's shared
  // statements (yieldTo.waiting), as when it waits for them more than it works.
  const loads = [
    {
      shape: 'always busy',
      busyMs: 40,
      perWait: 0,
      waiting: 0,
      wait: () => new Promise<void>((resolve) => setImmediate(resolve)),
    },
    {
      shape: 'busy 35 ms in every 42',
      busyMs: 35,
      perWait: 5,
      waiting: 0,
      wait: () => new Promise<void>((resolve) => setTimeout(resolve, 7)),
    },
    {
      shape: 'mostly idle, 20 calls waiting for the database',
      busyMs: 1,
      perWait: 0,
      waiting: 20,
      wait: () => new Promise<void>((resolve) => setTimeout(resolve, 10)),
    },
  ];
  for (const load of loads) {
    it(`holds back while the API is saturated (yieldTo; its loop ${load.shape}), then runs every job at full speed`, async () => {
      const started: number[] = [];
      const release = deferred();
      const held = defineJob({
        name: 'test.held',
        payload: Type.Number(),
        concurrency: 32,
        handler: async (_ctx, j) => {
          started.push(j.payload);
          await release.promise;
        },
      });
      await enqueueAll(
        ctx.db,
        Array.from({ length: 30 }, (_, i) => jobOf(held, i)),
      );
      // Requests keep coming, two a millisecond (the worker counts 8 per 100 ms as saturated): by
      // the clock, not per look, so that a look a stalled machine makes late finds as many.
      let waiting = 0;
      const worker = createWorker(ctx, {
        pollMs: 3_600_000,
        kinds: [held],
        yieldTo: { received: () => Math.floor(2 * performance.now()), waiting: () => waiting },
      });
      try {
        // The loop kept busy for a while, as under a flood of requests: the worker takes 2 jobs
        // per claim with 500 ms between claims, so not all 30 start within 250 ms (without
        // holding back, its first claim would take them all: 32 slots).
        const spin = (ms: number) => {
          const until = performance.now() + ms;
          while (performance.now() < until);
        };
        const loadFor = async (ms: number) => {
          const ends = performance.now() + ms;
          let busyMs = load.busyMs;
          while (performance.now() < ends) {
            spin(busyMs);
            const waited = performance.now();
            await load.wait();
            busyMs = Math.max(load.busyMs, load.perWait * (performance.now() - waited));
          }
        };
        waiting = load.waiting;
        await loadFor(150);
        worker.start();
        await loadFor(250);
        waiting = 0;
        assert.ok(started.length < 30, `a saturated worker started ${started.length} of 30 jobs at once`);
        // The load gone, the rest of the 30 run together in the 32 slots (each waits for release).
        await waitFor('every job', async () => started.length === 30);
        release.resolve();
        await waitFor('every job done', async () => {
          const done = await ctx.db.selectFrom('jobs').select('id').where('state', '=', 'done').execute();
          return done.length === 30;
        });
        assert.deepEqual(
          [...started].sort((a, b) => a - b),
          Array.from({ length: 30 }, (_, i) => i),
        );
      } finally {
        release.resolve();
        await worker.stop();
      }
    });
  }

  it(
    'notifies listeners of other connections when an enqueue commits, and not when it rolls back (PostgreSQL)',
    { skip: dialectName !== 'postgres', timeout: 30_000 },
    async () => {
      const notified = deferred<number>();
      const notify = testJob('test.notify');
      const listener = await listenForJobs(
        ctx.db,
        (jobId) => notified.resolve(jobId),
        () => {},
      );
      assert.ok(listener, 'PostgreSQL listens');
      try {
        await assert.rejects(
          transact(ctx.db, async (trx) => {
            await enqueue(trx, notify, 1);
            throw new Error('rolled back');
          }),
        );
        const committed = await transact(ctx.db, (trx) => enqueue(trx, notify, 2));
        // Notifications arrive in commit order: one from the rollback would have come first.
        assert.equal(await notified.promise, committed);
      } finally {
        await listener.close();
      }
    },
  );

  it('refuses bad worker settings with the name of the setting', () => {
    const c = loadConfig({});
    assert.deepEqual([c.workerPollMs, c.jobLeaseSeconds, c.workerConcurrency, c.jobRetentionDays], [1000, 300, 4, 30]);
    for (const [name, value] of [
      ['WORKER_POLL_MS', 'soon'],
      ['WORKER_POLL_MS', '5'],
      ['JOB_LEASE_SECONDS', '1'],
      ['WORKER_CONCURRENCY', '0'],
      ['WORKER_CONCURRENCY', '2.5'],
      ['JOB_RETENTION_DAYS', '0'],
    ] as const) {
      assert.throws(
        () => loadConfig({ [name]: value }),
        (e: unknown) => e instanceof ConfigError && e.setting === name,
        `${name}=${value}`,
      );
    }
  });

  it('refuses a job lease no longer than a webhook delivery may take, naming both settings', () => {
    // The default timeout is 15 s: a delivery that took it all would outlast a lease of 15 s.
    for (const env of [{ JOB_LEASE_SECONDS: '15' }, { JOB_LEASE_SECONDS: '30', WEBHOOK_TIMEOUT_MS: '30000' }])
      assert.throws(
        () => loadConfig(env),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.setting === 'JOB_LEASE_SECONDS' &&
          /WEBHOOK_TIMEOUT_MS \(\d+ ms\)/.test(e.message),
        JSON.stringify(env),
      );
    assert.equal(loadConfig({ JOB_LEASE_SECONDS: '16' }).jobLeaseSeconds, 16);
    assert.equal(loadConfig({ JOB_LEASE_SECONDS: '5', WEBHOOK_TIMEOUT_MS: '4000' }).webhookTimeoutMs, 4000);
  });
});

// Worker processes on the database of a test app: the command that deployments scale out.
// An app of its own, so that its clock agrees with theirs (leases are compared across processes).
describe(`worker processes (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  const job = (id: number) => jobRow(ctx, id);
  const runs = (id: number) => jobRuns(ctx, id);

  before(async () => {
    app = await startTestApp();
    ctx = app.server.ctx;
    for (const statement of TEST_TABLES_SQL) await sql.raw(statement).execute(ctx.db);
  });
  after(() => app.close());
  beforeEach(() => ctx.db.deleteFrom('jobs').execute());

  /** test/support/job-worker-child.ts on this app's database: `formwork worker` with the test handlers. */
  function startChild(args = ['test/support/job-worker-child.ts'], env: Record<string, string> = {}) {
    const child = spawn(process.execPath, nodeArgs(args[0] ?? '', ...args.slice(1)), {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: app.config.dataDir,
        LOG_LEVEL: 'silent',
        WORKER_POLL_MS: '50',
        ...(app.config.databaseUrl ? { DATABASE_URL: app.config.databaseUrl } : {}),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.once('exit', (code, signal) => resolve(signal ?? code)),
    );
    let stdout = '';
    const printed = (text: string) =>
      new Promise<void>((resolve, reject) => {
        const check = () => stdout.includes(text) && resolve();
        child.stdout.on('data', check);
        check();
        void exited.then((how) =>
          reject(new Error(`the worker process ended (${String(how)}) before printing "${text}": ${stderr}`)),
        );
      });
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    return { process: child, exited, printed, stderr: () => stderr };
  }

  it('runs each of several hundred jobs exactly once with two worker processes on one database', async () => {
    const total = 300;
    const children = [startChild(), startChild()];
    try {
      await Promise.all(children.map((c) => c.printed('ready')));
      for (let batch = 0; batch < total; batch += 50) {
        await transact(ctx.db, async (trx) => {
          for (let n = batch; n < batch + 50; n++) await enqueue(trx, spreadJob, { n });
        });
      }
      await waitFor('every job to be done', async () => {
        const row = await ctx.db
          .selectFrom('jobs')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('kind', '=', 'test.spread')
          .where('state', '=', 'done')
          .executeTakeFirstOrThrow();
        return Number(row.n) === total;
      });
    } finally {
      for (const child of children) child.process.kill('SIGTERM');
    }
    assert.deepEqual(
      await Promise.all(children.map((c) => c.exited)),
      [0, 0],
      'SIGTERM stops the worker command cleanly',
    );

    const ran = await sql<{
      n: number;
      worker_pid: number;
    }>`SELECT n, worker_pid FROM job_test_spread ORDER BY n`.execute(ctx.db);
    assert.deepEqual(
      ran.rows.map((r) => r.n),
      Array.from({ length: total }, (_, n) => n),
      'each job ran exactly once',
    );
    const pids = new Set(children.map((c) => c.process.pid));
    assert.ok(ran.rows.every((r) => pids.has(r.worker_pid)));
    const log = await ctx.db
      .selectFrom('job_runs')
      .innerJoin('jobs', 'jobs.id', 'job_runs.job_id')
      .select(['job_runs.outcome', 'job_runs.attempt'])
      .where('jobs.kind', '=', 'test.spread')
      .execute();
    assert.equal(log.length, total);
    assert.ok(log.every((r) => r.outcome === 'done' && r.attempt === 1));
  });

  it('finishes the job of a worker process killed halfway, from its checkpoint, without redoing or skipping a batch', async () => {
    const id = await enqueue(ctx.db, batchesJob, { batches: 12, pauseAt: 5 });
    const child = startChild();
    try {
      // The child prints "paused" from inside the uncommitted transaction of batch 5.
      await child.printed('paused');
    } finally {
      child.process.kill('SIGKILL');
    }
    assert.equal(await child.exited, 'SIGKILL');

    const batches = () =>
      sql<{
        batch: number;
        attempt: number;
      }>`SELECT batch, attempt FROM job_test_batches WHERE job_id = ${id} ORDER BY batch, attempt`.execute(ctx.db);
    assert.deepEqual(
      (await batches()).rows.map((r) => r.batch),
      [0, 1, 2, 3, 4],
      'the batch in progress died with the process',
    );
    const held = await job(id);
    assert.equal(held.state, 'running');
    assert.equal(held.progress, JSON.stringify({ next: 5 }));

    const worker = createWorker(ctx, { kinds: testKinds });
    assert.equal(await worker.runDue(), 0, 'the dead worker still holds the lease');
    ctx.clock.advance(ctx.config.jobLeaseSeconds * 1000 + 1000);
    assert.equal(await worker.runDue(), 1);

    assert.deepEqual(
      (await batches()).rows.map((r) => [r.batch, r.attempt]),
      Array.from({ length: 12 }, (_, batch) => [batch, batch < 5 ? 1 : 2]),
    );
    const done = await job(id);
    assert.equal(done.state, 'done');
    assert.equal(done.progress, JSON.stringify({ next: 12 }));
    assert.deepEqual(
      (await runs(id)).map((r) => [r.attempt, r.outcome]),
      [
        [1, 'lost'],
        [2, 'done'],
      ],
    );
  });

  it('runs the worker inside `serve`, which schedules the daily pruning of old finished jobs', async () => {
    const old = await enqueue(ctx.db, testJob('test.old'), {});
    const recent = await enqueue(ctx.db, testJob('test.recent'), {});
    const now = Date.now(); // the clock of the server started below, which no test moves
    await ctx.db
      .updateTable('jobs')
      .set({ state: 'done', finished_at: now - 31 * 24 * HOUR })
      .where('id', '=', old)
      .execute();
    await ctx.db
      .updateTable('jobs')
      .set({ state: 'failed', finished_at: now - 29 * 24 * HOUR })
      .where('id', '=', recent)
      .execute();

    const server = await startServer(
      loadConfig({
        ...(app.config.databaseUrl ? { DATABASE_URL: app.config.databaseUrl } : {}),
        DATA_DIR: app.config.dataDir,
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'silent',
        WORKER_POLL_MS: '50',
      }),
      { worker: true },
    );
    try {
      assert.ok(server.worker);
      const prune = await waitFor('the prune job to run', () =>
        ctx.db
          .selectFrom('jobs')
          .selectAll()
          .where('kind', '=', 'jobs.prune')
          .where('state', '=', 'done')
          .executeTakeFirst(),
      );
      assert.equal(prune.attempts, 1);
      const left = await ctx.db.selectFrom('jobs').select('id').where('id', 'in', [old, recent]).execute();
      assert.deepEqual(
        left.map((r) => r.id),
        [recent],
      );

      // A job enqueued in this process wakes the serve worker (the application has no such kind, so it fails at once).
      const id = await enqueue(server.ctx.db, testJob('test.unregistered', { maxAttempts: 1 }), {});
      const failed = await waitFor('the job to be taken', async () =>
        (await job(id)).state === 'failed' ? job(id) : undefined,
      );
      assert.equal(failed.last_error, 'No handler for job kind "test.unregistered"');
    } finally {
      await server.close();
    }
  });

  it('runs jobs in `formwork worker`, which stops on SIGTERM and takes no arguments', async () => {
    // On PostgreSQL the next poll is an hour away: the second job is found by the look the worker takes after a run, or by the notification of the commit.
    const child = startChild(['src/cli.ts', 'worker'], {
      LOG_LEVEL: 'info',
      WORKER_POLL_MS: dialectName === 'postgres' ? '3600000' : '50',
    });
    try {
      await child.printed('worker started');
      for (const n of [1, 2]) {
        const id = await enqueue(ctx.db, testJob(`test.not-in-the-registry-${n}`, { maxAttempts: 1 }), {});
        const failed = await waitFor(`the worker to take job ${n}`, async () =>
          (await job(id)).state === 'failed' ? job(id) : undefined,
        );
        assert.equal(failed.last_error, `No handler for job kind "test.not-in-the-registry-${n}"`);
        assert.match((await runs(id))[0]!.worker, new RegExp(`:${child.process.pid}:`));
      }
    } finally {
      child.process.kill('SIGTERM');
    }
    assert.equal(await child.exited, 0);

    const wrong = startChild(['src/cli.ts', 'worker', '--no-worker']);
    assert.equal(await wrong.exited, 1);
    assert.match(wrong.stderr(), /formwork: .*no-worker/);
  });
});
