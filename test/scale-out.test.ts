/**
 * The scaled-out shape, for real: two `formwork serve --no-worker` and two `formwork worker`
 * (the commands of deploy/systemd), behind nginx run with deploy/nginx.conf, on one
 * PostgreSQL, one Redis and an S3-compatible store (s3rver), with a webhook (a receiver on
 * loopback), a notification email (an SMTP sink) and a document merge (a DOCX template) on
 * the form.
 *
 * Under load through the balancer: a rolling restart (SIGTERM, one API process at a time)
 * fails no request; then a worker and an API process are killed (SIGKILL) and started again.
 * At the end every submission is stored once, every webhook delivered and every email sent,
 * and a repeat (after the crash only) carries the same webhook-id or Message-ID; every
 * submission has exactly one document, its object in the bucket (a generation job run again
 * after the crash finds it made, or records nothing more: one row per integration and
 * submission). Shared state:
 * quotas, the encryption-password throttle and form reads agree whichever process answers.
 *
 * Runs on PostgreSQL only (FORMWORK_TEST_DATABASE_URL). Without nginx (/usr/sbin/nginx) or
 * Redis it is skipped, unless FORMWORK_TEST_REQUIRE_SCALEOUT is set (CI sets it), which makes
 * either missing a failure.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { openDatabase } from '../src/db/database.js';
import { PASSWORD_ATTEMPT_WINDOW_SECONDS } from '../src/modules/encryption/keys.js';
import { makeDocx, readDocx } from './support/docmerge-templates.js';
import { TEST_PG_URL } from './support/helpers.js';
import { nginxMissing, skipUnlessPresent, startBalancer, type Balancer } from './support/nginx.js';
import { freePort, ProcessSet, type Served } from './support/processes.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { redisAnswers } from './support/redis.js';
import { awayFromWindowEnd } from './support/quota.js';
import { startS3, type TestS3 } from './support/s3.js';
import { startSmtpSink, type SmtpSink } from './support/smtp.js';

const REDIS_URL = process.env.FORMWORK_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
/** Submissions through the balancer: enough to spread over every process and restart, few enough for CI. */
const TOTAL = Number(process.env.FORMWORK_TEST_SCALEOUT_SUBMISSIONS || 1500);
const CONCURRENCY = 12;

async function skipReason(): Promise<string | false> {
  if (!TEST_PG_URL) return 'runs on PostgreSQL only (set FORMWORK_TEST_DATABASE_URL)';
  return skipUnlessPresent([...nginxMissing(), ...((await redisAnswers(REDIS_URL)) ? [] : [`Redis at ${REDIS_URL}`])]);
}

