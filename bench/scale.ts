/**
 * The scale section (`npm run bench -- scale`, alone): the scaled-out shape on PostgreSQL.
 *
 * Two `formwork serve --no-worker` and two `formwork worker` processes on one fresh PostgreSQL
 * database (fw_bench_scale_<random>, dropped after), Redis when it answers (REDIS_URL), a
 * webhook receiver and an SMTP sink in this process, and two nginx instances run from
 * deploy/nginx.conf: one that balances to the first API process only, one to both.
 *
 * 1. Throughput: POST /forms/{id}/submissions of the 10-field form (a webhook and a
 *    notification email on it, so every create enqueues two jobs) through each balancer,
 *    BENCH_SCALE_CONNECTIONS connections, warm-up then BENCH_DURATION s measured: rate and
 *    p99; one process, then two, then one again (two is compared with the mean of the ones).
 *    Target: two processes at least 1.6 times one.
 * 2. pgbench in the same run at the same concurrency: one 10-key jsonb row per transaction,
 *    the database's own ceiling for a one-row write; each POST rate as a share of it.
 * 3. Outbox lag: for each submission of the measured two-process run, the time from its 200
 *    to the first delivery attempt of its webhook at the receiver; p50, p99, max. Target:
 *    p99 < 1 s. Every event must arrive.
 * 4. One worker's pace: both workers stopped, BENCH_SCALE_DRAIN_FILL s (5) of submissions
 *    queued through the balancer, then one fresh `formwork worker` drains them alone, the API
 *    idle: jobs a second and the worker's CPU time per job, from its first finished job.
 *
 * Environment: BENCH_DURATION (10), BENCH_WARMUP (3), BENCH_SCALE_CONNECTIONS (32), BENCH_SCALE_DRAIN_FILL (5),
 * BENCH_PG_URL (postgres://postgres@127.0.0.1:5432/test), BENCH_PG_POOL (pool per API process, 10),
 * BENCH_CPU_PROF=1 (the draining worker of 4 runs with --cpu-prof; where its time went is printed),
 * SMTP_CONNECTIONS (passed on to the processes when set).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import pg from 'pg';
import { redisAnswers } from '../test/support/redis.js';
import { call, MailSink, Receiver } from './events.js';
import { JSONB_TABLE, jsonbScript, runPgbench } from './pgbench.js';
import { monotonicMicros, summarizeProfile, type Window } from './profile.js';
import { API, createBenchAccount } from './seed.js';
import { clientOf, fieldIdsOf, submissionBody, submissionForm, type FieldIds } from './submission-data.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
const CONNECTIONS = Number(process.env.BENCH_SCALE_CONNECTIONS ?? 32);
const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const POOL = process.env.BENCH_PG_POOL ?? '10';
/** Seconds of submissions queued for the worker drain (4), the workers stopped. */
const DRAIN_FILL = Number(process.env.BENCH_SCALE_DRAIN_FILL ?? 5);
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const CPU_PROF = process.env.BENCH_CPU_PROF === '1';
const NGINX = '/usr/sbin/nginx';

const log = (m: string) => process.stderr.write(`[bench scale] ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function freePort(): Promise<number> {
  const server = createNetServer().listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

interface Proc {
  name: string;
  child: ChildProcess;
  output: () => string;
}

function start(name: string, command: string, args: string[], env: Record<string, string>): Proc {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (d: Buffer) => (output = (output + d.toString()).slice(-20_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { name, child, output: () => output };
}

async function waitFor(url: string, proc: Proc): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (proc.child.exitCode !== null) throw new Error(`${proc.name} exited: ${proc.output()}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not yet
    }
    await sleep(100);
  }
  throw new Error(`${proc.name} did not answer at ${url}: ${proc.output()}`);
}

const percentile = (sorted: number[], q: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

/** Busy and total jiffies of the whole machine (/proc/stat), and CPU jiffies of each process (/proc/<pid>/stat). */
function cpuSample(pids: Record<string, number | undefined>): {
  busy: number;
  total: number;
  procs: Record<string, number>;
} {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = fields[3]! + (fields[4] ?? 0);
  const total = fields.reduce((a, b) => a + b, 0);
  const procs: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      procs[name] = Number(rest[11]) + Number(rest[12]);
    } catch {
      procs[name] = 0;
    }
  }
  return { busy: total - idle, total, procs };
}

/** The machine's busy share over a run, and each process's CPU in cores. */
function cpuUse(a: ReturnType<typeof cpuSample>, b: ReturnType<typeof cpuSample>, seconds: number, hz = 100): string {
  const machine = (b.busy - a.busy) / (b.total - a.total);
  const parts = Object.keys(b.procs).map((k) => `${k} ${((b.procs[k]! - a.procs[k]!) / hz / seconds).toFixed(2)}`);
  return `machine ${(100 * machine).toFixed(0)}% busy of ${cpus().length} cores; cores used: ${parts.join(', ')}`;
}

