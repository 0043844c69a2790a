/**
 * npm run bench: throughput and latency of the service's hot routes, in one table.
 *
 * 1. Forms: the real service (node --import tsx src/cli.ts serve) on a fresh SQLite
 *    database seeded with 1,000 forms of 20 fields, next to a plain Fastify server with one
 *    constant route (the machine's ceiling, measured in the same run).
 * 2. Submissions written: POST /forms/{id}/submissions of a 10-field form, every request a
 *    different body (bench/submission-data.ts), at BENCH_POST_CONNECTIONS connections, on
 *    that SQLite service and on a second service child on PostgreSQL (a database
 *    fw_bench_<random> made for the run and dropped after it).
 * 3. Submissions read: one form filled with BENCH_SEED_COUNT submissions straight into the
 *    SQLite file (bench/seed-submissions.ts, service stopped), then the list, search and
 *    count routes on a fresh service child over that file.
 *
 * Each scenario is loaded with autocannon (warm-up, then a measured run); latencies are
 * recorded per response. Responses are checked before and during the load (2xx, the rows
 * and totals the seeded data must give, bytes per response); any problem fails the run.
 *
 * Environment:
 *   BENCH_DURATION          seconds of each measured run (default 10)
 *   BENCH_WARMUP            seconds of warm-up before each measured run (default 3; 0 skips it)
 *   BENCH_CONNECTIONS       concurrent connections of the read scenarios (default 10)
 *   BENCH_POST_CONNECTIONS  concurrent connections of the submission POSTs (default 50)
 *   BENCH_SEED_COUNT        submissions seeded into the read form (default 1000000)
 *   BENCH_EXPORT_RUNS       exports of the seeded form, each on a fresh child (default 1; the worst is judged)
 *   BENCH_PG_URL            PostgreSQL to make the bench database in (default
 *                           postgres://postgres@127.0.0.1:5432/test; "off" skips PostgreSQL)
 *   BENCH_PG_POOL           DATABASE_POOL_SIZE of the measured PostgreSQL service (default 25)
 *   BENCH_PG_LOADER         autocannon: load the PostgreSQL POSTs with autocannon even where wrk is
 *                           installed (bench/wrk.ts)
 *   BENCH_CPU_PROF=1        run the services with --cpu-prof and print where their time went
 *                           during each measured run
 *   BENCH_KEEP_PROFILES     a directory to copy the .cpuprofile files into (of the sections run),
 *                           to open them in a profiler afterwards
 *   BENCH_FILE_MB           size of the file of the file section (default 20)
 *   BENCH_LARGE_FILE_MB     the larger file that shows memory does not follow file size (default 100)
 *
 * 4. Files (bench/files.ts): upload and download throughput of one file on each storage
 *    driver, with each service's peak RSS. `npm run bench -- files` runs this section alone.
 * 5. Events (bench/events.ts): submission create with a webhook and a notification email
 *    configured against nothing configured, and the delay from a submission's 200 to its
 *    webhook delivery at BENCH_EVENT_RATE submissions/s (default 100). `npm run bench -- events`
 *    runs this section alone.
 * 4b. PostgreSQL (bench/pgbench.ts; `npm run bench -- pg` runs it alone): the POST on
 *    PostgreSQL, with nothing configured and with a webhook and a notification email, next to
 *    pgbench at the same concurrency in the same run: (a) one 10-key jsonb row per transaction,
 *    (b) the statements of one create, captured from the service (replayed prepared when the
 *    service prepared them), with the machine's CPU per request by whom (bench/cpu-split.ts).
 *    The POSTs are loaded by wrk (C, as pgbench is) when it is installed, else by autocannon.
 *    BENCH_PG_KEEP=1 keeps the database and writes the pgbench scripts to /tmp, to run
 *    pgbench on them by hand.
 * 7. Export (`npm run bench -- export` runs it alone, after seeding the form): the CSV export of
 *    the seeded form on a fresh service child, with rows per second and the service's peak RSS
 *    against its RSS once started (idle). BENCH_EXPORT_RUNS (default 1) runs it that many times,
 *    each on a fresh child, and judges the run that grew the most: what V8 does with a run's
 *    garbage can differ from one process to the next (an export once grew 137 MiB in one run of
 *    four), and one run alone can miss that.
 * 8. Scale (bench/scale.ts; `npm run bench -- scale`, alone): the POST through nginx to one API
 *    process and to two (two worker processes, PostgreSQL, Redis), next to pgbench, and the
 *    outbox lag from a submission's 200 to its webhook's first attempt.
 * `npm run bench -- forms` runs section 1 alone (the form read, the forms list and the constant
 * routes of their sizes). `npm run bench -- post` runs the constant route and the SQLite POST of
 * section 2 alone.
 * 8. Document merge (bench/docmerge.ts; `npm run bench -- docmerge`, alone): documents generated
 *    per second by one `formwork worker` for a one-page DOCX and a one-page PDF, with the
 *    worker's peak RSS, over BENCH_DOCMERGE_COUNT queued submissions (default 500).
 * 9. Reindex (`npm run bench -- reindex`, alone): a field deleted from a form of
 *    BENCH_REINDEX_COUNT seeded submissions (default 200,000) on SQLite: rows a second of the
 *    reindex that follows, and the form read before and during it.
 * 6. Public (`npm run bench -- public`, alone): the hosted page of the 10-field form
 *    (GET /f/{viewKey}) and its plain HTML post (urlencoded, a new page token per request:
 *    each one a real submission), next to the constant route of the same run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import pg from 'pg';
import { easternDay, lowerBound, upperBound } from '../src/modules/submissions/eastern-time.js';
import { addEvents, eventReport, MailSink, Receiver, runEventBench, type EventResult } from './events.js';
import {
  isBackground,
  JSONB_TABLE,
  jsonbScript,
  jobsPerReplay,
  pgbenchScript,
  REPLAYED_JOBS_RUN_AT,
  protocolOf,
  readCaptured,
  runPgbench,
  SEQUENCE,
  type Captured,
  type PgbenchResult,
} from './pgbench.js';
import { fileTable, runFileBench, type FileRow } from './files.js';
import { docmergeTable, runDocmergeBench } from './docmerge.js';
import { plainPost } from './public.js';
import { runWrk, wrkAvailable, type WrkLoad } from './wrk.js';
import { runScaleBench } from './scale.js';
import { monotonicMicros, summarizeProfile, type Window } from './profile.js';
import { cpuCells, cpuPerUnit, cpuSnapshot, processCpuMicros, type CpuPerUnit } from './cpu-split.js';
import { compareWithService, type SeedResult } from './seed-submissions.js';
import { API, createBenchAccount, seedForms } from './seed.js';
import {
  clientOf,
  fieldIdsOf,
  submissionBody,
  submissionForm,
  submissionInput,
  SUBMISSION_FIELD_COUNT,
  type FieldIds,
  postSubmission,
} from './submission-data.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const HOST = '127.0.0.1';
const FORMS = 1000;
const FIELDS_PER_FORM = 20;

function intEnv(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min)
    throw new Error(`${name} must be a whole number >= ${min}, got "${raw}"`);
  return value;
}

const DURATION = intEnv('BENCH_DURATION', 10, 1);
const WARMUP = intEnv('BENCH_WARMUP', 3, 0);
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 10, 1);
const POST_CONNECTIONS = intEnv('BENCH_POST_CONNECTIONS', 50, 1);
const SEED_COUNT = intEnv('BENCH_SEED_COUNT', 1_000_000, 1000);
const EXPORT_RUNS = intEnv('BENCH_EXPORT_RUNS', 1, 1);
const PG_ADMIN_URL =
  process.env.BENCH_PG_URL === undefined || process.env.BENCH_PG_URL === ''
    ? 'postgres://postgres@127.0.0.1:5432/test'
    : process.env.BENCH_PG_URL;
const PG_ENABLED = PG_ADMIN_URL !== 'off';
/** DATABASE_POOL_SIZE of the measured PostgreSQL service. */
const PG_POOL = intEnv('BENCH_PG_POOL', 25, 1);
const CPU_PROF = process.env.BENCH_CPU_PROF === '1';
/**
 * What loads the PostgreSQL POSTs, whose rates are shares of pgbench's (bench/wrk.ts): wrk when
 * it is installed, else autocannon; BENCH_PG_LOADER=autocannon chooses autocannon anyway.
 */
const PG_LOADER: 'wrk' | 'autocannon' =
  process.env.BENCH_PG_LOADER === 'autocannon' || !wrkAvailable() ? 'autocannon' : 'wrk';
const FILE_MB = intEnv('BENCH_FILE_MB', 20, 1);
const LARGE_FILE_MB = intEnv('BENCH_LARGE_FILE_MB', 100, 1);
const EVENT_RATE = intEnv('BENCH_EVENT_RATE', 100, 1);
const ONLY_FILES = process.argv.slice(2).includes('files');
const ONLY_EVENTS = process.argv.slice(2).includes('events');
const ONLY_PUBLIC = process.argv.slice(2).includes('public');
const ONLY_FORMS = process.argv.slice(2).includes('forms');
const ONLY_EXPORT = process.argv.slice(2).includes('export');
const ONLY_POST = process.argv.slice(2).includes('post');
const ONLY_PG = process.argv.slice(2).includes('pg');
const ONLY_DOCMERGE = process.argv.slice(2).includes('docmerge');
const ONLY_REINDEX = process.argv.slice(2).includes('reindex');
const REINDEX_COUNT = intEnv('BENCH_REINDEX_COUNT', 200_000, 1000);
const DOCMERGE_COUNT = intEnv('BENCH_DOCMERGE_COUNT', 500, 10);
const ONLY_SCALE = process.argv.slice(2).includes('scale');
/** The page target of the hosted-forms issue: the page at least this share of the constant route. */
const PAGE_TARGET_SHARE = 50;

/** Issue 14's targets: POST at this share (%) of the ceiling, with this p99 in a run whose constant route's p99 is under 2 ms. */
const SQLITE_POST_TARGET = { share: 10, p99: 25 };
const QUIET_CEILING_P99 = 2;
const READ_TARGET_P95 = 50;

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

// ---------------------------------------------------------------------------------------
// Child processes

interface Child {
  name: string;
  proc: ChildProcess;
  url: string;
  /** Where its --cpu-prof output goes, when profiling. */
  profDir?: string;
  /** VmHWM read just before it was stopped. */
  peak?: string;
}