/** The formwork arguments of a systemd unit's ExecStart (deploy/systemd). */
function unitCommand(unit: string): string[] {
  const text = readFileSync(join('deploy/systemd', unit), 'utf8');
  const exec = /^ExecStart=(\S+)\s+(.*)$/m.exec(text);
  assert.ok(exec, `${unit} has an ExecStart`);
  assert.match(exec[1]!, /\/formwork$/);
  return exec[2]!.trim().split(/\s+/);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const skip = await skipReason();

describe('scale-out: two API processes and two workers behind nginx on PostgreSQL, Redis and S3', () => {
  const processes = new ProcessSet('scale');
  let s3: TestS3;
  let smtp: SmtpSink;
  let receiver: Receiver;
  let nginx: Balancer | undefined;
  const apiPorts: number[] = [];
  const apis: Served[] = [];
  const workers: Served[] = [];
  let token: string;
  const apiArgs = unitCommand('formwork-api@.service');
  const workerArgs = unitCommand('formwork-worker@.service');

  // Each API process takes a free port at its first start (another where a stranger takes it
  // first: a CI run once lost one to a server of its other leg) and keeps it, as nginx's
  // configuration names it, through every restart.
  const startApi = async (i: number) => {
    const fixed = apiPorts[i];
    apis[i] = await processes.serve(fixed === undefined ? {} : { PORT: String(fixed) }, apiArgs.slice(1));
    apiPorts[i] = apis[i].port;
    return apis[i];
  };
  const startWorker = async (i: number) => {
    workers[i] = await processes.worker();
    return workers[i]!;
  };

  before(async () => {
    if (skip) return;
    assert.deepEqual(apiArgs, ['serve', '--no-worker']);
    assert.deepEqual(workerArgs, ['worker']);
    await processes.open();
    [s3, smtp, receiver] = await Promise.all([startS3(), startSmtpSink(), startReceiver()]);
    const balancerPort = await freePort();
    processes.env = {
      ...processes.env,
      ...s3.env,
      REDIS_URL,
      SMTP_URL: smtp.url,
      SECRET_KEY: randomBytes(32).toString('hex'),
      PUBLIC_URL: `http://127.0.0.1:${balancerPort}`,
      TRUST_PROXY: '1',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      RATE_LIMIT_PER_MINUTE: '1000000',
      RATE_LIMIT_PER_DAY: '10000000',
      ENCRYPTION_PASSWORD_ATTEMPTS: '4',
      WORKER_POLL_MS: '200',
      // A killed worker's jobs come back after 30 s (a run has that long at most), and a killed
      // API's Idempotency-Keys are freed after 5. The lease was 5 s too, until a CI run on a
      // machine so busy that a delivery's run (its request, its result written) took longer:
      // 626 of 1,500 deliveries lost their lease at every attempt and failed.
      JOB_LEASE_SECONDS: '30',
      // An email's whole send must end within its lease (config.ts).
      SMTP_TIMEOUT_MS: '20000',
      PROCESS_TIMEOUT_SECONDS: '5',
      SHUTDOWN_TIMEOUT_MS: '10000',
    };
    token = await processes.createAccount('Scale', 'scale@example.com');
    await Promise.all([startApi(0), startApi(1), startWorker(0), startWorker(1)]);

    nginx = await startBalancer(processes.dataDir, [apiPorts[0]!, apiPorts[1]!], balancerPort);
  });

  after(async () => {
    // Skipped, it still made its data folder (new ProcessSet), which goes too.
    if (skip) return processes.close();
    await nginx?.stop();
    await processes.close('SIGKILL');
    await Promise.all([s3?.close(), smtp?.close(), receiver?.close()]);
  });

  const api = async (
    base: string,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const res = await fetch(`${base}/api/v2025${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: text.startsWith('{') ? JSON.parse(text) : text };
  };
  const ok = async (base: string, method: string, path: string, body?: unknown) => {
    const res = await api(base, method, path, body);
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };

  it('shares quotas, the encryption-password throttle and form reads between the API processes', { skip }, async () => {
    const [one, two] = apis.map((a) => a.url) as [string, string];
    // Quota: the burst window's remaining count goes down by one per call, whichever process answers.
    // The window is a minute on the clock (rate-limit.ts): calls that straddle its end would see
    // it start again, so they start with ten seconds of it left at least.
    const reset = /"burst";r=\d+;t=(\d+)/.exec((await api(one, 'GET', '/forms')).headers.get('ratelimit') ?? '');
    assert.ok(reset, 'the burst window is the closer one');
    if (Number(reset[1]) < 10) await sleep((Number(reset[1]) + 1) * 1000);
    const remaining: number[] = [];
    for (const base of [one, two, one, two, one, two]) {
      const res = await api(base, 'GET', '/forms');
      assert.equal(res.status, 200);
      const header = res.headers.get('ratelimit') ?? '';
      const burst = /"burst";r=(\d+)/.exec(header);
      assert.ok(burst, header);
      remaining.push(Number(burst[1]));
    }
    for (let i = 1; i < remaining.length; i++) assert.equal(remaining[i], remaining[i - 1]! - 1, `${remaining}`);

    // Form reads: a change through one process is what the other serves next, every time.
    const form = await ok(one, 'POST', '/forms', { name: 'v0', fields: [{ type: 'text', label: 'Note' }] });
    for (let v = 1; v <= 6; v++) {
      const [writer, reader] = v % 2 ? [one, two] : [two, one];
      assert.equal((await ok(reader, 'GET', `/forms/${form.id}`)).name, `v${v - 1}`);
      await ok(writer, 'PUT', `/forms/${form.id}`, { name: `v${v}` });
      assert.equal((await ok(reader, 'GET', `/forms/${form.id}`)).name, `v${v}`, 'never stale');
      assert.equal((await ok(reader, 'GET', `/forms/${form.id}?withFields=true`)).name, `v${v}`);
    }

    // Encryption-password throttle (4 per form): wrong passwords alternate between processes.
    const sealed = await ok(one, 'POST', '/forms', {
      name: 'Sealed',
      isEncrypted: true,
      encryptionPassword: 'right password here',
      fields: [{ type: 'text', label: 'Note' }],
    });
    // Ids restart in each test database while Redis is shared: clear what an earlier run counted for this form id.
    const redis = new Redis(REDIS_URL);
    try {
      const stale = await redis.keys(`fw:rl:encryption:form:${sealed.id}:*`);
      if (stale.length > 0) await redis.del(...stale);
    } finally {
      redis.disconnect();
    }
    const submission = await ok(two, 'POST', `/forms/${sealed.id}/submissions`, {
      fields: [{ id: sealed.fields[0].id, value: 'secret' }],
    });
    // The throttle's window is a quarter hour on the clock: the guesses start with a minute of it left at least.
    await awayFromWindowEnd(PASSWORD_ATTEMPT_WINDOW_SECONDS * 1000, 60_000);
    const statuses: number[] = [];
    for (const base of [one, two, one, two, one, two]) {
      const res = await api(base, 'GET', `/submissions/${submission.id}`, undefined, {
        'x-formwork-encryption-password': `wrong password ${statuses.length}`,
      });
      statuses.push(res.status);
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 429, 429], 'four guesses in all, whichever process answers');
  });

  it(
    `stores ${TOTAL} submissions through the balancer once each, delivers every webhook and email and makes every document once, through a rolling restart and a crash`,
    { skip },
    async () => {
      const base = nginx!.url;
      const form = await ok(base, 'POST', '/forms', {
        name: 'Busy',
        fields: [
          { type: 'text', label: 'Note' },
          { type: 'file', label: 'File' },
        ],
      });
      const [note, file] = form.fields as { id: number }[];
      await ok(base, 'POST', `/form/${form.id}/webhook`, { url: `${receiver.url}/hook` });
      await ok(base, 'POST', `/forms/${form.id}/notifications`, {
        subject: 'New {{ submission_id }}',
        message: 'Submission {{ submission_id }}',
        recipients: ['team@example.com'],
      });
      // A document merge: one DOCX per submission, made by a docmerge.generate job, stored in the bucket.
      const integration = await ok(base, 'POST', `/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'scale.docx', content: makeDocx(['Document {submission_id}']).toString('base64') },
      });

      // Load: CONCURRENCY clients, each submission with an Idempotency-Key that its retries repeat.
      let next = 0;
      // Set when the test fails midway: the clients and the reads below stop, so that nothing
      // of this test goes on running (and keeps its process open) after it has failed.
      let stopped = false;
      let crashing = false;
      const ids = new Map<number, number>();
      const failures: string[] = [];
      const uploads: string[] = [];
      const submitOne = async (i: number) => {
        const key = `load-${i}-${randomBytes(4).toString('hex')}`;
        const fields: { id: number; value: unknown }[] = [{ id: note!.id, value: `note ${i}` }];
        if (i % 100 === 0) {
          // A file every hundred submissions: its bytes go to the bucket by a presigned URL.
          const issued = await api(base, 'POST', `/forms/${form.id}/fields/${file!.id}/upload-urls`, {
            filenames: [`f${i}.txt`],
          });
          if (issued.status === 200) {
            const [u] = issued.body.uploads;
            const put = await fetch(u.uploadUrl, { method: 'PUT', body: `file ${i}` });
            if (put.ok) {
              uploads.push(u.fileKey);
              fields.push({ id: file!.id, value: { subvalues: [{ subvalue: u.fileKey }] } });
            }
          } else if (!crashing) failures.push(`upload-urls ${i}: ${issued.status} ${issued.text.slice(0, 200)}`);
        }
        for (let attempt = 1; !stopped; attempt++) {
          let status: number | string;
          try {
            const res = await api(
              base,
              'POST',
              `/forms/${form.id}/submissions`,
              { fields },
              { 'idempotency-key': key },
            );
            if (res.status === 200 || res.status === 201) {
              ids.set(i, res.body.id);
              return;
            }
            status = `${res.status} ${res.text.slice(0, 200)}`;
            if (res.status === 409) await sleep(Math.min(1000, Number(res.headers.get('retry-after') ?? 1) * 1000));
          } catch (error) {
            status = String(error);
          }
          if (!crashing) failures.push(`submission ${i} attempt ${attempt}: ${status}`);
          assert.ok(attempt < 100, `submission ${i} never went through: ${status}`);
          await sleep(200);
        }
      };
      let rolledDone!: () => void;
      const rolled = new Promise<void>((resolve) => (rolledDone = resolve));
      // Reads through the balancer all along, besides the submissions: they fail the rolling restart too if one fails.
      let loading = true;
      const reads = (async () => {
        while (loading) {
          try {
            const res = await api(base, 'GET', '/forms?pageSize=1');
            if (res.status !== 200 && !crashing) failures.push(`GET /forms: ${res.status} ${res.text.slice(0, 200)}`);
          } catch (error) {
            if (!crashing) failures.push(`GET /forms: ${String(error)}`);
          }
          await sleep(20);
        }
      })();
      const load = Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < TOTAL && !stopped) {
            // Past three fifths the clients wait for the rolling restart to end, so that the crash below comes mid-load.
            if (next >= (TOTAL * 3) / 5) await rolled;
            if (next < TOTAL && !stopped) await submitOne(next++);
          }
        }),
      );
      try {
        let loadEnded = false;
        void load.then(
          () => (loadEnded = true),
          () => (loadEnded = true),
        );
        const reached = async (n: number) => {
          while (ids.size < n) {
            // The clients gave up (a submission that never went through): their error, not a wait without end.
            if (loadEnded) await load;
            assert.ok(!loadEnded, `the clients ended at ${ids.size} of ${n} submissions`);
            await sleep(50);
          }
        };

        // A rolling restart: each API process in turn stops (SIGTERM) and starts again on its port.
        await reached(TOTAL / 5);
        for (const i of [0, 1]) {
          const old = apis[i]!;
          old.child.kill('SIGTERM');
          assert.deepEqual(await old.exited, { code: 0, signal: null }, old.output());
          const fresh = await startApi(i);
          // The next one stops only once the balancer sends this one work again (nginx leaves a
          // process that refused a connection out for fail_timeout): as a rolling restart must.
          const served = /formwork_http_requests_total\{method="GET",route="\/api\/v2025\/forms",status="200"/;
          for (let wait = 0; !served.test(await (await fetch(`${fresh.url}/metrics`)).text()); wait++) {
            assert.ok(wait < 600, `the balancer sent API process ${i} no work for a minute after its restart`);
            await sleep(100);
          }
        }
        const afterRolling = ids.size;
        rolledDone();
        assert.deepEqual(failures, [], 'no request failed during the rolling restart');

        // A crash: a worker and an API process killed mid-run, then started again.
        await reached(Math.min(TOTAL - 2 * CONCURRENCY, afterRolling + TOTAL / 10));
        crashing = true;
        workers[0]!.child.kill('SIGKILL');
        apis[1]!.child.kill('SIGKILL');
        await Promise.all([workers[0]!.exited, apis[1]!.exited]);
        await Promise.all([startWorker(0), startApi(1)]);
        await sleep(1000);
        crashing = false;

        await load;
      } finally {
        stopped = true;
        loading = false;
        rolledDone();
        await Promise.allSettled([load, reads]);
      }
      assert.deepEqual(failures, [], 'no request failed outside the crash');
      assert.equal(ids.size, TOTAL);
      const submissionIds = new Set(ids.values());
      assert.equal(submissionIds.size, TOTAL, 'each key made one submission');

      // The outbox drains: every delivery, email and document done (a killed worker's jobs come back when their lease ends).
      let documents: {
        id: number;
        submission_id: number;
        integration_id: number;
        storage_key: string;
        size: number;
      }[] = [];
      const runOutcomes: Record<string, number> = {};
      let repeatedGenerations = 0;
      const db = openDatabase({ databaseUrl: processes.env.DATABASE_URL, dataDir: processes.dataDir });
      try {
        for (let i = 0; ; i++) {
          const open = await db.kysely
            .selectFrom('jobs')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('kind', 'in', ['webhooks.deliver', 'emails.send', 'docmerge.generate'])
            .where('state', 'in', ['queued', 'running'])
            .executeTakeFirstOrThrow();
          if (Number(open.n) === 0) break;
          assert.ok(i < 3000, `${open.n} jobs still open after five minutes`);
          await sleep(100);
        }
        const failed = await db.kysely
          .selectFrom('jobs')
          .select(['kind', 'last_error'])
          .where('state', '=', 'failed')
          .execute();
        assert.deepEqual(failed, []);
        const stored = await db.kysely
          .selectFrom('submissions')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('form_id', '=', form.id)
          .executeTakeFirstOrThrow();
        assert.equal(Number(stored.n), TOTAL, 'every submission stored once');

        // Documents: one generation job per submission, all done; one document per submission, none twice.
        const generation = await db.kysely
          .selectFrom('jobs')
          .select(['state', (eb) => eb.fn.countAll<number>().as('n')])
          .where('kind', '=', 'docmerge.generate')
          .groupBy('state')
          .execute();
        assert.deepEqual(
          generation.map((g) => ({ state: g.state, n: Number(g.n) })),
          [{ state: 'done', n: TOTAL }],
          'one generation job per submission, all done',
        );
        documents = await db.kysely
          .selectFrom('docmerge_documents')
          .select(['id', 'submission_id', 'integration_id', 'storage_key', 'size'])
          .where('form_id', '=', form.id)
          .orderBy('id')
          .execute();
        const perSubmission = new Map<number, number>();
        for (const d of documents) {
          assert.equal(d.integration_id, integration.id);
          perSubmission.set(d.submission_id, (perSubmission.get(d.submission_id) ?? 0) + 1);
        }
        assert.deepEqual(
          [...perSubmission].filter(([, n]) => n !== 1),
          [],
          'no submission has two documents',
        );
        assert.deepEqual(
          [...perSubmission.keys()].sort((a, b) => a - b),
          [...submissionIds].sort((a, b) => a - b),
          'every submission has its document',
        );
        assert.equal(documents.length, TOTAL, 'as many documents as submissions');
        // The run log: each document made by one run; a run repeated after the crash found it made.
        for (const r of await db.kysely
          .selectFrom('docmerge_runs')
          .select(['outcome', (eb) => eb.fn.countAll<number>().as('n')])
          .where('integration_id', '=', integration.id)
          .groupBy('outcome')
          .execute())
          runOutcomes[r.outcome] = Number(r.n);
        assert.equal(runOutcomes.made, TOTAL, `one run made each document: ${JSON.stringify(runOutcomes)}`);
        assert.equal(runOutcomes.skipped, undefined, `no run skipped: ${JSON.stringify(runOutcomes)}`);
        // Jobs claimed more than once: a killed worker's runs, taken again when their lease ended.
        const repeated = await db.kysely
          .selectFrom('jobs')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('kind', '=', 'docmerge.generate')
          .where('attempts', '>', 1)
          .executeTakeFirstOrThrow();
        repeatedGenerations = Number(repeated.n);
      } finally {
        await db.close();
      }

      // Webhooks: every submission's event arrived; a repeat has the same webhook-id.
      const hooks = new Map<number, Set<string>>();
      let hookCount = 0;
      for (const r of receiver.received) {
        if (r.path !== '/hook') continue;
        hookCount++;
        const body = JSON.parse(r.body.toString());
        hooks.set(body.submissionId, (hooks.get(body.submissionId) ?? new Set()).add(String(r.headers['webhook-id'])));
      }
      assert.deepEqual(
        [...hooks.keys()].sort((a, b) => a - b),
        [...submissionIds].sort((a, b) => a - b),
      );
      for (const [id, hookIds] of hooks) assert.equal(hookIds.size, 1, `submission ${id}: one webhook-id`);

      // Emails: one per submission; a repeat has the same Message-ID.
      const mails = new Map<number, Set<string>>();
      for (const m of smtp.messages) {
        const subject = /^Subject: New (\d+)\r?$/m.exec(m.raw);
        if (!subject) continue;
        const messageId = /^Message-ID: (.+?)\r?$/im.exec(m.raw)?.[1] ?? '';
        const id = Number(subject[1]);
        mails.set(id, (mails.get(id) ?? new Set()).add(messageId));
      }
      assert.deepEqual(
        [...mails.keys()].sort((a, b) => a - b),
        [...submissionIds].sort((a, b) => a - b),
      );
      for (const [id, messageIds] of mails) assert.equal(messageIds.size, 1, `submission ${id}: one Message-ID`);
      const mailCount = [...smtp.messages].filter((m) => /^Subject: New \d+/m.test(m.raw)).length;

      // Files: each uploaded file is in the bucket.
      const keys = s3.objectKeys().join('\n');
      assert.ok(uploads.length >= TOTAL / 100 - 2, `${uploads.length} uploads`);
      for (const fileKey of uploads) assert.ok(keys.includes(fileKey), `${fileKey} in the bucket`);

      // Documents: each one's object is in the bucket, and one of them reads back through the balancer.
      const objects = new Set(s3.objectKeys());
      for (const d of documents) assert.ok(objects.has(d.storage_key), `${d.storage_key} in the bucket`);
      const sample = documents[documents.length - 1]!;
      const downloaded = await fetch(`${base}/api/v2025/submissions/${sample.submission_id}/documents/${sample.id}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(downloaded.status, 200);
      const bytes = Buffer.from(await downloaded.arrayBuffer());
      assert.equal(bytes.length, sample.size);
      assert.equal(readDocx(bytes).text, `Document ${sample.submission_id}`);

      process.stdout.write(
        `# scale-out: ${TOTAL} submissions, ${hookCount} webhook requests (${hookCount - TOTAL} repeats), ` +
          `${mailCount} emails (${mailCount - TOTAL} repeats), ${uploads.length} files, ${documents.length} documents ` +
          `(generation runs: ${JSON.stringify(runOutcomes)}, ${repeatedGenerations} jobs run again)\n`,
      );
    },
  );
});
