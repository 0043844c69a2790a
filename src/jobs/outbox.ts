import type { Executor } from '../db/transaction.js';
import { currentRequestId } from '../request-context.js';
import type { JobKind } from './kind.js';
import { insertJobs, waitingPayloads, type NewJobRow } from './repository.js';

export interface EnqueueOptions {
  /** Epoch ms (from ctx.clock) before which the job does not run; unset means at once. */
  runAt?: number;
  /**
   * The enqueuing request's id, for work that has it at hand outside the request-id context
   * (src/request-context.ts); unset, the context's is read.
   */
  requestId?: string;
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
  const requestId = options.requestId ?? currentRequestId();
  const [id] = await insertJobs(db, [jobRow(kind as JobKind<unknown>, payload, requestId, options.runAt)]);
  wakeWorkers();
  return id!;
}

/** One job to enqueue with others (enqueueAll); made by jobOf, which checks the payload against its kind. */
export interface JobRequest {
  kind: JobKind<unknown>;
  payload: unknown;
}

export function jobOf<P>(kind: JobKind<P>, payload: NoInfer<P>): JobRequest {
  return { kind: kind as JobKind<unknown>, payload };
}

/**
 * enqueue for several jobs at once: one INSERT for all of them (the events of a submission
 * cause a job per webhook and email, written in the submission's transaction).
 */
export async function enqueueAll(db: Executor, jobs: readonly JobRequest[]): Promise<number[]> {
  if (jobs.length === 0) return [];
  const ids = await insertJobs(db, jobRowsOf(jobs, currentRequestId()));
  // One notification (insertJobs) wakes the listening workers; each claim takes every due job.
  wakeWorkers();
  return ids;
}

/**
 * enqueueAll for jobs that do the same whenever they run, from what is stored then (a form's
 * reindex reads its fields as they are when it runs): a job of the same kind and payload that
 * waits, not yet begun, does the work for this change too, and is not enqueued again. Five
 * fields deleted one after another then make one or two passes over the form, not five.
 */
export async function enqueueAllOnce(db: Executor, jobs: readonly JobRequest[]): Promise<number[]> {
  const fresh: JobRequest[] = [];
  for (const kind of new Set(jobs.map((j) => j.kind))) {
    const ofKind = jobs.filter((j) => j.kind === kind);
    const waiting = await waitingPayloads(
      db,
      kind.name,
      ofKind.map((j) => payloadText(j.payload)),
    );
    const seen = new Set<string>();
    for (const job of ofKind) {
      const text = payloadText(job.payload);
      if (waiting.has(text) || seen.has(text)) continue;
      seen.add(text);
      fresh.push(job);
    }
  }
  return enqueueAll(db, fresh);
}

const payloadText = (payload: unknown): string => JSON.stringify(payload ?? null);

/**
 * The rows of jobs due at once, for a writer that inserts them itself in the transaction of
 * the change that causes them (SQLite's create thread); requestId is the enqueuing request's.
 * The writer calls wakeWorkers once they are committed.
 */
export function jobRowsOf(jobs: readonly JobRequest[], requestId: string | undefined): NewJobRow[] {
  return jobs.map((j) => jobRow(j.kind, j.payload, requestId));
}

function jobRow(kind: JobKind<unknown>, payload: unknown, requestId: string | undefined, runAt = 0): NewJobRow {
  return { kind: kind.name, payload: payloadText(payload), runAt, maxAttempts: kind.maxAttempts, requestId };
}

/** Wakes this process's workers: jobs were enqueued. */
export function wakeWorkers(): void {
  for (const listener of wakeListeners) listener();
}