interface PostRun {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  failed: number;
  answered: Map<number, number>;
  cpu?: string;
  /** Deliveries and emails still queued or running when the run's load stopped. */
  left?: number;
}

async function postLoad(
  url: string,
  token: string,
  formId: number,
  ids: FieldIds,
  seconds: number,
  next: () => number,
  counter: { ok: number },
): Promise<PostRun> {
  const answered = new Map<number, number>();
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    timeout: 30,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    requests: [
      {
        method: 'POST',
        path: `${API}/forms/${formId}/submissions`,
        setupRequest: (request) => {
          const n = next();
          return {
            ...request,
            body: submissionBody(n, ids),
            headers: { ...request.headers, 'user-agent': clientOf(n).userAgent },
          };
        },
        onResponse: (status, body) => {
          if (status !== 200) return;
          counter.ok++;
          const id = /^\{"id":(\d+)/.exec(body);
          if (id) answered.set(Number(id[1]), performance.now());
        },
      },
    ],
  });
  return {
    rps: result['2xx'] / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    ok: result['2xx'],
    failed: result.errors + result.non2xx,
    answered,
  };
}

export async function runScaleBench(): Promise<number> {
  const tmp = mkdtempSync(join(tmpdir(), 'formwork-bench-scale-'));
  const dbName = `fw_bench_scale_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const dbUrl = new URL(PG_URL);
  dbUrl.pathname = `/${dbName}`;
  const databaseUrl = dbUrl.toString();
  const procs: Proc[] = [];
  const receiver = new Receiver();
  const sink = new MailSink();
  const problems: string[] = [];
  try {
    const hookUrl = await receiver.listen();
    const smtpUrl = await sink.listen();
    const redis = await redisAnswers(REDIS_URL);
    const token = await createBenchAccount(join(tmp, 'data'), databaseUrl);
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      DATA_DIR: join(tmp, 'data'),
      DATABASE_URL: databaseUrl,
      DATABASE_POOL_SIZE: POOL,
      ...(redis ? { REDIS_URL } : {}),
      SECRET_KEY: randomBytes(32).toString('hex'),
      SMTP_URL: smtpUrl,
      // Passed on when set, to compare pool sizes (docs/emails.md).
      ...(process.env.SMTP_CONNECTIONS ? { SMTP_CONNECTIONS: process.env.SMTP_CONNECTIONS } : {}),
      WEBHOOK_ALLOW_PRIVATE: 'true',
      RATE_LIMIT_PER_MINUTE: '0',
      RATE_LIMIT_PER_DAY: '0',
      TRUST_PROXY: '1',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
    };
    const tsx = [process.execPath, '--import', 'tsx', 'src/cli.ts'];
    const apiPorts = [await freePort(), await freePort()];
    for (const [i, port] of apiPorts.entries()) {
      const p = start(`api${i + 1}`, tsx[0]!, [...tsx.slice(1), 'serve', '--no-worker'], {
        ...env,
        PORT: String(port),
        PUBLIC_URL: `http://127.0.0.1:${port}`,
      });
      procs.push(p);
      await waitFor(`http://127.0.0.1:${port}/readyz`, p);
    }
    const startWorker = async (name: string, node: string[] = []) => {
      const port = await freePort();
      const p = start(name, tsx[0]!, [...node, ...tsx.slice(1), 'worker'], {
        ...env,
        WORKER_METRICS_PORT: String(port),
      });
      procs.push(p);
      await waitFor(`http://127.0.0.1:${port}/metrics`, p);
      return p;
    };
    const workers = [await startWorker('worker1'), await startWorker('worker2')];
    // Two balancers from deploy/nginx.conf: the first API process alone, and both.
    const shipped = readFileSync('deploy/nginx.conf', 'utf8');
    const balancers: { name: string; url: string }[] = [];
    for (const both of [false, true]) {
      const prefix = join(tmp, both ? 'nginx-two' : 'nginx-one');
      mkdirSync(join(prefix, 'logs'), { recursive: true });
      mkdirSync(join(prefix, 'tmp'), { recursive: true });
      chmodSync(tmp, 0o755);
      chmodSync(prefix, 0o777);
      chmodSync(join(prefix, 'tmp'), 0o777);
      const port = await freePort();
      const conf = shipped
        .replace('127.0.0.1:8081', `127.0.0.1:${apiPorts[0]}`)
        .replace(
          /\n\s*server 127\.0\.0\.1:8082[^\n]*/,
          both ? `\n    server 127.0.0.1:${apiPorts[1]} max_fails=1 fail_timeout=2s;` : '',
        )
        .replace('listen 127.0.0.1:8080;', `listen 127.0.0.1:${port};`);
      writeFileSync(join(prefix, 'nginx.conf'), conf);
      const p = start(
        `nginx-${both ? 'two' : 'one'}`,
        NGINX,
        ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;'],
        env,
      );
      procs.push(p);
      const url = `http://127.0.0.1:${port}`;
      await waitFor(`${url}/readyz`, p);
      balancers.push({ name: both ? 'two API processes' : 'one API process', url });
    }

    const service = { url: balancers[1]!.url, token };
    const form = (await call(service, 'POST', '/forms', submissionForm('Scale'))) as {
      id: number;
      fields: { id: number; label: string }[];
    };
    const ids = fieldIdsOf(form.fields);
    await call(service, 'POST', `/form/${form.id}/webhook`, { url: hookUrl });
    await call(service, 'POST', `/forms/${form.id}/notifications`, {
      subject: 'New',
      message: 'New one',
      recipients: ['team@example.com'],
    });
    let n = 0;
    const next = () => n++;
    const counter = { ok: 0 };

    const runs: { name: string; run: PostRun }[] = [];
    // One, two, one again: the two runs of one process on either side cancel what the order alone does (a database
    // that grows run by run, a machine that gets busier or quieter).
    for (const balancer of [balancers[0]!, balancers[1]!, balancers[0]!]) {
      if (WARMUP > 0) {
        log(`${balancer.name}: warm-up ${WARMUP} s`);
        await postLoad(balancer.url, token, form.id, ids, WARMUP, next, counter);
      }
      // Each measured run starts on a drained outbox, so that one run's deliveries do not load the next.
      await drain(databaseUrl, 300_000);
      log(`${balancer.name}: measuring ${DURATION} s with ${CONNECTIONS} connections`);
      const pids = Object.fromEntries(
        procs.filter((p) => !p.name.startsWith('nginx')).map((p) => [p.name, p.child.pid]),
      );
      const before = cpuSample(pids);
      const run = await postLoad(balancer.url, token, form.id, ids, DURATION, next, counter);
      run.cpu = cpuUse(before, cpuSample(pids), DURATION);
      run.left = await withClient(databaseUrl, undelivered);
      if (run.failed > 0) problems.push(`${balancer.name}: ${run.failed} failed requests`);
      runs.push({ name: balancer.name, run });
    }
    // Outbox lag of the measured two-process run.
    const last = runs[1]!.run;
    await drain(databaseUrl, 300_000);
    const lags: number[] = [];
    let missing = 0;
    for (const [id, at] of last.answered) {
      const arrived = receiver.firstArrival.get(id);
      if (arrived === undefined) missing++;
      else lags.push(Math.max(0, arrived - at));
    }
    lags.sort((a, b) => a - b);
    if (missing > 0) problems.push(`${missing} submissions of the measured run had no webhook delivery`);

    log(`pgbench: ${CONNECTIONS} clients, ${DURATION} s, one 10-key jsonb row per transaction`);
    const bench = new pg.Client({ connectionString: databaseUrl });
    await bench.connect();
    await bench.query(JSONB_TABLE);
    await bench.end();
    const pgb = await runPgbench(databaseUrl, join(tmp, 'jsonb.sql'), jsonbScript(), CONNECTIONS, DURATION, log);

    // 4. One worker alone on a backlog: the workers stopped, submissions queued for DRAIN_FILL s,
    // then one fresh worker; its rate and CPU from its first finished job until none is left.
    log(`worker drain: the workers stopped, ${DRAIN_FILL} s of submissions queued`);
    for (const w of workers) {
      w.child.kill('SIGTERM');
      if (w.child.exitCode === null) await new Promise((r) => w.child.once('exit', r));
    }
    await postLoad(balancers[1]!.url, token, form.id, ids, DRAIN_FILL, next, counter);
    const profDir = join(tmp, 'drain-profile');
    const drainer = await startWorker('worker3', CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []);
    const drained = await drainOne(databaseUrl, drainer.child.pid!, 300_000);
    if (!drained) problems.push('the worker did not drain its backlog in time');
    let drainProfile = '';
    if (CPU_PROF) {
      // The profile is written as the worker exits; its window is the drain's.
      drainer.child.kill('SIGTERM');
      if (drainer.child.exitCode === null) await new Promise((r) => drainer.child.once('exit', r));
      const [file] = readdirSync(profDir);
      drainProfile = file
        ? `\n[worker3, draining] ${summarizeProfile(join(profDir, file), process.cwd(), drained?.window)}`
        : '\n[worker3] wrote no profile';
    }

    const [one, two, oneAgain] = runs.map((r) => r.run) as [PostRun, PostRun, PostRun];
    const ratio = two.rps / ((one.rps + oneAgain.rps) / 2);
    const row = (name: string, r: PostRun) =>
      `| ${name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${((100 * r.rps) / pgb.tps).toFixed(1)}% |`;
    const lines = [
      `Formwork scale bench, Node ${process.version}, ${cpus().length} cores, PostgreSQL, ${redis ? 'Redis' : 'no Redis'}, nginx; ` +
        `${WARMUP} s warm-up + ${DURATION} s measured, ${CONNECTIONS} connections, pool ${POOL} per API process, two workers`,
      '',
      '| POST /forms/{id}/submissions (webhook + email) | req/s | p50 ms | p99 ms | of pgbench |',
      '|---|---|---|---|---|',
      row('one API process (nginx)', one),
      row('two API processes (nginx)', two),
      row('one API process again (nginx)', oneAgain),
      `| pgbench, one 10-key jsonb row per transaction | ${pgb.tps.toFixed(0)} | | ${pgb.latencyMs.toFixed(1)} (mean) | 100% |`,
      '',
      `two / mean of the two one-process runs: ${ratio.toFixed(2)}x (target >= 1.6x: ${ratio >= 1.6 ? 'met' : 'MISSED'})`,
      `outbox lag, 200 -> first webhook attempt, two-process run (${lags.length} events): p50 ${percentile(lags, 0.5).toFixed(0)} ms, ` +
        `p99 ${percentile(lags, 0.99).toFixed(0)} ms, max ${percentile(lags, 1).toFixed(0)} ms (target p99 < 1000 ms: ${percentile(lags, 0.99) < 1000 ? 'met' : 'MISSED'})`,
      ...runs.map(
        (r, i) =>
          `CPU during run ${i + 1} (${r.name}): ${r.run.cpu}; deliveries and emails not yet done at its end: ${r.run.left}`,
      ),
      drained
        ? `one worker alone on a backlog of ${drained.jobs} jobs (a webhook delivery and an email per submission): ` +
          `${drained.perSecond.toFixed(0)} jobs/s, ${drained.cpuUsPerJob.toFixed(0)} µs of its CPU per job, ${drained.cores.toFixed(2)} cores`
        : 'one worker alone on a backlog: did not drain',
      `deliveries ${receiver.deliveries}, emails ${sink.messages}, submissions answered 200: ${counter.ok}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n${drainProfile}`);
    if (problems.length > 0) process.stdout.write(`\nProblems:\n${problems.map((p) => `- ${p}`).join('\n')}\n`);
    return problems.length > 0 ? 1 : 0;
  } finally {
    for (const p of procs.reverse()) {
      p.child.kill('SIGTERM');
      if (p.child.exitCode === null) await new Promise((r) => p.child.once('exit', r));
    }
    await receiver.close();
    await sink.close();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** Runs use on a connection of its own to databaseUrl, closed after. */
async function withClient<T>(databaseUrl: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** Deliveries and emails queued or running. */
async function undelivered(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ n: string }>(
    "SELECT count(*) AS n FROM jobs WHERE state IN ('queued', 'running') AND kind IN ('webhooks.deliver', 'emails.send')",
  );
  return Number(rows[0]!.n);
}

/**
 * The backlog of deliveries and emails that one worker process (pid) drains: how many, and
 * from its first finished job (the worker's start and first claim left out) until none is
 * left, the rate and the worker's CPU time per job.
 */
function drainOne(
  databaseUrl: string,
  pid: number,
  limitMs: number,
): Promise<{ jobs: number; perSecond: number; cpuUsPerJob: number; cores: number; window: Window } | undefined> {
  return withClient(databaseUrl, async (client) => {
    const left = () => undelivered(client);
    const deadline = performance.now() + limitMs;
    const jobs = await left();
    let first: { at: number; micros: number; cpu: number; left: number } | undefined;
    while (performance.now() < deadline) {
      const now = await left();
      if (!first && now < jobs)
        first = { at: performance.now(), micros: monotonicMicros(), cpu: cpuSample({ pid }).procs.pid!, left: now };
      if (first && now === 0) {
        const seconds = (performance.now() - first.at) / 1000;
        const cpuMs = (cpuSample({ pid }).procs.pid! - first.cpu) * 10;
        return {
          jobs,
          perSecond: first.left / seconds,
          cpuUsPerJob: (cpuMs * 1000) / first.left,
          cores: cpuMs / 1000 / seconds,
          window: { label: 'the drain', start: first.micros, end: monotonicMicros() },
        };
      }
      await sleep(20);
    }
    return undefined;
  });
}

/** Waits until the outbox has no queued or running delivery or email left (every job of the runs so far ran). */
function drain(databaseUrl: string, limitMs: number): Promise<void> {
  return withClient(databaseUrl, async (client) => {
    const deadline = performance.now() + limitMs;
    while (performance.now() < deadline) {
      if ((await undelivered(client)) === 0) return;
      await sleep(200);
    }
    log('the outbox did not drain in time');
  });
}
