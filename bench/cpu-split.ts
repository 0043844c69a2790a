/**
 * Where a run's CPU went on the whole machine (Linux /proc): the measured service, the
 * PostgreSQL server (every backend, and through the postmaster's children's times the
 * backends that ended during the run, such as pgbench's), this bench process (the load
 * generator: autocannon in process, pgbench as a waited child), the rest, and idle. A rate
 * that is a share of pgbench's is only as fair as the CPU each side had; this says which one
 * ran out.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICK_MICROS = 10_000; // clock ticks of /proc, 100 a second on Linux

export interface CpuSnapshot {
  at: bigint;
  service: number;
  postgres: number;
  loader: number;
  busy: number;
  idle: number;
}

/** Fields after the command's ")" of /proc/<pid>/stat: utime is [11], stime [12], cutime [13], cstime [14]. */
function statFields(pid: number | 'self'): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  } catch {
    return undefined;
  }
}

const ticks = (f: string[] | undefined, ...at: number[]) =>
  f ? at.reduce((sum, i) => sum + Number(f[i]), 0) * TICK_MICROS : 0;

function postgresMicros(): number {
  let total = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let comm: string;
    try {
      comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (comm !== 'postgres') continue;
    const f = statFields(Number(name));
    // The postmaster (its parent is not a postgres) also carries the times of the backends it reaped.
    const parent = f ? Number(f[1]) : 0;
    let parentComm = '';
    try {
      parentComm = readFileSync(`/proc/${parent}/comm`, 'utf8').trim();
    } catch {
      // gone: counted as a backend
    }
    total += parentComm === 'postgres' ? ticks(f, 11, 12) : ticks(f, 11, 12, 13, 14);
  }
  return total;
}

/** CPU time (user and system, every thread) a process has used, µs; NaN where it cannot be read. */
export function processCpuMicros(pid: number | undefined): number {
  const f = pid === undefined ? undefined : statFields(pid);
  return f ? ticks(f, 11, 12) : Number.NaN;
}

export function cpuSnapshot(servicePid: number | undefined): CpuSnapshot {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal: idle and iowait are idle.
  const idle = (cpu[3]! + cpu[4]!) * TICK_MICROS;
  const busy = cpu.slice(0, 8).reduce((a, b) => a + b, 0) * TICK_MICROS - idle;
  return {
    at: process.hrtime.bigint(),
    service: processCpuMicros(servicePid),
    postgres: postgresMicros(),
    loader: ticks(statFields('self'), 11, 12, 13, 14),
    busy,
    idle,
  };
}

/** CPU µs per unit of work (a request or a transaction) between two snapshots, by whom. */
export function cpuPerUnit(before: CpuSnapshot, after: CpuSnapshot, units: number) {
  const per = (k: keyof Omit<CpuSnapshot, 'at'>) => (after[k] - before[k]) / units;
  const service = per('service');
  const postgres = per('postgres');
  const loader = per('loader');
  const busy = per('busy');
  return { service, postgres, loader, other: busy - service - postgres - loader, idle: per('idle') };
}

export type CpuPerUnit = ReturnType<typeof cpuPerUnit>;

export const cpuCells = (c: CpuPerUnit | undefined) =>
  c
    ? [c.service, c.postgres, c.loader, c.other, c.idle]
        .map((n) => (n > 0 ? Math.round(n).toString() : '0'))
        .join(' | ')
    : ' |  |  |  | ';
