import type { AppContext } from '../context.js';
import type { Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Executor } from '../db/transaction.js';

/** What a handler is told about the job it runs. */
export interface JobInfo<P = unknown> {
  id: number;
  kind: string;
  /** As given to enqueue, through JSON, and checked against its kind's schema. */
  payload: P;
  /** The last checkpoint of an earlier attempt, or undefined on a fresh start. */
  progress: unknown;
  /** 1 on the first run; interrupted runs (the worker stopped) are not counted. */
  attempt: number;
}

export interface JobTools<P = unknown> {
  /**
   * Saves progress (JSON) for a later attempt to resume from and renews the lease. Pass the
   * transaction of a batch's writes to commit the checkpoint with them: a batch is then
   * never done twice, and it fails (rolls back) if another worker has taken the job over.
   */
  checkpoint(progress: unknown, db?: Executor): Promise<void>;
  /** Replaces the job's stored payload: for handlers that must not leave a secret behind once it is used. */
  replacePayload(payload: P, db?: Executor): Promise<void>;
  /**
   * Writes to commit in the transaction that records the end of this run (with the ends of
   * other runs that finish at the same moment), whatever the run's outcome: for what an
   * attempt must leave behind, such as a delivery log row, without a write of its own. They
   * are written even when the run has lost its lease (the attempt happened); if they fail,
   * the attempt is recorded as failed without them, and retried.
   */
  atEnd(write: (trx: Transaction<Database>) => Promise<void>): void;
  /** Aborted when the worker stops (after its grace period) or the run has lost its lease. */
  signal: AbortSignal;
}

/**
 * Runs one job. Runs are at least once: a handler may run again after it did its work
 * (the process died before it was recorded), so it must be idempotent.
 */
export type JobHandler<P = unknown> = (ctx: AppContext, job: JobInfo<P>, tools: JobTools<P>) => Promise<void>;
