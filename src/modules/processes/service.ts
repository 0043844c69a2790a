import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';
import { AdvisoryLifeLock, FileLifeLock, type LifeLock } from './locks.js';
import * as repo from './repository.js';

/**
 * Who is alive. Every process (serve or worker) registers a row with a new id when it
 * starts and, for as long as it runs, holds a lock that its end releases by itself (see
 * locks.ts) and writes a heartbeat. Work a process holds (an idempotency key's first
 * request, an upload being received, a temporary file being written) names that id; work
 * whose process has stopped is taken over at once instead of after a fixed wait.
 *
 * A process has stopped when its row is gone, its heartbeat is older than
 * PROCESS_TIMEOUT_SECONDS, or its lock is free. The lock makes a crash known at once (the
 * restarted process, or any other, sees it free); the heartbeat bounds what a lock cannot
 * tell (a machine cut off from PostgreSQL keeps its session until TCP gives up on it).
 * Nothing is checked on the way of a request that meets no one else's work: the checks
 * cost queries only where a request meets a claim held by another process.
 *
 * A process judged stopped that is in fact still running (hung past the timeout, its lock
 * connection dropped) loses its work to the taker, and every write of that work is fenced
 * by a per-claim token, so the late writer fails instead of writing twice.
 */
export interface Presence {
  /** This process's id (processes.id). */
  readonly id: number;
  /** Of these process ids, those that have stopped; never this process's own. */
  stopped(ids: readonly number[], db?: Executor): Promise<Set<number>>;
  /** Deletes the rows, and lock files, of processes that have stopped long enough ago. */
  reap(): Promise<void>;
  /** Stops the heartbeat and lets go of the row and the lock: the process's work is free for others. */
  close(): Promise<void>;
}

export interface PresenceOptions {
  db: Kysely<Database>;
  databaseUrl: string | undefined;
  dataDir: string;
  timeoutMs: number;
  log?: { warn(details: object, message: string): void };
}

/** What `host` records: the machine, and on Linux its boot and the pid namespace, for an operator reading the table. */
function describeHost(): string {
  const parts = [hostname()];
  try {
    parts.push(readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
    parts.push(readlinkSync('/proc/self/ns/pid'));
  } catch {
    // Not Linux: the host name says enough.
  }
  return parts.join(' ');
}

/** How a process names itself as the writer of storage's temporary files (see removeAbandonedWrites). */
export function writerName(id: number): string {
  return `p${id}`;
}

/** The process id a writer name stands for, or undefined for a name that is not one. */
export function writerProcess(writer: string | undefined): number | undefined {
  const m = writer === undefined ? null : /^p(\d{1,15})$/.exec(writer);
  return m ? Number(m[1]) : undefined;
}

/** Reaping goes with every so many heartbeats: dead rows are few and harmless meanwhile. */
const BEATS_PER_REAP = 12;

export async function startPresence(options: PresenceOptions): Promise<Presence> {
  const { db, timeoutMs } = options;
  const lock: LifeLock = options.databaseUrl
    ? new AdvisoryLifeLock(options.databaseUrl)
    : new FileLifeLock(options.dataDir);
  const host = describeHost();
  // The row first, then the lock: whoever finds a lock file finds its row (see reap).
  const id = await repo.insertProcess(db, host, process.pid);
  try {
    await lock.hold(id);
  } catch (error) {
    await repo.deleteProcess(db, id).catch(() => {});
    throw error;
  }

  async function reap(): Promise<void> {
    // Lock files are listed before rows are read: a file's process wrote its row before it.
    const files = lock.leftBehind();
    await repo.deleteStale(db, timeoutMs);
    if (files.length === 0) return;
    const rows = await repo.existingAmong(db, files);
    const orphans = files.filter((f) => !rows.has(f));
    const held = await lock.heldAmong(orphans, db);
    lock.forget(orphans.filter((f) => !held.has(f)));
  }

  let beats = 0;
  let beating: Promise<void> | undefined;
  const beat = async () => {
    try {
      await lock.keep();
      // Removed while this process could not write (hung, cut off): it comes back under the same id.
      if (!(await repo.heartbeat(db, id))) await repo.insertProcess(db, host, process.pid, id);
      if (++beats % BEATS_PER_REAP === 0) await reap();
    } catch (error) {
      options.log?.warn({ err: error, process: id }, "could not write this process's heartbeat; trying again");
    }
  };
  const timer = setInterval(
    () => {
      beating ??= beat().finally(() => (beating = undefined));
    },
    Math.max(500, Math.floor(timeoutMs / 6)),
  );
  timer.unref();

  let closing: Promise<void> | undefined;
  return {
    id,
    async stopped(ids, executor = db) {
      const others = [...new Set(ids)].filter((other) => other !== id);
      if (others.length === 0) return new Set();
      const fresh = await repo.freshAmong(executor, others, timeoutMs);
      const held = await lock.heldAmong([...fresh], executor);
      return new Set(others.filter((other) => !held.has(other)));
    },
    reap,
    close() {
      closing ??= (async () => {
        clearInterval(timer);
        await beating;
        await repo.deleteProcess(db, id).catch(() => {});
        await lock.release();
      })();
      return closing;
    },
  };
}