const children: Child[] = [];
/** Temporary directories to remove however the run ends. */
const temporary: string[] = [];
/** PostgreSQL databases made for the run, to drop however it ends. */
const pgDatabases: string[] = [];

function killAll(): void {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
  removeTemporary();
}

function removeTemporary(): void {
  for (const dir of temporary.splice(0)) rmSync(dir, { recursive: true, force: true });
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, HOST);
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  server.close();
  await once(server, 'close');
  if (port === 0) throw new Error('could not find a free port');
  return port;
}

/** Forwards a child's output to our stderr, line by line, under its name. */
function forward(name: string, stream: NodeJS.ReadableStream | null, onLine?: (line: string) => void): void {
  if (!stream) return;
  let buffered = '';
  stream.setEncoding('utf8');
  const emit = (line: string) => (onLine ? onLine(line) : process.stderr.write(`[${name}] ${line}\n`));
  stream.on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) emit(line);
  });
  stream.on('end', () => {
    if (buffered !== '') emit(buffered);
  });
}

function startChild(name: string, args: string[], env: Record<string, string>, port: number, profDir?: string): Child {
  const proc = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), HOST },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  forward(name, proc.stdout);
  forward(name, proc.stderr);
  const child: Child = { name, proc, url: `http://${HOST}:${port}`, profDir };
  children.push(child);
  return child;
}

/** The service on DATA_DIR's SQLite file, or on databaseUrl. */
async function startService(
  name: string,
  dataDir: string,
  databaseUrl: string,
  profRoot: string,
  env: Record<string, string> = {},
  extra: { node?: string[]; serve?: string[] } = {},
): Promise<Child> {
  let profDir: string | undefined;
  if (CPU_PROF) {
    profDir = join(profRoot, name.replace(/[^a-z0-9]+/gi, '-'));
    mkdirSync(profDir, { recursive: true });
  }
  const service = startChild(
    name,
    [
      ...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []),
      '--import',
      'tsx',
      ...(extra.node ?? []),
      'src/cli.ts',
      'serve',
      ...(extra.serve ?? []),
    ],
    // Quotas high enough never to refuse: the benchmark measures their cost, not their effect.
    {
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      DATABASE_URL: databaseUrl,
      PUBLIC_URL: '',
      RATE_LIMIT_PER_MINUTE: '1000000000',
      RATE_LIMIT_PER_DAY: '1000000000',
      ...env,
    },
    await freePort(),
    profDir,
  );
  await waitReady(service, '/healthz');
  return service;
}

/** Polls `path` until it answers 200; fails if the child exits or `timeoutMs` passes. */
async function waitReady(child: Child, path: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
      throw new Error(
        `${child.name} exited before it was ready (code ${child.proc.exitCode}, signal ${child.proc.signalCode})`,
      );
    }
    try {
      const res = await fetch(`${child.url}${path}`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${child.name} did not answer ${path} within ${timeoutMs} ms`);
}

async function stopChild(child: Child, graceMs: number): Promise<void> {
  const { proc } = child;
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  child.peak ??= peakRss(proc.pid);
  const exited = once(proc, 'exit');
  proc.kill('SIGTERM');
  const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), graceMs).unref());
  if ((await Promise.race([exited, timer])) === 'timeout') {
    log(`${child.name} did not stop within ${graceMs} ms; killing it`);
    proc.kill('SIGKILL');
    await exited;
  }
}

const stopGrace = () => (CPU_PROF ? 60_000 : 5_000);

/** Peak resident set size of a live process, from /proc (Linux only). */
function peakRss(pid: number | undefined): string {
  if (pid === undefined) return 'unknown';
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmHWM:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kb ? `${(Number(kb) / 1024).toFixed(1)} MiB` : 'unknown';
  } catch {
    return 'unknown (no /proc)';
  }
}

/** Runs bench/seed-submissions.ts as a child process; returns its result line. */
async function runSeeder(dbFile: string, formId: number, count: number): Promise<SeedResult> {
  const proc = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'bench/seed-submissions.ts',
      '--db',
      dbFile,
      '--form',
      String(formId),
      '--count',
      String(count),
    ],
    {
      cwd: ROOT,
      env: process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const child: Child = { name: 'seed', proc, url: '' };
  children.push(child);
  let last = '';
  forward('seed', proc.stdout, (line) => {
    if (line.trim() !== '') last = line;
  });
  forward('seed', proc.stderr, (line) => process.stderr.write(`${line}\n`)); // its lines carry their own [seed]
  const [code] = (await once(proc, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`bench/seed-submissions.ts exited with code ${code}`);
  return JSON.parse(last) as SeedResult;
}

// ---------------------------------------------------------------------------------------
// PostgreSQL

function pgUrlFor(database: string): string {
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

const pgAdmin = (statement: string) => pgSql(PG_ADMIN_URL, statement);

async function createPgDatabase(): Promise<string> {
  const name = `fw_bench_${randomBytes(6).toString('hex')}`;
  await pgAdmin(`CREATE DATABASE ${name}`);
  pgDatabases.push(name);
  return name;
}

async function dropPgDatabases(): Promise<void> {
  // For a look at the data afterwards (and pgbench by hand on it).
  if (process.env.BENCH_PG_KEEP === '1') {
    log(`BENCH_PG_KEEP=1: kept ${pgDatabases.join(', ')}`);
    return;
  }
  while (pgDatabases.length > 0) {
    const name = pgDatabases.pop()!;
    try {
      await pgAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      log(`dropped PostgreSQL database ${name}`);
    } catch (error) {
      log(`could not drop PostgreSQL database ${name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Load

interface Scenario {
  name: string;
  url: string;
  connections?: number;
  headers?: Record<string, string>;
  requests: autocannon.Request[];
  /** Loaded by wrk instead (bench/wrk.ts): what it sends, in the place of requests. */
  wrk?: Pick<WrkLoad, 'method' | 'path' | 'bodies'>;
  /** The child it loads: for its CPU profile, and the CPU time per request in the table. */
  child?: Child;
  /** Fewer bytes per response than this (headers included) means empty answers. */
  minBytes?: number;
  /** p95 target in ms, or for POSTs a share (%) of the ceiling and a p99 target. */
  target?: { p95: number } | { share: number; p99: number };
  /** Checks once the load is over; returns problems. */
  after?: (loaded: autocannon.Result[]) => Promise<string[]>;
}

interface Latency {
  p50: number;
  p95: number;
  p99: number;
}

interface Measured {
  scenario: Scenario;
  result: autocannon.Result;
  latency: Latency;
  window: Window;
  problems: string[];
  /** 2xx answers of the warm-up and measured runs together. */
  okTotal: number;
  /** The machine's CPU per answer of the measured run, µs, by whom (bench/cpu-split.ts): service is the child's, every thread. */
  cpu: CpuPerUnit;
}

function percentiles(samples: number[]): Latency {
  const sorted = Float64Array.from(samples).sort();
  const at = (q: number) =>
    sorted.length === 0
      ? Number.NaN
      : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99) };
}

/** Where wrk's scripts go (bench/wrk.ts), made on first use. */
let wrkDir: string | undefined;

async function load(
  scenario: Scenario,
  seconds: number,
): Promise<{ result: autocannon.Result; samples?: number[]; latency?: Latency }> {
  if (scenario.wrk) {
    if (wrkDir === undefined) temporary.push((wrkDir = mkdtempSync(join(tmpdir(), 'formwork-bench-wrk-'))));
    const dir = wrkDir;
    const connections = scenario.connections ?? CONNECTIONS;
    const headers = scenario.headers ?? {};
    return runWrk({ ...scenario.wrk, url: scenario.url, headers, connections, seconds, dir });
  }
  const samples: number[] = [];
  const instance = autocannon({
    url: scenario.url,
    connections: scenario.connections ?? CONNECTIONS,
    duration: seconds,
    timeout: 10,
    headers: scenario.headers ?? {},
    requests: scenario.requests,
  });
  // autocannon's own histogram keeps whole milliseconds and has no p95: record every 2xx response time.
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status >= 200 && status < 300) samples.push(ms);
  });
  return { result: await instance, samples };
}

function problemsOf(phase: string, r: autocannon.Result, minBytes: number | undefined): string[] {
  const problems: string[] = [];
  if (r.non2xx > 0) {
    const codes = Object.entries(r.statusCodeStats)
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, s]) => `${s.count}x${code}`)
      .join(', ');
    problems.push(`${phase}: ${r.non2xx} non-2xx responses (${codes})`);
  }
  if (r.errors > 0) problems.push(`${phase}: ${r.errors} errors (${r.timeouts} of them timeouts)`);
  if (r['2xx'] === 0) problems.push(`${phase}: no successful response at all`);
  else if (minBytes !== undefined && r.throughput.total / r['2xx'] < minBytes) {
    problems.push(
      `${phase}: responses averaged ${Math.round(r.throughput.total / r['2xx'])} bytes, expected at least ${minBytes}`,
    );
  }
  return problems;
}

async function measure(scenario: Scenario): Promise<Measured> {
  const problems: string[] = [];
  const runs: autocannon.Result[] = [];
  const connections = scenario.connections ?? CONNECTIONS;
  if (WARMUP > 0) {
    log(`${scenario.name}: warm-up ${WARMUP} s`);
    const warm = await load(scenario, WARMUP);
    runs.push(warm.result);
    problems.push(...problemsOf('warm-up', warm.result, scenario.minBytes));
  }
  log(`${scenario.name}: measuring ${DURATION} s with ${connections} connections`);
  const start = monotonicMicros();
  const split = cpuSnapshot(scenario.child?.proc.pid);
  const { result, samples, latency } = await load(scenario, DURATION);
  const cpu = cpuPerUnit(split, cpuSnapshot(scenario.child?.proc.pid), result.requests.total);
  const window = { label: scenario.name, start, end: monotonicMicros() };
  runs.push(result);
  problems.push(...problemsOf('measured run', result, scenario.minBytes));
  if (scenario.after) problems.push(...(await scenario.after(runs)));
  const okTotal = runs.reduce((sum, r) => sum + r['2xx'], 0);
  return {
    scenario,
    result,
    latency: latency ?? percentiles(samples ?? []),
    window,
    problems,
    okTotal,
    cpu,
  };
}

