/**
 * npm run bench: throughput of the form read and list routes against the machine's ceiling.
 *
 * Starts the real service (node --import tsx src/cli.ts serve) on a fresh SQLite database
 * seeded with 1,000 forms of 20 fields, and a plain Fastify server with one constant route,
 * both as child processes on 127.0.0.1, then loads each with autocannon (warm-up, then a
 * measured run) and prints one markdown table.
 *
 * Environment:
 *   BENCH_DURATION     seconds of each measured run (default 10)
 *   BENCH_WARMUP       seconds of warm-up before each measured run (default 3; 0 skips it)
 *   BENCH_CONNECTIONS  concurrent connections (default 10)
 *   BENCH_CPU_PROF=1   run the service with --cpu-prof and print where its time went
 *                      during each measured run
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { monotonicMicros, summarizeProfile, type Window } from './profile.js';
import { API, createBenchAccount, seedForms } from './seed.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const HOST = '127.0.0.1';
const FORMS = 1000;
const FIELDS_PER_FORM = 20;

function intEnv(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be a whole number >= ${min}, got "${raw}"`);
  return value;
}

const DURATION = intEnv('BENCH_DURATION', 10, 1);
const WARMUP = intEnv('BENCH_WARMUP', 3, 0);
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 10, 1);
const CPU_PROF = process.env.BENCH_CPU_PROF === '1';

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

// ---------------------------------------------------------------------------------------
// Child processes

interface Child {
  name: string;
  proc: ChildProcess;
  url: string;
}

const children: Child[] = [];
/** Temporary directories to remove however the run ends. */
const temporary: string[] = [];

function killAll(): void {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
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
function forward(name: string, stream: NodeJS.ReadableStream | null): void {
  if (!stream) return;
  let buffered = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) process.stderr.write(`[${name}] ${line}\n`);
  });
  stream.on('end', () => {
    if (buffered !== '') process.stderr.write(`[${name}] ${buffered}\n`);
  });
}

function startChild(name: string, args: string[], env: Record<string, string>, port: number): Child {
  const proc = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), HOST },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  forward(name, proc.stdout);
  forward(name, proc.stderr);
  const child = { name, proc, url: `http://${HOST}:${port}` };
  children.push(child);
  return child;
}

/** Polls `path` until it answers 200; fails if the child exits or `timeoutMs` passes. */
async function waitReady(child: Child, path: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
      throw new Error(`${child.name} exited before it was ready (code ${child.proc.exitCode}, signal ${child.proc.signalCode})`);
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
  const exited = once(proc, 'exit');
  proc.kill('SIGTERM');
  const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), graceMs).unref());
  if ((await Promise.race([exited, timer])) === 'timeout') {
    log(`${child.name} did not stop within ${graceMs} ms; killing it`);
    proc.kill('SIGKILL');
    await exited;
  }
}

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

// ---------------------------------------------------------------------------------------
// Load

interface Scenario {
  name: string;
  url: string;
  headers?: Record<string, string>;
  requests: autocannon.Request[];
}

interface Measured {
  scenario: Scenario;
  result: autocannon.Result;
  window: Window;
  problems: string[];
}

async function load(scenario: Scenario, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: scenario.url,
    connections: CONNECTIONS,
    duration: seconds,
    timeout: 10,
    headers: scenario.headers ?? {},
    requests: scenario.requests,
  });
}

function problemsOf(phase: string, r: autocannon.Result): string[] {
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
  return problems;
}

