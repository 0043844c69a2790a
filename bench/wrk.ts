/**
 * wrk (Debian's package, written in C) as the load generator of the scenarios whose rate is a
 * share of pgbench's. pgbench's client is C and takes a few tens of µs of CPU a transaction;
 * autocannon's, in this Node process, took about 280 µs a request on two cores, CPU that the
 * service then did not have. A ratio between the two is fair only when both sides' load costs
 * about as little, so those scenarios are loaded by wrk when it is installed (BENCH_LOADER
 * says which; the ceiling-relative scenarios keep autocannon on both of their sides).
 *
 * Each request's body is one of the bodies given, in turn, with every `__N__` in it replaced
 * by a string unique to the request (so that a unique field stays unique). The result has the
 * shape of autocannon's (the fields the benchmark reads), with latencies from wrk's own
 * histogram (µs resolution).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type autocannon from 'autocannon';

export const WRK = '/usr/bin/wrk';

/** Whether wrk can run here. */
export function wrkAvailable(): boolean {
  return spawnSync(WRK, ['--version'], { stdio: 'ignore' }).error === undefined;
}

export interface WrkLoad {
  url: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  /** Bodies sent in turn; `__N__` in them becomes a string of the request's own. */
  bodies: string[];
  connections: number;
  seconds: number;
  /** Where the Lua script is written. */
  dir: string;
}

export interface WrkResult {
  result: autocannon.Result;
  latency: { p50: number; p95: number; p99: number };
}

/** A Lua string literal of s (long brackets cannot hold every text; escapes can). */
const luaString = (s: string) =>
  `"${s.replace(/[\\"\n\r\0]/g, (c) => ({ '\\': '\\\\', '"': '\\"', '\n': '\\n', '\r': '\\r', '\0': '\\0' })[c]!)}"`;

function script(load: WrkLoad, run: string): string {
  const headers = Object.entries(load.headers)
    .map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`)
    .join(', ');
  return `
local bodies = { ${load.bodies.map(luaString).join(',\n')} }
local headers = { ${headers} }
local threads = {}
local n = 0
local id = 0
function setup(thread)
  id = id + 1
  thread:set("tid", id)
  table.insert(threads, thread)
end
codes = ""
count = 0
function request()
  n = n + 1
  local body = string.gsub(bodies[(n % #bodies) + 1], "__N__", "${run}t" .. tid .. "n" .. n)
  return wrk.format(${luaString(load.method)}, ${luaString(load.path)}, headers, body)
end
function response(status, headers, body)
  if status < 200 or status > 299 then
    count = count + 1
    if count <= 200 then codes = codes .. status .. "," end
  end
end
function done(summary, latency, requests)
  local all = ""
  for _, t in ipairs(threads) do all = all .. t:get("codes") end
  io.write(string.format("WRK_JSON {\\"requests\\":%d,\\"bytes\\":%d,\\"duration_us\\":%d,\\"connect\\":%d,\\"read\\":%d,\\"write\\":%d,\\"status\\":%d,\\"timeout\\":%d,\\"p50\\":%d,\\"p95\\":%d,\\"p99\\":%d,\\"mean\\":%f,\\"codes\\":\\"%s\\"}\\n",
    summary.requests, summary.bytes, summary.duration, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.mean, all))
end
`;
}

interface WrkSummary {
  requests: number;
  bytes: number;
  duration_us: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  codes: string;
}

/** Runs wrk with two threads (as pgbench runs with -j 2) for load.seconds. */
export async function runWrk(load: WrkLoad): Promise<WrkResult> {
  const file = join(load.dir, `wrk-${randomBytes(4).toString('hex')}.lua`);
  writeFileSync(file, script(load, randomBytes(4).toString('hex')));
  const threads = Math.min(2, load.connections);
  const proc = spawn(
    WRK,
    [
      '-t',
      String(threads),
      '-c',
      String(load.connections),
      '-d',
      `${load.seconds}s`,
      '--timeout',
      '10s',
      '-s',
      file,
      load.url,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number>((resolve) => proc.on('close', (c) => resolve(c ?? 1)));
  const line = /^WRK_JSON (.*)$/m.exec(out);
  if (code !== 0 || !line) throw new Error(`wrk exited with ${code}: ${out.slice(-2000)}`);
  const s = JSON.parse(line[1]!) as WrkSummary;
  const statusCodeStats: Record<string, { count: number }> = {};
  for (const c of s.codes.split(',').filter(Boolean))
    statusCodeStats[c] = { count: (statusCodeStats[c]?.count ?? 0) + 1 };
  const ok = s.requests - s.status;
  const seconds = s.duration_us / 1e6;
  const ms = (us: number) => us / 1000;
  const histogram = (mean: number, total: number): autocannon.Histogram => ({
    average: mean,
    mean,
    stddev: Number.NaN,
    min: Number.NaN,
    max: Number.NaN,
    total,
    p50: Number.NaN,
    p90: Number.NaN,
    p97_5: Number.NaN,
    p99: Number.NaN,
  });
  return {
    result: {
      duration: seconds,
      errors: s.connect + s.read + s.write + s.timeout,
      timeouts: s.timeout,
      non2xx: s.status,
      resets: 0,
      '2xx': ok,
      statusCodeStats,
      latency: { ...histogram(ms(s.mean), s.requests), p50: ms(s.p50), p99: ms(s.p99), totalCount: s.requests },
      requests: { ...histogram(s.requests / seconds, s.requests), sent: s.requests },
      throughput: histogram(s.bytes / seconds, s.bytes),
    },
    latency: { p50: ms(s.p50), p95: ms(s.p95), p99: ms(s.p99) },
  };
}