/** GET that must answer 200 with JSON; returns the body and its size. */
async function getJson<T>(url: string, headers: Record<string, string>): Promise<{ body: T; bytes: number }> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}: HTTP ${res.status}: ${text.slice(0, 500)}`);
  return { body: JSON.parse(text) as T, bytes: Buffer.byteLength(text) };
}

/** Reads one form and one page before loading them, so the table measures what it claims. */
async function checkResponses(service: Child, token: string, formId: number): Promise<void> {
  const headers = { authorization: `Bearer ${token}` };
  const read = await fetch(`${service.url}${API}/forms/${formId}?withFields=true`, { headers });
  const form = (await read.json()) as { id?: number; fields?: unknown[] };
  if (read.status !== 200 || form.id !== formId || form.fields?.length !== FIELDS_PER_FORM) {
    throw new Error(`GET /forms/${formId}?withFields=true: HTTP ${read.status}, ${form.fields?.length ?? 'no'} fields`);
  }
  const list = await fetch(`${service.url}${API}/forms?pageSize=100`, { headers });
  const page = (await list.json()) as { forms?: unknown[]; total?: number };
  if (list.status !== 200 || page.forms?.length !== 100 || page.total !== FORMS) {
    throw new Error(
      `GET /forms?pageSize=100: HTTP ${list.status}, ${page.forms?.length ?? 'no'} forms of ${page.total ?? '?'}`,
    );
  }
}

function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Submissions

/** Numbers of the bodies sent so far: every POST of the run gets one of its own (and so a unique email). */
let nextBody = 0;

/** Creates the 10-field submission form through the API; returns its id and field ids. */
async function createSubmissionForm(
  service: Child,
  token: string,
  name: string,
): Promise<{ id: number; ids: FieldIds }> {
  const res = await fetch(`${service.url}${API}/forms`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(submissionForm(name)),
  });
  const text = await res.text();
  if (res.status !== 200)
    throw new Error(`creating the submission form on ${service.name}: HTTP ${res.status}: ${text.slice(0, 500)}`);
  const form = JSON.parse(text) as { id: number; fields: { id: number; label: string }[] };
  if (form.fields.length !== SUBMISSION_FIELD_COUNT)
    throw new Error(`the submission form has ${form.fields.length} fields, not ${SUBMISSION_FIELD_COUNT}`);
  return { id: form.id, ids: fieldIdsOf(form.fields) };
}

async function postOne(
  service: Child,
  token: string,
  formId: number,
  ids: FieldIds,
): Promise<{ n: number; id: number }> {
  const n = nextBody++;
  const { status, text } = await postSubmission(service.url, token, formId, ids, n);
  if (status !== 200)
    throw new Error(`POST /forms/${formId}/submissions on ${service.name}: HTTP ${status}: ${text.slice(0, 500)}`);
  const created = JSON.parse(text) as { id: number; data?: unknown[] };
  if (!created.data || created.data.length === 0)
    throw new Error(`POST /forms/${formId}/submissions on ${service.name}: no data in ${text.slice(0, 300)}`);
  return { n, id: created.id };
}

async function submissionCount(service: Child, token: string, formId: number): Promise<number> {
  const { body } = await getJson<{ count: number }>(`${service.url}${API}/forms/${formId}/submissions/count`, {
    authorization: `Bearer ${token}`,
  });
  return body.count;
}

/**
 * The form's count once it stops moving: a run that just stopped may leave a create per
 * connection in flight in the service, which commits after the load generator has returned.
 * Read before a run, an unsettled count would charge those to the run that follows.
 */
async function settledCount(service: Child, token: string, formId: number): Promise<number> {
  let last = await submissionCount(service, token, formId);
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await submissionCount(service, token, formId);
    if (now === last) return now;
    last = now;
  }
  throw new Error(`the count of form ${formId} on ${service.name} kept moving for 5 s with no load`);
}

/** Bodies that wrk sends in turn (bench/wrk.ts): each email gets a string of its request's own, so it stays unique. */
const WRK_BODIES = 1000;

function wrkBodies(ids: FieldIds): string[] {
  return Array.from({ length: WRK_BODIES }, () => {
    const body = submissionBody(nextBody++, ids);
    // The email is the body's only "@" (bench/submission-data.ts).
    if (body.split('@').length !== 2) throw new Error(`expected one "@" in a submission body: ${body}`);
    return body.replace('@', '__N__@');
  });
}

/**
 * POST of a new body every time; afterwards the form must hold one more submission per 2xx.
 * Loaded by autocannon (a user agent of its own per request too), or with viaWrk by wrk.
 */
async function postScenario(
  name: string,
  service: Child,
  token: string,
  formId: number,
  ids: FieldIds,
  viaWrk = false,
): Promise<Scenario> {
  const before = await settledCount(service, token, formId);
  const path = `${API}/forms/${formId}/submissions`;
  return {
    name,
    url: service.url,
    child: service,
    connections: POST_CONNECTIONS,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      ...(viaWrk && { 'user-agent': clientOf(0).userAgent }),
    },
    ...(viaWrk && { wrk: { method: 'POST', path, bodies: wrkBodies(ids) } }),
    requests: [
      {
        method: 'POST',
        path,
        setupRequest: (request) => {
          const n = nextBody++;
          return {
            ...request,
            body: submissionBody(n, ids),
            headers: { ...request.headers, 'user-agent': clientOf(n).userAgent },
          };
        },
      },
    ],
    minBytes: 1000,
    after: async (runs) => {
      const ok = runs.reduce((sum, r) => sum + r['2xx'], 0);
      const failed = runs.reduce((sum, r) => sum + r.errors + r.non2xx, 0);
      const added = (await settledCount(service, token, formId)) - before;
      // Requests in flight when a run stops are answered but not counted: at most one per connection.
      const slack = runs.length * POST_CONNECTIONS + failed;
      return added >= ok && added <= ok + slack
        ? []
        : [`${ok} POSTs answered 2xx but the form gained ${added} submissions`];
    },
  };
}

const day = (d: { year: number; month: number; day: number }) =>
  `${d.year}-${String(d.month).padStart(2, '0')}-${String(d.day).padStart(2, '0')}`;

function addDays(d: { year: number; month: number; day: number }, days: number) {
  const t = new Date(Date.UTC(d.year, d.month - 1, d.day + days));
  return { year: t.getUTCFullYear(), month: t.getUTCMonth() + 1, day: t.getUTCDate() };
}

/** The read scenarios over the seeded form, each checked once against the seeded data before it is loaded. */
async function readScenarios(service: Child, token: string, dbFile: string, seeded: SeedResult): Promise<Scenario[]> {
  const auth = { authorization: `Bearer ${token}` };
  const base = `${API}/forms/${seeded.formId}/submissions`;
  const n = seeded.count;

  // A week in the middle of the seeded year, in Eastern Time as the API reads it, and how many it holds.
  const first = easternDay(seeded.firstCreated + (seeded.lastCreated - seeded.firstCreated) / 2);
  const last = addDays(first, 6);
  const from = lowerBound({ ...first, hour: 0, minute: 0, second: 0, dateOnly: true });
  const to = upperBound({ ...last, hour: 0, minute: 0, second: 0, dateOnly: true });
  const db = new Database(dbFile, { readonly: true });
  const inWeek = (
    db
      .prepare('SELECT count(*) AS n FROM submissions WHERE form_id = ? AND created_at BETWEEN ? AND ?')
      .get(seeded.formId, from, to) as { n: number }
  ).n;
  db.close();

  const pageNumber = Math.min(1000, Math.floor(n / 25));
  const criteria = seeded.criteria
    .map(
      (c, i) => `search%5B${i}%5D%5BfieldId%5D=${c.fieldId}&search%5B${i}%5D%5Bvalue%5D=${encodeURIComponent(c.value)}`,
    )
    .join('&');
  const share = (k: number) => `${((100 * k) / n).toFixed(2)}% of ${n.toLocaleString('en-US')}`;
  log(
    `seeded form ${seeded.formId}: keyword "${seeded.keyword}" in ${share(seeded.keywordMatches)}, field search in ${share(seeded.criteriaMatches)}, ${day(first)}..${day(last)} holds ${share(inWeek)}`,
  );

  type Body = { submissions?: { id: number }[]; total?: number; count?: number };
  /** A page of the listing: its total, as many rows as there should be (never none), the newest first. */
  const listing =
    (expectTotal: number, offset = 0, expectFirstId?: number) =>
    (body: Body): string[] => {
      const problems: string[] = [];
      const rows = Math.max(0, Math.min(25, expectTotal - offset));
      if (body.total !== expectTotal) problems.push(`total ${body.total}, expected ${expectTotal}`);
      if (body.submissions?.length !== rows || rows === 0)
        problems.push(`${body.submissions?.length} rows on the page, expected ${rows} (and some)`);
      if (expectFirstId !== undefined && body.submissions?.[0]?.id !== expectFirstId)
        problems.push(`first id ${body.submissions?.[0]?.id}, expected ${expectFirstId}`);
      return problems;
    };
  /** The searches are meant to match about 0.5-2% of the submissions; far off that, they measure something else. */
  const selectivity = (what: string, k: number): string[] =>
    k / n < 0.002 || k / n > 0.05 ? [`${what} matches ${share(k)}, far from the 0.5-2% it is meant to`] : [];

  const checks: { name: string; path: string; check: (body: Body) => string[] }[] = [
    { name: 'GET submissions ?pageSize=25 (page 1)', path: `${base}?pageSize=25`, check: listing(n, 0, seeded.lastId) },
    {
      name: `GET submissions ?pageNumber=${pageNumber}&pageSize=25`,
      path: `${base}?pageNumber=${pageNumber}&pageSize=25`,
      check: listing(n, (pageNumber - 1) * 25, seeded.lastId - (pageNumber - 1) * 25),
    },
    {
      name: `GET submissions ?keyword=${seeded.keyword}`,
      path: `${base}?keyword=${encodeURIComponent(seeded.keyword)}`,
      check: (body) => [...listing(seeded.keywordMatches)(body), ...selectivity('the keyword', seeded.keywordMatches)],
    },
    {
      name: 'GET submissions, 2-field search',
      path: `${base}?${criteria}`,
      check: (body) => [
        ...listing(seeded.criteriaMatches)(body),
        ...selectivity('the field search', seeded.criteriaMatches),
      ],
    },
    {
      name: 'GET submissions ?minTime&maxTime (1 week)',
      path: `${base}?minTime=${day(first)}&maxTime=${day(last)}`,
      check: listing(inWeek),
    },
    {
      name: 'GET submissions/count ?startDate&lookbackPeriod=7',
      path: `${base}/count?startDate=${day(last)}&lookbackPeriod=7`,
      check: (body) =>
        body.count === inWeek && inWeek > 0 ? [] : [`count ${body.count}, expected ${inWeek} (and some)`],
    },
  ];

  const scenarios: Scenario[] = [];
  for (const c of checks) {
    const { body, bytes } = await getJson<Body>(`${service.url}${c.path}`, auth);
    const problems = c.check(body);
    if (problems.length > 0) throw new Error(`${c.name}: GET ${c.path}: ${problems.join('; ')}`);
    scenarios.push({
      name: c.name,
      url: service.url,
      child: service,
      headers: auth,
      requests: [{ method: 'GET', path: c.path }],
      minBytes: bytes,
      target: { p95: READ_TARGET_P95 },
    });
  }
  return scenarios;
}

// ---------------------------------------------------------------------------------------
// Report

const fmt = (n: number, digits: number) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

const ms = (n: number) => (Number.isNaN(n) ? 'n/a' : n < 10 ? fmt(n, 2) : fmt(n, 1));

function table(measured: Measured[]): string {
  const ceiling = measured[0]!.result.requests.mean;
  const rows = measured.map(({ scenario, result, latency, cpu: { service: cpuPerRequest } }) => {
    const share = ceiling > 0 ? `${fmt((100 * result.requests.mean) / ceiling, 1)}%` : 'n/a';
    const cpu = Number.isFinite(cpuPerRequest) ? fmt(cpuPerRequest, 0) : 'n/a';
    return (
      `| ${scenario.name} | ${scenario.connections ?? CONNECTIONS} | ${fmt(result.requests.mean, 0)} | ` +
      `${ms(latency.p50)} | ${ms(latency.p95)} | ${ms(latency.p99)} | ${share} | ${cpu} | ${result.non2xx} |`
    );
  });
  return [
    '| scenario | conns | req/s (mean) | p50 ms | p95 ms | p99 ms | % of ceiling | CPU µs/req | non-2xx |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}

function targets(measured: Measured[]): string[] {
  const lines: string[] = [];
  const ceiling = measured.find((m) => m.scenario.name === 'constant route (ceiling)');
  for (const { scenario, result, latency } of measured) {
    const t = scenario.target;
    if (!t) continue;
    if ('share' in t) {
      if (!ceiling) continue;
      const share = (100 * result.requests.mean) / ceiling.result.requests.mean;
      // The p99 target holds only where the machine itself answers within 2 ms at the 99th percentile.
      const quiet = ceiling.latency.p99 < QUIET_CEILING_P99;
      const met = share >= t.share && (!quiet || latency.p99 < t.p99);
      lines.push(
        `  ${met ? 'met   ' : 'MISSED'} ${scenario.name}: ${fmt(share, 1)}% of the ceiling (target >= ${t.share}%), ` +
          `p99 ${ms(latency.p99)} ms (target < ${t.p99} ms${quiet ? '' : `; not judged: the constant route's p99 was ${ms(ceiling.latency.p99)} ms`})`,
      );
    } else {
      lines.push(
        `  ${latency.p95 < t.p95 ? 'met   ' : 'MISSED'} ${scenario.name}: p95 ${ms(latency.p95)} ms (target < ${t.p95} ms)`,
      );
    }
  }
  return lines;
}

// ---------------------------------------------------------------------------------------

/** Section 4: each row on a fresh service child of its own (bench/files.ts). */
async function filesSection(tmp: string, profDir: string): Promise<FileRow[]> {
  let n = 0;
  return runFileBench(
    {
      log,
      async startService(name, env) {
        const dataDir = join(tmp, `files-${++n}`);
        const token = await createBenchAccount(dataDir);
        const child = await startService(name, dataDir, '', profDir, env);
        return {
          service: { url: child.url, pid: child.proc.pid, stop: () => stopChild(child, stopGrace()) },
          token,
          dataDir,
        };
      },
    },
    FILE_MB,
    LARGE_FILE_MB,
  );
}

function fileReport(rows: FileRow[]): string {
  return [
    '',
    `Files: ${FILE_MB} MB and ${LARGE_FILE_MB} MB files, median of 3 uploads (PUT to the upload URL) and downloads (GET /submissions/{id}/upload) each, one service child per row (SQLite):`,
    '',
    fileTable(rows),
    '',
  ].join('\n');
}

/** Where each service's time went during each of its measured runs (BENCH_CPU_PROF=1). */
function profileOf(services: Child[], measured: Measured[]): string {
  return services
    .map((s) => {
      const file = s.profDir && readdirSync(s.profDir).find((f) => f.endsWith('.cpuprofile'));
      const windows = measured.filter((m) => m.scenario.child === s);
      if (windows.length === 0) return '';
      if (!file) return `${s.name}: no .cpuprofile was written (did the service exit cleanly?)`;
      return windows.map((m) => `[${s.name}] ${summarizeProfile(join(s.profDir!, file), ROOT, m.window)}`).join('\n\n');
    })
    .filter((text) => text !== '')
    .join('\n\n');
}

/**
 * A section run alone (`npm run bench -- files`, ...): its temporary directory (with profile/ in
 * it) made and removed, its children stopped, a failure logged; 0 when it ran, 1 when it failed.
 */
async function alone(run: (tmp: string, profDir: string) => Promise<void>): Promise<number> {
  const tmp = mkdtempSync(join(tmpdir(), 'formwork-bench-'));
  temporary.push(tmp);
  const profDir = join(tmp, 'profile');
  mkdirSync(profDir);
  try {
    await run(tmp, profDir);
    return 0;
  } catch (error) {
    log(`FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  } finally {
    await Promise.all(children.map((c) => stopChild(c, stopGrace())));
    rmSync(tmp, { recursive: true, force: true });
  }
}