async function measure(scenario: Scenario): Promise<Measured> {
  const problems: string[] = [];
  if (WARMUP > 0) {
    log(`${scenario.name}: warm-up ${WARMUP} s`);
    problems.push(...problemsOf('warm-up', await load(scenario, WARMUP)));
  }
  log(`${scenario.name}: measuring ${DURATION} s with ${CONNECTIONS} connections`);
  const start = monotonicMicros();
  const result = await load(scenario, DURATION);
  const window = { label: scenario.name, start, end: monotonicMicros() };
  problems.push(...problemsOf('measured run', result));
  return { scenario, result, window, problems };
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
    throw new Error(`GET /forms?pageSize=100: HTTP ${list.status}, ${page.forms?.length ?? 'no'} forms of ${page.total ?? '?'}`);
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
// Report

const fmt = (n: number, digits: number) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** autocannon keeps latencies in whole milliseconds. */
const ms = (n: number) => (n < 1 ? '<1' : fmt(n, 0));

function table(measured: Measured[]): string {
  const ceiling = measured[0]!.result.requests.mean;
  const rows = measured.map(({ scenario, result }) => {
    const share = ceiling > 0 ? `${fmt((100 * result.requests.mean) / ceiling, 1)}%` : 'n/a';
    return `| ${scenario.name} | ${fmt(result.requests.mean, 0)} | ${ms(result.latency.p50)} | ${ms(result.latency.p99)} | ${share} | ${result.non2xx} |`;
  });
  return [
    '| scenario | req/s (mean) | p50 ms | p99 ms | % of ceiling | non-2xx |',
    '|---|---:|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const tmp = mkdtempSync(join(tmpdir(), 'formwork-bench-'));
  temporary.push(tmp);
  const dataDir = join(tmp, 'data');
  const profDir = join(tmp, 'profile');
  mkdirSync(profDir);
  let measured: Measured[] = [];
  let rss = 'unknown';
  let profileReport: string | undefined;
  try {
    log(`data in ${dataDir}`);
    const token = await createBenchAccount(dataDir);

    const service = startChild(
      'service',
      [...(CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []), '--import', 'tsx', 'src/cli.ts', 'serve'],
      { DATA_DIR: dataDir, LOG_LEVEL: 'warn', DATABASE_URL: '', PUBLIC_URL: '' },
      await freePort(),
    );
    const constant = startChild('constant', ['--import', 'tsx', 'bench/constant-server.ts'], {}, await freePort());
    await Promise.all([waitReady(service, '/healthz'), waitReady(constant, '/')]);

    log(`seeding ${FORMS} forms of ${FIELDS_PER_FORM} fields through POST ${API}/forms`);
    const seedStart = Date.now();
    const ids = await seedForms(service.url, token, FORMS);
    log(`seeded in ${((Date.now() - seedStart) / 1000).toFixed(1)} s`);
    await checkResponses(service, token, ids[0]!);

    const auth = { authorization: `Bearer ${token}` };
    const formBytes = (await (await fetch(`${service.url}${API}/forms/${ids[0]}?withFields=true`, { headers: auth })).arrayBuffer()).byteLength;
    const scenarios: Scenario[] = [
      { name: 'constant route (ceiling)', url: constant.url, requests: [{ method: 'GET', path: '/' }] },
      {
        name: `constant route, ${(formBytes / 1024).toFixed(1)} KB body (the form read's size)`,
        url: constant.url,
        requests: [{ method: 'GET', path: `/sized?bytes=${formBytes}` }],
      },
      {
        name: 'GET /forms/{id}?withFields=true',
        url: service.url,
        headers: auth,
        // Every id once, in an order of their own; each connection cycles through the list.
        requests: shuffled(ids).map((id) => ({ method: 'GET', path: `${API}/forms/${id}?withFields=true` })),
      },
      { name: 'GET /forms?pageSize=100', url: service.url, headers: auth, requests: [{ method: 'GET', path: `${API}/forms?pageSize=100` }] },
    ];
    for (const scenario of scenarios) measured.push(await measure(scenario));

    rss = peakRss(service.proc.pid);
  } catch (error) {
    log(`FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    measured = [];
  } finally {
    await Promise.all(children.map((c) => stopChild(c, CPU_PROF ? 30_000 : 5_000)));
    if (CPU_PROF && measured.length > 0) {
      const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
      profileReport = file
        ? measured
            .filter((m) => !m.scenario.name.startsWith('constant'))
            .map((m) => summarizeProfile(join(profDir, file), ROOT, m.window))
            .join('\n\n')
        : 'no .cpuprofile was written (did the service exit cleanly?)';
    }
    rmSync(tmp, { recursive: true, force: true });
  }
  if (measured.length === 0) return 1;

  const [ceiling, sameSize, read] = measured;
  const share = (100 * read!.result.requests.mean) / ceiling!.result.requests.mean;
  const sizeShare = (100 * read!.result.requests.mean) / sameSize!.result.requests.mean;
  const lines = [
    '',
    `Formwork benchmark: ${FORMS} forms x ${FIELDS_PER_FORM} fields on SQLite, ${CONNECTIONS} connections, ` +
      `${WARMUP} s warm-up + ${DURATION} s measured per scenario, Node ${process.version}`,
    '',
    table(measured),
    '',
    `form read reaches ${share.toFixed(1)}% of the constant route (target >= 50%), ` +
      `${sizeShare.toFixed(1)}% of a constant route with a body of its size`,
    `service peak RSS (VmHWM): ${rss}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (profileReport) process.stdout.write(`\n${profileReport}\n`);

  const problems = measured.flatMap((m) => m.problems.map((p) => `${m.scenario.name}: ${p}`));
  if (problems.length > 0) {
    process.stderr.write(`\nFAILED: responses other than 2xx or errors during the run:\n${problems.map((p) => `  ${p}`).join('\n')}\n`);
    return 1;
  }
  return 0;
}

// Whatever happens, the process ends in bounded time: a watchdog on the whole run.
const limitMs = (120 + 3 * (WARMUP + DURATION + 10)) * 1000;
const watchdog = setTimeout(() => {
  log(`gave up after ${limitMs / 1000} s`);
  killAll();
  process.exit(1);
}, limitMs);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killAll();
    process.exit(130);
  });
}

const code = await main();
clearTimeout(watchdog);
process.exitCode = code;
// Nothing should be left running; if something is, do not hang on it.
setTimeout(() => process.exit(code), 2000).unref();
