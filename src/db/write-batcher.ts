import { AsyncResource } from 'node:async_hooks';
import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import type { Database } from './schema.js';
import { runHot } from './hot-query.js';
import { transact, translateDbError } from './transaction.js';

// Compiled once, and run directly on SQLite (runHot): three of them run for every job.
const SAVEPOINT = CompiledQuery.raw('SAVEPOINT job');
const RELEASE = CompiledQuery.raw('RELEASE SAVEPOINT job');
const ROLLBACK_TO = CompiledQuery.raw('ROLLBACK TO SAVEPOINT job');

/**
 * Writes that the jobs of a batch leave to its end, after the last job's savepoint, under a
 * key: a later job's write of the same key replaces an earlier one's, and a job may withdraw
 * one (undefined). A job that fails takes its own back with its savepoint. Why: SQLite's FTS5
 * flushes its pending terms into a new index segment at every savepoint boundary, which made
 * each job's full-text row cost about 26 µs more and a segment of its own; at the batch's end
 * the rows of all its jobs go into one.
 */
interface Deferrals {
  batch: Map<string, (() => Promise<unknown>) | undefined>;
  job: Map<string, (() => Promise<unknown>) | undefined>;
}

const deferrals = new WeakMap<object, Deferrals>();

/**
 * Leaves write to the end of the batch whose transaction db is (undefined: withdraws this
 * key's pending write). False when db is no batch's transaction: the caller writes now.
 */
export function deferToBatchEnd(db: object, key: string, write: (() => Promise<unknown>) | undefined): boolean {
  const pending = deferrals.get(db);
  if (!pending) return false;
  pending.job.set(key, write);
  return true;
}

interface Job {
  run: (trx: Transaction<Database>) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: writes that arrive while another batch is being written wait,
 * then go into the database together, in one transaction with one savepoint each. A job
 * that fails rolls back to its savepoint and fails alone; the others commit. Each job's
 * writes are still all or nothing, and none is acknowledged before its commit. On one
 * connection every commit costs a write of the changed pages; a batch pays it once.
 * When idle a job waits only for the current turn of the event loop.
 */
export class WriteBatcher {
  private queue: Job[] = [];
  private flushing = false;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly maxBatch = 64,
  ) {}

  run<T>(job: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // Each job runs in its caller's async context (its request id: src/request-context.ts), not the batch's.
      // (runInAsyncScope rather than AsyncResource.bind, which makes a deprecation wrapper on every call in Node 20.)
      const scope = new AsyncResource('formwork.write');
      this.queue.push({
        run: (trx) => scope.runInAsyncScope(job, null, trx),
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
      try {
        await transact(this.db, async (trx) => {
          const pending: Deferrals = { batch: new Map(), job: new Map() };
          deferrals.set(trx, pending);
          for (const job of batch) {
            pending.job = new Map();
            await runHot(trx, SAVEPOINT);
            try {
              const value = await job.run(trx);
              await runHot(trx, RELEASE);
              for (const [key, write] of pending.job) pending.batch.set(key, write);
              outcomes.push({ ok: true, value });
            } catch (error) {
              await runHot(trx, ROLLBACK_TO);
              await runHot(trx, RELEASE);
              outcomes.push({ ok: false, error: translateDbError(error) });
            }
          }
          deferrals.delete(trx);
          // A failure here fails the whole batch, as a failed commit does.
          for (const write of pending.batch.values()) await write?.();
        });
      } catch (error) {
        for (const job of batch) job.reject(error);
        continue;
      }
      batch.forEach((job, i) => {
        const outcome = outcomes[i]!;
        if (outcome.ok) job.resolve(outcome.value);
        else job.reject(outcome.error);
      });
    }
    this.flushing = false;
  }
}