function filesOnly(): Promise<number> {
  return alone(async (tmp, profDir) => {
    const rows = await filesSection(tmp, profDir);
    process.stdout.write(`${fileReport(rows)}\n`);
  });
}

/** Section 5: one service child with its worker, a webhook receiver and an SMTP sink (bench/events.ts). */
async function eventsSection(
  tmp: string,
  profDir: string,
  services: Child[],
  measured: Measured[],
): Promise<EventResult> {
  const tokens = new Map<string, { child: Child; token: string }>();
  const childOf = (url: string) => tokens.get(url)!;
  return runEventBench(
    {
      log,
      durationS: DURATION,
      nextBody: () => nextBody++,
      async startService(name, env) {
        const dataDir = join(tmp, 'events');
        const token = await createBenchAccount(dataDir);
        const child = await startService(name, dataDir, '', profDir, env);
        services.push(child);
        tokens.set(child.url, { child, token });
        return { url: child.url, token, cpuMs: () => processCpuMicros(child.proc.pid) / 1000 };
      },
      createForm: (service, name) => createSubmissionForm(childOf(service.url).child, service.token, name),
      async measurePosts(name, service, formId, ids) {
        const { child } = childOf(service.url);
        const m = await measure(await postScenario(name, child, service.token, formId, ids));
        measured.push(m);
        return { rps: m.result.requests.mean, p99: m.latency.p99, ok: m.okTotal, problems: m.problems };
      },
    },
    EVENT_RATE,
  );
}

/** One section alone (`npm run bench -- events`, `-- pg`): its report, then its profile when asked. */
async function sectionOnly<R extends { problems: string[] }>(
  section: (tmp: string, profDir: string, services: Child[], measured: Measured[]) => Promise<R>,
  report: (result: R) => string,
): Promise<number> {
  const tmp = mkdtempSync(join(tmpdir(), 'formwork-bench-'));
  temporary.push(tmp);
  const profDir = join(tmp, 'profile');
  mkdirSync(profDir);
  const services: Child[] = [];
  const measured: Measured[] = [];
  try {
    const result = await section(tmp, profDir, services, measured);
    process.stdout.write(`${report(result)}\n`);
    if (result.problems.length > 0) {
      process.stderr.write(`\nFAILED:\n${result.problems.map((p) => `  ${p}`).join('\n')}\n`);
      return 1;
    }
    return 0;
  } catch (error) {
    log(`FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  } finally {
    await Promise.all(children.map((c) => stopChild(c, stopGrace())));
    if (CPU_PROF) process.stdout.write(`\n${profileOf(services, measured)}\n`);
    await dropPgDatabases();
    if (CPU_PROF && process.env.BENCH_KEEP_PROFILES)
      cpSync(profDir, process.env.BENCH_KEEP_PROFILES, { recursive: true });
    rmSync(tmp, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------
// PostgreSQL writes next to pgbench (bench/pgbench.ts)

interface PgSectionResult {
  rows: { name: string; rps: number; p50: number; p99: number; share: string; cpu?: CpuPerUnit }[];
  lines: string[];
  problems: string[];
}

async function withPgClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function pgSql(url: string, statement: string): Promise<void> {
  await withPgClient(url, (client) => client.query(statement));
}

/**
 * Waits (2 s at most) until pgbench's backends have exited and the postmaster has reaped them:
 * a backend's CPU time is counted while it runs, and then in the postmaster's children's times
 * (bench/cpu-split.ts), so a snapshot taken between the two missed it (the PostgreSQL column
 * read 25 µs a transaction of (a) and the "other" one 277, where the next run read 256 and 8).
 */
async function pgbenchBackendsGone(url: string): Promise<void> {
  await withPgClient(url, async (client) => {
    for (let i = 0; i < 40; i++) {
      const { rows } = await client.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'pgbench'",
      );
      if (rows[0]!.n === 0) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  // Gone from pg_stat_activity just before its process exits; reaped at once after.
  await new Promise((r) => setTimeout(r, 100));
}

/**
 * The outbox rows of the replay (b'): as many as the create it replays wrote, each payload
 * JSON (the cast fails the run otherwise); then deleted. They were never due
 * (REPLAYED_JOBS_RUN_AT), and the POST after it would have met them in its worker's queue.
 */
async function replayedJobsChecked(url: string, expected: number): Promise<string[]> {
  return withPgClient(url, async (client) => {
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(payload::json)::int AS n FROM jobs WHERE run_at = ${REPLAYED_JOBS_RUN_AT}`,
    );
    await client.query(`DELETE FROM jobs WHERE run_at = ${REPLAYED_JOBS_RUN_AT}`);
    const { n } = rows[0]!;
    return n === expected ? [] : [`pgbench (b') wrote ${n} outbox rows, expected ${expected}`];
  });
}

