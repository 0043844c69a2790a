import type { Executor } from '../db/transaction.js';
import { insertJob, notifyEnqueued } from './repository.js';

export interface NewJob {
  kind: string;
  /** Anything JSON can hold; the handler gets it back parsed. */
  payload: unknown;
  /** Epoch ms (from ctx.clock) before which the job does not run; unset means at once. */
  runAt?: number;
  /** Runs before the job is marked failed; 5 unless set. */
  maxAttempts?: number;
}

export const DEFAULT_MAX_ATTEMPTS = 5;

const wakeListeners = new Set<() => void>();

/** Called after every enqueue in this process; returns the function that stops it. */
export function onEnqueue(listener: () => void): () => void {
  wakeListeners.add(listener);
  return () => wakeListeners.delete(listener);
}

/**
 * Writes a job. Given the transaction of the change that causes it, the job exists if and
 * only if that change commits. Workers of this process are woken at once: on SQLite their
 * claim waits for the transaction (one connection); on PostgreSQL they are notified again
 * when it commits, as are workers of other processes.
 */
export async function enqueue(db: Executor, job: NewJob): Promise<number> {
  if (job.kind === '') throw new Error('enqueue: a job needs a kind');
  const maxAttempts = job.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new Error(`enqueue: maxAttempts must be a whole number of at least 1, got ${maxAttempts}`);
  const payload = JSON.stringify(job.payload ?? null);
  const id = await insertJob(db, { kind: job.kind, payload, runAt: job.runAt ?? 0, maxAttempts });
  await notifyEnqueued(db, id);
  for (const listener of wakeListeners) listener();
  return id;
}
