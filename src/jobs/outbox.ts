import type { Executor } from '../db/transaction.js';
import type { JobKind } from './kind.js';
import { insertJob, notifyEnqueued } from './repository.js';

export interface EnqueueOptions {
  /** Epoch ms (from ctx.clock) before which the job does not run; unset means at once. */
  runAt?: number;
}

const wakeListeners = new Set<() => void>();

/** Called after every enqueue in this process; returns the function that stops it. */
export function onEnqueue(listener: () => void): () => void {
  wakeListeners.add(listener);
  return () => wakeListeners.delete(listener);
}

/**
 * Writes a job of kind, with the payload its kind declares (the retry policy comes from
 * the kind too). Given the transaction of the change that causes it, the job exists if and
 * only if that change commits. Workers of this process are woken at once: on SQLite their
 * claim waits for the transaction (one connection); on PostgreSQL they are notified again
 * when it commits, as are workers of other processes.
 */
export async function enqueue<P>(
  db: Executor,
  kind: JobKind<P>,
  payload: NoInfer<P>,
  options: EnqueueOptions = {},
): Promise<number> {
  const id = await insertJob(db, {
    kind: kind.name,
    payload: JSON.stringify(payload ?? null),
    runAt: options.runAt ?? 0,
    maxAttempts: kind.maxAttempts,
  });
  await notifyEnqueued(db, id);
  for (const listener of wakeListeners) listener();
  return id;
}