/** The statements the service sends for one POST of a new body to the form (captured by bench/pg-capture.ts). */
async function captureCreate(child: Child, token: string, form: { id: number; ids: FieldIds }, file: string) {
  await postOne(child, token, form.id, form.ids); // caches warm: what every later request finds
  await new Promise((r) => setTimeout(r, 200));
  const from = statSync(file).size;
  await postOne(child, token, form.id, form.ids);
  await new Promise((r) => setTimeout(r, 200));
  return readCaptured(file, from).filter((c) => !isBackground(c));
}

/**
 * Section 4: the POST on PostgreSQL at POST_CONNECTIONS, on a form with nothing configured and
 * on one with a webhook and a notification email, each next to pgbench at the same
 * concurrency in the same run: (a) one 10-key jsonb row per transaction, (b) the statements
 * of one create of that form, captured from the service.
 */
async function pgSection(
  tmp: string,
  profDir: string,
  services: Child[],
  measured: Measured[],
): Promise<PgSectionResult> {
  const database = await createPgDatabase();
  log(`PostgreSQL database ${database}`);
  const pgUrl = pgUrlFor(database);
  const dataDir = join(tmp, 'pg-data');
  const pgToken = await createBenchAccount(dataDir, pgUrl);
  const receiver = new Receiver();
  const sink = new MailSink();
  const eventEnv = {
    // One key for the capturing child and the measured one: the worker opens what either wrote.
    SECRET_KEY: randomBytes(32).toString('hex'),
    WEBHOOK_ALLOW_PRIVATE: 'true',
    SMTP_URL: await sink.listen(),
    MAIL_FROM: 'bench@example.com',
  };
  const hookUrl = await receiver.listen();
  const problems: string[] = [];
  try {
    const withEvents = async (child: Child, name: string) => {
      const form = await createSubmissionForm(child, pgToken, name);
      await addEvents({ url: child.url, token: pgToken }, form.id, hookUrl);
      return form;
    };

    // 1. What one create sends, from a service child with the capture hook (no worker: its polls are not the request's).
    const captureFile = join(tmp, 'pg-capture.jsonl');
    const capture = await startService(
      'service (PostgreSQL, capture)',
      dataDir,
      pgUrl,
      profDir,
      { ...eventEnv, BENCH_PG_CAPTURE: captureFile },
      { node: ['--import', './bench/pg-capture.ts'], serve: ['--no-worker'] },
    );
    const plainCapture = await createSubmissionForm(capture, pgToken, 'Bench capture (no events)');
    const eventCapture = await withEvents(capture, 'Bench capture (webhook and email)');
    const plainStatements = await captureCreate(capture, pgToken, plainCapture, captureFile);
    const eventStatements = await captureCreate(capture, pgToken, eventCapture, captureFile);
    await stopChild(capture, stopGrace());
    const describe = (list: Captured[]) =>
      list
        .map((c, i) => `    ${i + 1}. ${c.name ? `(prepared) ` : ''}${c.text.replace(/\s+/g, ' ').slice(0, 160)}`)
        .join('\n');
    log(`one create sends ${plainStatements.length} statements:\n${describe(plainStatements)}`);
    log(
      `one create with a webhook and an email sends ${eventStatements.length} statements:\n${describe(eventStatements)}`,
    );

    // 2. The service that is measured (API and worker), its forms, and pgbench's tables.
    // A pool wider than the default 10 (DATABASE_POOL_SIZE), for the creates with a webhook and
    // an email, each a transaction that holds its connection for four round trips; plain creates
    // and token look-ups share statements, two at a time (src/db/coalescer.ts), at any pool size.
    // 25 of the server's 100 connections.
    const service = await startService('service (PostgreSQL)', dataDir, pgUrl, profDir, {
      ...eventEnv,
      DATABASE_POOL_SIZE: String(PG_POOL),
    });
    services.push(service);
    const plainForm = await createSubmissionForm(service, pgToken, 'Bench submissions (POST)');
    const eventForm = await withEvents(service, 'Bench submissions (POST, webhook and email)');
    await postOne(service, pgToken, plainForm.id, plainForm.ids);
    await postOne(service, pgToken, eventForm.id, eventForm.ids);
    await pgSql(pgUrl, JSONB_TABLE);
    await pgSql(pgUrl, `CREATE SEQUENCE ${SEQUENCE}`);
    const vacuum = () => pgSql(pgUrl, 'VACUUM ANALYZE');
    const scriptDir = process.env.BENCH_PG_KEEP === '1' ? '/tmp' : tmp;

    const bench = async (
      label: string,
      script: string,
      protocol: 'prepared' | 'simple' = 'simple',
    ): Promise<PgbenchResult & { cpu: CpuPerUnit }> => {
      await vacuum();
      log(`pgbench ${label}: ${DURATION} s with ${POST_CONNECTIONS} clients, ${protocol} protocol`);
      const before = cpuSnapshot(service.proc.pid);
      const r = await runPgbench(
        pgUrl,
        join(scriptDir, `pgbench-${label}.sql`),
        script,
        POST_CONNECTIONS,
        DURATION,
        log,
        protocol,
      );
      if (r.failed > 0) problems.push(`pgbench ${label}: ${r.failed} failed transactions`);
      await pgbenchBackendsGone(pgUrl);
      return { ...r, cpu: cpuPerUnit(before, cpuSnapshot(service.proc.pid), r.transactions) };
    };
    const batches: string[] = [];
    const post = async (name: string, form: { id: number; ids: FieldIds }) => {
      await vacuum();
      const before = await sharedCreates(service);
      // Its targets are its shares of pgbench, printed with them.
      const m = await measure(await postScenario(name, service, pgToken, form.id, form.ids, PG_LOADER === 'wrk'));
      batches.push(`  ${name}: ${batchesSince(before, await sharedCreates(service), 'shared statements')}`);
      measured.push(m);
      return m;
    };

    const a = await bench('a', jsonbScript());
    const b = await bench('b', pgbenchScript(plainStatements), protocolOf(plainStatements));
    const plain = await post('POST /forms/{id}/submissions (PostgreSQL)', plainForm);
    const bEvents = await bench('b-events', pgbenchScript(eventStatements), protocolOf(eventStatements));
    problems.push(...(await replayedJobsChecked(pgUrl, bEvents.transactions * jobsPerReplay(eventStatements))));
    const evented = await post('POST /forms/{id}/submissions (PostgreSQL, a webhook and an email)', eventForm);
    problems.push(...[plain, evented].flatMap((m) => m.problems.map((p) => `${m.scenario.name}: ${p}`)));

    const pct = (x: number, of: number) => `${fmt((100 * x) / of, 1)}%`;
    const rps = (m: Measured) => m.result.requests.mean;
    const rows = [
      {
        name: 'pgbench (a): one 10-key jsonb row',
        rps: a.tps,
        p50: a.latencyMs,
        p99: Number.NaN,
        share: '',
        cpu: a.cpu,
      },
      {
        name: `pgbench (b): the ${plainStatements.length} statements of one create`,
        rps: b.tps,
        p50: b.latencyMs,
        p99: Number.NaN,
        share: '',
        cpu: b.cpu,
      },
      {
        name: plain.scenario.name,
        rps: rps(plain),
        p50: plain.latency.p50,
        p99: plain.latency.p99,
        share: `${pct(rps(plain), a.tps)} of (a), ${pct(rps(plain), b.tps)} of (b)`,
        cpu: plain.cpu,
      },
      {
        name: `pgbench (b'): the ${eventStatements.length} statements of one create with a webhook and an email`,
        rps: bEvents.tps,
        p50: bEvents.latencyMs,
        p99: Number.NaN,
        share: '',
        cpu: bEvents.cpu,
      },
      {
        name: evented.scenario.name,
        rps: rps(evented),
        p50: evented.latency.p50,
        p99: evented.latency.p99,
        share: `${pct(rps(evented), a.tps)} of (a), ${pct(rps(evented), bEvents.tps)} of (b')`,
        cpu: evented.cpu,
      },
    ];
    const met = (ok: boolean) => (ok ? 'met   ' : 'MISSED');
    const lines = [
      `  ${met(rps(plain) >= 0.3 * a.tps)} POST on PostgreSQL ${pct(rps(plain), a.tps)} of pgbench (a) (target >= 30%)`,
      `  ${met(rps(plain) >= 0.6 * b.tps)} POST on PostgreSQL ${pct(rps(plain), b.tps)} of pgbench (b) (target >= 60%)`,
      `  ${met(rps(evented) >= 0.3 * a.tps)} POST with a webhook and an email ${pct(rps(evented), a.tps)} of pgbench (a) (target >= 30%)`,
      `  ${met(rps(evented) >= 0.6 * bEvents.tps)} POST with a webhook and an email ${pct(rps(evented), bEvents.tps)} of pgbench (b') (target >= 60%)`,
    ];
    lines.push(
      '',
      'creates in a shared statement (GET /metrics, formwork_db_shared_*{kind="submission_create"}, over the warm-up and the run):',
      ...batches,
    );
    await stopChild(service, stopGrace());
    return { rows, lines, problems };
  } finally {
    await receiver.close();
    await sink.close();
  }
}

/**
 * The service's shared create statements (PostgreSQL) or its create thread's batches (SQLite),
 * and the creates they carried so far (GET /metrics, from loopback).
 */
async function sharedCreates(service: Child): Promise<SharedCreates | undefined> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  const read = (metric: string) => {
    const line = text.split('\n').find((l) => l.startsWith(`${metric}{`) && l.includes('kind="submission_create"'));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  };
  const statements = read('formwork_db_shared_statements_total');
  const calls = read('formwork_db_shared_calls_total');
  return statements === undefined || calls === undefined ? undefined : { statements, calls };
}

interface SharedCreates {
  statements: number;
  calls: number;
}

/** What the shared statements (or the SQLite create thread's batches) between two readings carried. */
function batchesSince(before: SharedCreates | undefined, after: SharedCreates | undefined, what: string): string {
  if (!after) return `${what}: not counted (no formwork_db_shared_* of submission_create in GET /metrics)`;
  // None before: the service had made no such statement yet (its counts start with the first).
  const statements = after.statements - (before?.statements ?? 0);
  const calls = after.calls - (before?.calls ?? 0);
  return `${statements} ${what} carried ${calls} creates, ${fmt(calls / Math.max(1, statements), 1)} each`;
}

function pgReport(r: PgSectionResult): string {
  const na = (n: number) => (Number.isNaN(n) ? '' : ms(n));
  return [
    '',
    `PostgreSQL writes, ${POST_CONNECTIONS} connections, next to pgbench in the same run (pgbench: latency average in the p50 column).`,
    `The POSTs are loaded by ${PG_LOADER === 'wrk' ? 'wrk (C, as pgbench is; bench/wrk.ts)' : 'autocannon (in this process; wrk is not installed or BENCH_PG_LOADER chose autocannon)'}.`,
    "The machine's CPU per transaction or request, µs, by whom: the service, the PostgreSQL server, the load generator",
    `(${PG_LOADER === 'wrk' ? 'wrk' : 'autocannon in this process'}, or pgbench), everything else, and idle (bench/cpu-split.ts):`,
    '',
    '| scenario | tx/s or req/s | p50 ms | p99 ms | POST as a share of pgbench | service | PostgreSQL | load | other | idle |',
    '|---|---:|---:|---:|---|---:|---:|---:|---:|---:|',
    ...r.rows.map(
      (row) =>
        `| ${row.name} | ${fmt(row.rps, 0)} | ${na(row.p50)} | ${na(row.p99)} | ${row.share} | ${cpuCells(row.cpu)} |`,
    ),
    '',
    'targets:',
    ...r.lines,
    '',
  ].join('\n');
}

/** Section 6: the hosted page and its plain HTML post, as a share of the constant route. */
async function publicOnly(): Promise<number> {
  const tmp = mkdtempSync(join(tmpdir(), 'formwork-bench-'));
  temporary.push(tmp);
  const dataDir = join(tmp, 'data');
  const profDir = join(tmp, 'profile');
  mkdirSync(profDir);
  const secretKey = randomBytes(32).toString('hex');
  const measured: Measured[] = [];
  let service: Child | undefined;
  try {
    const token = await createBenchAccount(dataDir);
    const started = await startService('service (SQLite)', dataDir, '', profDir, {
      SECRET_KEY: secretKey,
      PUBLIC_SUBMIT_PER_MINUTE: '1000000',
    });
    service = started;
    const constant = startChild('constant', ['--import', 'tsx', 'bench/constant-server.ts'], {}, await freePort());
    await waitReady(constant, '/');
    const form = await createSubmissionForm(service, token, 'Bench hosted form');
    const viewKey = (
      (await (
        await fetch(`${service.url}${API}/forms/${form.id}`, { headers: { authorization: `Bearer ${token}` } })
      ).json()) as {
        viewKey: string;
      }
    ).viewKey;
    const page = await fetch(`${service.url}/f/${viewKey}`);
    const html = await page.text();
    if (page.status !== 200 || !html.includes('<form')) throw new Error(`GET /f/${viewKey}: HTTP ${page.status}`);
    const before = await submissionCount(service, token, form.id);
    let n = 0;
    measured.push(
      await measure({
        name: 'constant route (ceiling)',
        url: constant.url,
        child: constant,
        requests: [{ method: 'GET', path: '/' }],
      }),
    );
    measured.push(
      await measure({
        name: `GET /f/{viewKey} (hosted page, ${(html.length / 1024).toFixed(1)} KB)`,
        url: service.url,
        child: service,
        requests: [{ method: 'GET', path: `/f/${viewKey}` }],
        minBytes: html.length,
      }),
    );
    measured.push(
      await measure({
        name: 'POST /f/{viewKey} (no-JavaScript submit)',
        url: service.url,
        child: service,
        connections: POST_CONNECTIONS,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        requests: [
          {
            method: 'POST',
            path: `/f/${viewKey}`,
            setupRequest: (request) => ({ ...request, body: plainPost(n++, form.ids, form.id, secretKey, Date.now()) }),
          },
        ],
        // The confirmation page, not the form again with errors.
        minBytes: 800,
        after: async (runs) => {
          const ok = runs.reduce((sum, r) => sum + r['2xx'], 0);
          const added = (await settledCount(started, token, form.id)) - before;
          const slack = runs.length * POST_CONNECTIONS + runs.reduce((sum, r) => sum + r.errors + r.non2xx, 0);
          return added >= ok && added <= ok + slack
            ? []
            : [`${ok} posts answered 2xx but the form gained ${added} submissions`];
        },
      }),
    );
    await stopChild(constant, 5_000);
    await stopChild(service, stopGrace());
  } catch (error) {
    log(`FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  } finally {
    await Promise.all(children.map((c) => stopChild(c, stopGrace())));
    if (CPU_PROF && service) process.stdout.write(`\n${profileOf([service], measured)}\n`);
    if (CPU_PROF && process.env.BENCH_KEEP_PROFILES)
      cpSync(profDir, process.env.BENCH_KEEP_PROFILES, { recursive: true });
    rmSync(tmp, { recursive: true, force: true });
  }
  const [ceiling, pageRead, post] = measured;
  const share = (m: Measured | undefined) => (100 * (m?.result.requests.mean ?? 0)) / ceiling!.result.requests.mean;
  const lines = [
    '',
    `Hosted forms, Node ${process.version}, ${WARMUP} s warm-up + ${DURATION} s measured per scenario, SQLite, the ${SUBMISSION_FIELD_COUNT}-field form:`,
    '',
    table(measured),
    '',
    `hosted page reaches ${share(pageRead).toFixed(1)}% of the constant route (target >= ${PAGE_TARGET_SHARE}%); ` +
      `the no-JavaScript submit ${share(post).toFixed(1)}%`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  const problems = measured.flatMap((m) => m.problems.map((p) => `${m.scenario.name}: ${p}`));
  if (problems.length > 0) {
    process.stderr.write(`\nFAILED: responses other than expected:\n${problems.map((p) => `  ${p}`).join('\n')}\n`);
    return 1;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// Export

/** The export targets of issue 14: rows per second, and peak RSS over idle. */
const EXPORT_TARGET_ROWS_PER_S = 41_000;
const EXPORT_TARGET_RSS_MIB = 50;

interface ExportResult {
  rows: number;
  bytes: number;
  seconds: number;
  idleMiB: number;
  peakMiB: number;
  /** How the peak was read: VmHWM reset before the export, or VmRSS sampled during it. */
  peakFrom: string;
  child: Child;
  window: Window;
  problems: string[];
}

/** A field of /proc/<pid>/status in MiB (Linux only). */
function procMiB(pid: number | undefined, field: 'VmRSS' | 'VmHWM'): number {
  if (pid === undefined) return Number.NaN;
  try {
    const kb = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Number(kb) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * GET .../submissions/export?format=csv of the seeded form, read as fast as it comes. Idle is
 * the child's RSS once started and warmed by one small request; the peak is its VmHWM, reset
 * just before the export (clear_refs 5), so that start-up does not count.
 */
async function measureExport(child: Child, token: string, seeded: SeedResult): Promise<ExportResult> {
  const auth = { authorization: `Bearer ${token}` };
  const pid = child.proc.pid;
  const problems: string[] = [];
  await getJson(`${child.url}${API}/forms/${seeded.formId}`, auth);
  await new Promise((r) => setTimeout(r, 500));
  const idleMiB = procMiB(pid, 'VmRSS');
  let peakFrom = 'VmHWM';
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    peakFrom = 'VmRSS sampled every 50 ms';
  }
  let sampled = idleMiB;
  const sampler = setInterval(() => {
    sampled = Math.max(sampled, procMiB(pid, 'VmRSS'));
  }, 50);
  log(`export of ${seeded.count.toLocaleString('en-US')} rows as CSV: idle RSS ${idleMiB.toFixed(1)} MiB`);
  const start = monotonicMicros();
  let lineEnds = 0;
  let bytes = 0;
  try {
    const res = await fetch(`${child.url}${API}/forms/${seeded.formId}/submissions/export?format=csv`, {
      headers: auth,
    });
    if (res.status !== 200 || !res.body)
      throw new Error(`export: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
    let last = 0;
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      bytes += chunk.length;
      // Rows end in CRLF; a CR at the end of one chunk and its LF at the start of the next count once.
      if (last === 13 && chunk[0] === 10) lineEnds++;
      for (let i = 1; i < chunk.length; i++) if (chunk[i] === 10 && chunk[i - 1] === 13) lineEnds++;
      last = chunk[chunk.length - 1] ?? 0;
    }
  } finally {
    clearInterval(sampler);
  }
  const end = monotonicMicros();
  const seconds = (end - start) / 1e6;
  const rows = lineEnds - 1;
  if (rows !== seeded.count) problems.push(`${rows} rows exported, expected ${seeded.count}`);
  const hwm = procMiB(pid, 'VmHWM');
  const peakMiB = peakFrom === 'VmHWM' && !Number.isNaN(hwm) ? hwm : Math.max(sampled, procMiB(pid, 'VmRSS'));
  return {
    rows,
    bytes,
    seconds,
    idleMiB,
    peakMiB,
    peakFrom,
    child,
    window: { label: 'export (CSV)', start, end },
    problems,
  };
}

const overIdle = (e: ExportResult): number => e.peakMiB - e.idleMiB;

function exportReport(e: ExportResult, runs: ExportResult[]): string {
  const rate = e.rows / e.seconds;
  const over = overIdle(e);
  const met = (ok: boolean) => (ok ? 'met' : 'MISSED');
  const each =
    runs.length > 1
      ? `${runs.length} exports, each on a fresh child: ` +
        runs
          .map(
            (r) => `+${overIdle(r).toFixed(1)} MiB at ${Math.round(r.rows / r.seconds).toLocaleString('en-US')} rows/s`,
          )
          .join('; ') +
        '; the one that grew the most:\n'
      : '';
  return (
    each +
    `export (CSV): ${e.rows.toLocaleString('en-US')} rows, ${(e.bytes / 1e6).toFixed(0)} MB in ${e.seconds.toFixed(1)} s = ` +
    `${Math.round(rate).toLocaleString('en-US')} rows/s (${met(rate >= EXPORT_TARGET_ROWS_PER_S)}: target >= ` +
    `${EXPORT_TARGET_ROWS_PER_S.toLocaleString('en-US')}); service RSS idle ${e.idleMiB.toFixed(1)} MiB, peak ` +
    `${e.peakMiB.toFixed(1)} MiB (${e.peakFrom}), +${over.toFixed(1)} MiB (${met(over <= EXPORT_TARGET_RSS_MIB)}: target <= ` +
    `${EXPORT_TARGET_RSS_MIB} MiB)`
  );
}

function exportProfile(e: Pick<ExportResult, 'child' | 'window'>): string {
  const file = e.child.profDir && readdirSync(e.child.profDir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) return `${e.child.name}: no .cpuprofile was written`;
  return `[${e.child.name}] ${summarizeProfile(join(e.child.profDir!, file), ROOT, e.window)}`;
}

/** Section 8: document merge, alone (bench/docmerge.ts). */
function docmergeOnly(): Promise<number> {
  return alone(async (tmp, profDir) => {
    // The API child and the worker child share the database, the files and SECRET_KEY.
    const secretKey = randomBytes(32).toString('hex');
    let n = 0;
    const rows = await runDocmergeBench(
      {
        log,
        async startService(name) {
          const dataDir = join(tmp, `docmerge-${++n}`);
          const token = await createBenchAccount(dataDir);
          const child = await startService(
            name,
            dataDir,
            '',
            profDir,
            { SECRET_KEY: secretKey },
            { serve: ['--no-worker'] },
          );
          return { url: child.url, token, dataDir };
        },
        async startWorker(name, dataDir) {
          const child = startChild(
            name,
            ['--import', 'tsx', 'src/cli.ts', 'worker'],
            { DATA_DIR: dataDir, LOG_LEVEL: 'warn', SECRET_KEY: secretKey, WORKER_POLL_MS: '100' },
            await freePort(),
          );
          return {
            async stop() {
              const peak = peakRss(child.proc.pid);
              child.peak = peak;
              await stopChild(child, stopGrace());
              return peak;
            },
          };
        },
      },
      DOCMERGE_COUNT,
    );
    process.stdout.write(
      `\nDocument merge: ${DOCMERGE_COUNT} submissions queued per template, then one \`formwork worker\` (WORKER_CONCURRENCY 4, SQLite); documents/s between the first and the last document made:\n\n${docmergeTable(rows)}\n`,
    );
  });
}

/** GET `path` on 10 connections until stop() (or `seconds`); every 2xx response's time in ms. */
function readWhile(url: string, headers: Record<string, string>, seconds: number) {
  const samples: number[] = [];
  const instance = autocannon({ url, connections: CONNECTIONS, duration: seconds, timeout: 10, headers });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status >= 200 && status < 300) samples.push(ms);
  });
  return { samples, done: Promise.resolve(instance), stop: () => instance.stop() };
}

/**
 * Section 9 (`npm run bench -- reindex`, alone): a field deleted from a form of
 * BENCH_REINDEX_COUNT seeded submissions on SQLite, and the `submissions.reindex` job that
 * takes its values out of the search index, run by the service's own worker: rows a second
 * from the delete's 200 to the job's end, and what the form read (10 connections) answers in
 * meanwhile against the same read before, since on SQLite each batch is written on the event loop.
 */
function reindexOnly(): Promise<number> {
  return alone(async (tmp, profDir) => {
    const dataDir = join(tmp, 'data');
    const dbFile = join(dataDir, 'formwork.db');
    const token = await createBenchAccount(dataDir);
    const auth = { authorization: `Bearer ${token}` };
    const maker = await startService('service (SQLite)', dataDir, '', profDir);
    const form = await createSubmissionForm(maker, token, 'Reindexed');
    await stopChild(maker, stopGrace());
    log(`seeding ${REINDEX_COUNT.toLocaleString('en-US')} submissions into form ${form.id}`);
    const seeded = await runSeeder(dbFile, form.id, REINDEX_COUNT);
    const service = await startService('service (SQLite, reindex)', dataDir, '', profDir);
    const read = `${service.url}${API}/forms/${form.id}?withFields=true`;
    const found = async () =>
      (
        await getJson<{ total: number }>(
          `${service.url}${API}/forms/${form.id}/submissions?keyword=${seeded.keyword}&pageSize=1`,
          auth,
        )
      ).body.total;
    const before = await found();
    if (before !== seeded.keywordMatches)
      throw new Error(`the keyword finds ${before} before the delete, the seeder made ${seeded.keywordMatches}`);
    const quiet = readWhile(read, auth, 5);
    await quiet.done;
    const jobs = new Database(dbFile, { readonly: true });
    const state = jobs.prepare("SELECT state FROM jobs WHERE kind = 'submissions.reindex' ORDER BY id DESC LIMIT 1");
    // The comments field holds the keyword's words: its delete leaves none to find.
    const busy = readWhile(read, auth, 3600);
    const start = monotonicMicros();
    const res = await fetch(`${service.url}${API}/forms/${form.id}/fields/${form.ids.comments}`, {
      method: 'DELETE',
      headers: auth,
    });
    if (res.status !== 200) throw new Error(`the field's delete: HTTP ${res.status}: ${await res.text()}`);
    const deleted = monotonicMicros();
    let last: string | undefined;
    while ((last = (state.get() as { state: string } | undefined)?.state) !== 'done') {
      if (last === 'failed') throw new Error('the reindex job failed');
      await new Promise((r) => setTimeout(r, 50));
    }
    const end = monotonicMicros();
    busy.stop();
    await busy.done;
    jobs.close();
    const after = await found();
    await stopChild(service, stopGrace());
    if (after !== 0) throw new Error(`the keyword still finds ${after} submissions after the reindex`);
    const seconds = (end - start) / 1e6;
    const q = (samples: number[]) => {
      const { p50, p99 } = percentiles(samples);
      const max = samples.reduce((m, v) => Math.max(m, v), 0);
      return `${p50.toFixed(1)} / ${p99.toFixed(1)} / ${max.toFixed(1)}`;
    };
    const rate = (samples: number[], s: number) => Math.round(samples.length / s).toLocaleString('en-US');
    process.stdout.write(
      `\nReindex: a field deleted from a form of ${REINDEX_COUNT.toLocaleString('en-US')} submissions (SQLite), the service's own worker; ` +
        `the form read on ${CONNECTIONS} connections before and during it:\n\n` +
        '| | value |\n|---|---:|\n' +
        `| the delete's answer | ${((deleted - start) / 1000).toFixed(1)} ms |\n` +
        `| from the delete to the reindex's end | ${seconds.toFixed(1)} s |\n` +
        `| rows reindexed a second | ${Math.round(REINDEX_COUNT / seconds).toLocaleString('en-US')} |\n` +
        `| the form read before: req/s; p50 / p99 / max ms | ${rate(quiet.samples, 5)}; ${q(quiet.samples)} |\n` +
        `| the form read during: req/s; p50 / p99 / max ms | ${rate(busy.samples, seconds)}; ${q(busy.samples)} |\n` +
        `| keyword "${seeded.keyword}" found before / after | ${before.toLocaleString('en-US')} / ${after} |\n`,
    );
    if (CPU_PROF)
      process.stdout.write(`\n${exportProfile({ child: service, window: { label: 'reindex', start, end } })}\n`);
  });
}

async function main(): Promise<number> {
  if (ONLY_FILES) return filesOnly();
  if (ONLY_DOCMERGE) return docmergeOnly();
  if (ONLY_REINDEX) return reindexOnly();
  if (ONLY_EVENTS) return sectionOnly(eventsSection, eventReport);
  if (ONLY_PUBLIC) return publicOnly();
  if (ONLY_PG) return sectionOnly(pgSection, pgReport);
  if (ONLY_SCALE) return runScaleBench();
  const tmp = mkdtempSync(join(tmpdir(), 'formwork-bench-'));
  temporary.push(tmp);
  const dataDir = join(tmp, 'data');
  const dbFile = join(dataDir, 'formwork.db');
  const profDir = join(tmp, 'profile');
  mkdirSync(profDir);
  const measured: Measured[] = [];
  const services: Child[] = [];
  let seeded: SeedResult | undefined;
  let profileReport: string | undefined;
  let fileRows: FileRow[] = [];
  let events: EventResult | undefined;
  let exported: ExportResult | undefined;
  const exportRuns: ExportResult[] = [];
  let pgResult: PgSectionResult | undefined;
  let failed = false;
  try {
    log(`data in ${dataDir}`);
    const token = await createBenchAccount(dataDir);
    const auth = { authorization: `Bearer ${token}` };

    // 1. Forms, on SQLite, next to the constant route.
    const service = await startService('service (SQLite)', dataDir, '', profDir);
    services.push(service);
    if (!ONLY_EXPORT) {
      const constant = startChild('constant', ['--import', 'tsx', 'bench/constant-server.ts'], {}, await freePort());
      await waitReady(constant, '/');
      const ceilingScenario: Scenario = {
        name: 'constant route (ceiling)',
        url: constant.url,
        child: constant,
        requests: [{ method: 'GET', path: '/' }],
      };
      if (ONLY_POST) measured.push(await measure(ceilingScenario));
      else await formsScenarios(constant, ceilingScenario);
      await stopChild(constant, 5_000);
    }
    async function formsScenarios(constant: Child, ceilingScenario: Scenario): Promise<void> {
      log(`seeding ${FORMS} forms of ${FIELDS_PER_FORM} fields through POST ${API}/forms`);
      const seedStart = Date.now();
      const ids = await seedForms(service.url, token, FORMS);
      log(`seeded in ${((Date.now() - seedStart) / 1000).toFixed(1)} s`);
      await checkResponses(service, token, ids[0]!);

      const bytesOf = async (path: string) =>
        (await (await fetch(`${service.url}${API}${path}`, { headers: auth })).arrayBuffer()).byteLength;
      const formBytes = await bytesOf(`/forms/${ids[0]}?withFields=true`);
      const listBytes = await bytesOf('/forms?pageSize=100');
      const scenarios: Scenario[] = [
        ceilingScenario,
        {
          name: `constant route, ${(formBytes / 1024).toFixed(1)} KB body (the form read's size)`,
          url: constant.url,
          child: constant,
          requests: [{ method: 'GET', path: `/sized?bytes=${formBytes}` }],
        },
        {
          name: 'GET /forms/{id}?withFields=true',
          url: service.url,
          child: service,
          headers: auth,
          // Every id once, in an order of their own; each connection cycles through the list.
          requests: shuffled(ids).map((id) => ({ method: 'GET', path: `${API}/forms/${id}?withFields=true` })),
        },
        {
          name: `constant route, ${(listBytes / 1024).toFixed(1)} KB body (the list page's size)`,
          url: constant.url,
          child: constant,
          requests: [{ method: 'GET', path: `/sized?bytes=${listBytes}` }],
        },
        {
          name: 'GET /forms?pageSize=100',
          url: service.url,
          child: service,
          headers: auth,
          requests: [{ method: 'GET', path: `${API}/forms?pageSize=100` }],
          minBytes: listBytes,
        },
      ];
      for (const scenario of scenarios) measured.push(await measure(scenario));
    }

    if (!ONLY_FORMS) {
      // 2. Submissions written, on SQLite. The seeder's rows are checked against the service's first.
      const postForm = await createSubmissionForm(service, token, 'Bench submissions (POST)');
      const bigForm = await createSubmissionForm(service, token, 'Bench submissions (seeded)');
      for (let i = 0; i < 20; i++) {
        const { n, id } = await postOne(service, token, postForm.id, postForm.ids);
        const problems = compareWithService(dbFile, id, submissionInput(n, postForm.ids));
        if (problems.length > 0) {
          throw new Error(
            `bench/seed-submissions.ts no longer writes what the service writes (submission ${id}):\n  ${problems.join('\n  ')}`,
          );
        }
      }
      log('the seeder builds the same rows as the service for 20 submissions');
      if (!ONLY_EXPORT) {
        const before = await sharedCreates(service);
        measured.push(
          await measure({
            ...(await postScenario('POST /forms/{id}/submissions (SQLite)', service, token, postForm.id, postForm.ids)),
            target: SQLITE_POST_TARGET,
          }),
        );
        log(
          `POST /forms/{id}/submissions (SQLite): ${batchesSince(before, await sharedCreates(service), 'batches of the create thread')}`,
        );
      }
      await stopChild(service, stopGrace());
      if (!ONLY_POST) await readsExportAndTheRest(bigForm.id);
    } else {
      await stopChild(service, stopGrace());
    }
    async function readsExportAndTheRest(bigFormId: number): Promise<void> {
      // 3. Submissions read: seed straight into the file, then a fresh service over it.
      log(
        `seeding ${SEED_COUNT.toLocaleString('en-US')} submissions into form ${bigFormId} with bench/seed-submissions.ts`,
      );
      seeded = await runSeeder(dbFile, bigFormId, SEED_COUNT);
      if (!ONLY_EXPORT) {
        const reader = await startService('service (SQLite, seeded)', dataDir, '', profDir);
        services.push(reader);
        for (const scenario of await readScenarios(reader, token, dbFile, seeded))
          measured.push(await measure(scenario));
        await stopChild(reader, stopGrace());
      }

      // 7. Export, on a fresh child so that its idle and peak memory are the export's own.
      for (let run = 0; run < EXPORT_RUNS; run++) {
        const exporter = await startService('service (SQLite, export)', dataDir, '', profDir);
        services.push(exporter);
        const result = await measureExport(exporter, token, seeded);
        await stopChild(exporter, stopGrace());
        exportRuns.push(result);
        if (!exported || overIdle(result) > overIdle(exported)) exported = result;
      }

      if (!ONLY_EXPORT) {
        // 4. Submissions written, on PostgreSQL, next to pgbench.
        if (PG_ENABLED) pgResult = await pgSection(tmp, profDir, services, measured);
        else log('BENCH_PG_URL=off: PostgreSQL skipped');

        // 5. Files.
        fileRows = await filesSection(tmp, profDir);

        // 6. Events (their rows go in their own table, not the main one).
        events = await eventsSection(tmp, profDir, services, []);
      }
    }
  } catch (error) {
    log(`FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    failed = true;
  } finally {
    await Promise.all(children.map((c) => stopChild(c, stopGrace())));
    await dropPgDatabases();
    if (CPU_PROF && measured.length > 0) profileReport = profileOf(services, measured);
    if (CPU_PROF && exported) profileReport = [profileReport, exportProfile(exported)].filter(Boolean).join('\n\n');
    if (CPU_PROF && process.env.BENCH_KEEP_PROFILES)
      cpSync(profDir, process.env.BENCH_KEEP_PROFILES, { recursive: true });
    rmSync(tmp, { recursive: true, force: true });
  }
  if (measured.length === 0 && !exported) return 1;

  const sections = [
    !ONLY_EXPORT && !ONLY_POST && `${FORMS} forms x ${FIELDS_PER_FORM} fields on SQLite`,
    !ONLY_FORMS &&
      !ONLY_EXPORT &&
      `POSTs of a ${SUBMISSION_FIELD_COUNT}-field form on SQLite${PG_ENABLED && !ONLY_POST ? ' and PostgreSQL' : ''}`,
    !ONLY_FORMS &&
      !ONLY_POST &&
      `${ONLY_EXPORT ? 'the export' : 'reads and the export'} of one form with ${(seeded?.count ?? SEED_COUNT).toLocaleString('en-US')} submissions on SQLite`,
  ].filter(Boolean);
  const lines = [
    '',
    `Formwork benchmark, Node ${process.version}, ${WARMUP} s warm-up + ${DURATION} s measured per scenario: ${sections.join('; ')}`,
    '',
  ];
  if (measured.length > 0) lines.push(table(measured), '');
  const named = (prefix: string) => measured.find((m) => m.scenario.name.startsWith(prefix));
  const ceiling = named('constant route (ceiling)');
  const sameSize = named('constant route, ') && measured.find((m) => m.scenario.name.includes("the form read's size"));
  const read = named('GET /forms/{id}?withFields=true');
  const listSize = measured.find((m) => m.scenario.name.includes("the list page's size"));
  const list = named('GET /forms?pageSize=100');
  const rate = (m: Measured) => m.result.requests.mean;
  if (ceiling && sameSize && read) {
    lines.push(
      `form read reaches ${((100 * rate(read)) / rate(ceiling)).toFixed(1)}% of the constant route, ` +
        `${((100 * rate(read)) / rate(sameSize)).toFixed(1)}% of a constant route with a body of its size (target >= 50%)`,
    );
  }
  if (ceiling && listSize && list) {
    lines.push(
      `forms list reaches ${((100 * rate(list)) / rate(ceiling)).toFixed(1)}% of the constant route, ` +
        `${((100 * rate(list)) / rate(listSize)).toFixed(1)}% of a constant route with a body of its size (target >= 25%)`,
    );
  }
  if (seeded) {
    lines.push(
      `seeding: ${seeded.count.toLocaleString('en-US')} submissions in ${seeded.seconds.toFixed(1)} s ` +
        `(${Math.round(seeded.count / seeded.seconds).toLocaleString('en-US')}/s); keyword "${seeded.keyword}" matches ` +
        `${seeded.keywordMatches.toLocaleString('en-US')}, the field search ${seeded.criteriaMatches.toLocaleString('en-US')}`,
    );
  }
  if (exported) lines.push(exportReport(exported, exportRuns));
  const target = targets(measured);
  if (target.length > 0) lines.push('targets:', ...target);
  lines.push(`service peak RSS (VmHWM): ${services.map((s) => `${s.name} ${s.peak ?? 'unknown'}`).join('; ')}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  if (pgResult) process.stdout.write(`${pgReport(pgResult)}\n`);
  if (fileRows.length > 0) process.stdout.write(`${fileReport(fileRows)}\n`);
  if (events) process.stdout.write(`${eventReport(events)}\n`);
  if (profileReport) process.stdout.write(`\n${profileReport}\n`);

  const problems = [
    ...measured.flatMap((m) => m.problems.map((p) => `${m.scenario.name}: ${p}`)),
    ...(events?.problems.map((p) => `events: ${p}`) ?? []),
    ...(exported?.problems.map((p) => `export: ${p}`) ?? []),
    ...(pgResult?.problems.filter((p) => p.startsWith('pgbench')) ?? []),
  ];
  if (problems.length > 0) {
    process.stderr.write(
      `\nFAILED: responses other than expected during the run:\n${problems.map((p) => `  ${p}`).join('\n')}\n`,
    );
    return 1;
  }
  return failed ? 1 : 0;
}

// Whatever happens, the process ends in bounded time: a watchdog on the whole run.
// The events section: three POST runs, the fixed-rate run and up to two drains of five minutes.
const EVENTS_S = 4 * (WARMUP + DURATION + 15) + 2 * 300;
const RUNS = 5 + 6 + (PG_ENABLED ? 6 : 1);
// The export: at worst 5,000 rows a second.
const EXPORT_S = SEED_COUNT / 5000;
// The file section: five service children, each moving its file 2 x 4 times at a few MB/s at worst.
const FILE_SECTION_S = 5 * (30 + (8 * LARGE_FILE_MB) / 5);
const limitMs = ONLY_PG
  ? (180 + 6 * (WARMUP + DURATION + 15)) * 1000
  : ONLY_PUBLIC || ONLY_POST
    ? (120 + 3 * (WARMUP + DURATION + 15)) * 1000
    : ONLY_FILES
      ? FILE_SECTION_S * 1000
      : ONLY_EVENTS
        ? (60 + EVENTS_S) * 1000
        : (300 + RUNS * (WARMUP + DURATION + 15) + 120 + SEED_COUNT / 1000 + EXPORT_S + FILE_SECTION_S + EVENTS_S) *
          1000;
const watchdog = setTimeout(() => {
  log(`gave up after ${limitMs / 1000} s`);
  killAll();
  void Promise.race([dropPgDatabases(), new Promise((r) => setTimeout(r, 10_000))]).then(() => process.exit(1));
}, limitMs);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killAll();
    void Promise.race([dropPgDatabases(), new Promise((r) => setTimeout(r, 10_000))]).then(() => process.exit(130));
  });
}

const code = await main();
clearTimeout(watchdog);
// The sections remove their own folders; wrk's scripts (load) last the whole run.
removeTemporary();
process.exitCode = code;
// Nothing should be left running; if something is, do not hang on it.
setTimeout(() => process.exit(code), 2000).unref();
