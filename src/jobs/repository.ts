import { PostgresAdapter, sql, type Kysely } from 'kysely';
import pg from 'pg';
import type { Dialect } from '../db/dialect.js';
import type { Database } from '../db/schema.js';
import { transact, type Executor } from '../db/transaction.js';

/** The PostgreSQL channel that a committed enqueue notifies, so that workers of every process wake at once. */
const CHANNEL = 'formwork_jobs';

export interface NewJobRow {
  kind: string;
  payload: string;
  runAt: number;
  maxAttempts: number;
}

export async function insertJob(db: Executor, job: NewJobRow): Promise<number> {
  const row = await db
    .insertInto('jobs')
    .values({ kind: job.kind, payload: job.payload, run_at: job.runAt, max_attempts: job.maxAttempts })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/**
 * NOTIFY inside a transaction is delivered when it commits and dropped when it rolls back:
 * exactly when a listening worker should look. SQLite has no such thing (and needs none:
 * its one connection makes a worker's claim wait for the enqueuing transaction to end).
 */
export async function notifyEnqueued(db: Executor, jobId: number): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter)
    await sql`SELECT pg_notify(${CHANNEL}, ${String(jobId)})`.execute(db);
}

/** A dedicated connection that calls onNotify with the job id of every committed enqueue; PostgreSQL only. */
export async function listenForJobs(
  databaseUrl: string,
  onNotify: (jobId: number) => void,
  onError: (error: Error) => void,
): Promise<{ close(): Promise<void> }> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
  client.on('notification', (message) => onNotify(Number(message.payload)));
  client.on('error', onError);
  await client.connect();
  try {
    await client.query(`LISTEN ${CHANNEL}`);
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
  return { close: () => client.end().catch(() => {}) };
}

export interface ClaimedJob {
  id: number;
  kind: string;
  payload: string;
  progress: string | null;
  attempts: number;
  max_attempts: number;
  runId: number;
  /** The lease token of this claim, which fences every later write of the run. */
  token: string;
}

export interface Lease {
  owner: string;
  token: string;
  until: number;
}

/**
 * Takes the oldest due queued job, if any, and logs the start of its run. PostgreSQL skips
 * rows that another worker is claiming at this moment; SQLite runs the conditional UPDATE
 * under its single write lock, so two claimers can never both match the same row.
 */
export async function claimNext(
  db: Kysely<Database>,
  dialect: Dialect,
  now: number,
  lease: Lease,
): Promise<ClaimedJob | undefined> {
  return transact(db, async (trx) => {
    const job = await trx
      .updateTable('jobs')
      .set((eb) => ({
        state: 'running',
        attempts: eb('attempts', '+', 1),
        lease_owner: lease.owner,
        lease_token: lease.token,
        lease_until: lease.until,
      }))
      .where('id', '=', (eb) =>
        eb
          .selectFrom('jobs as candidate')
          .select('candidate.id')
          .where('candidate.state', '=', 'queued')
          .where('candidate.run_at', '<=', now)
          .orderBy('candidate.run_at')
          .orderBy('candidate.id')
          .limit(1)
          .$if(dialect === 'postgres', (q) => q.forUpdate().skipLocked()),
      )
      .where('state', '=', 'queued')
      .returning(['id', 'kind', 'payload', 'progress', 'attempts', 'max_attempts'])
      .executeTakeFirst();
    if (!job) return undefined;
    const run = await trx
      .insertInto('job_runs')
      .values({
        job_id: job.id,
        attempt: job.attempts,
        worker: lease.owner,
        started_at: now,
        finished_at: null,
        outcome: null,
        error: null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return { ...job, runId: run.id, token: lease.token };
  });
}

/**
 * Puts back the jobs whose lease ran out (their worker died or hung) for any worker to
 * take, or fails those that have used every attempt; their open runs are logged as lost.
 */
export async function reclaimExpired(db: Kysely<Database>, dialect: Dialect, now: number): Promise<number[]> {
  // Nearly always there is none: a read keeps every worker from taking SQLite's write lock to find that out.
  const any = await db
    .selectFrom('jobs')
    .select('id')
    .where('state', '=', 'running')
    .where('lease_until', '<', now)
    .limit(1)
    .executeTakeFirst();
  if (!any) return [];
  return transact(db, async (trx) => {
    const expired = await trx
      .updateTable('jobs')
      .set((eb) => ({
        state: eb
          .case()
          .when('attempts', '>=', eb.ref('max_attempts'))
          .then(sql.lit<'failed' | 'queued'>('failed'))
          .else(sql.lit<'failed' | 'queued'>('queued'))
          .end(),
        finished_at: eb.case().when('attempts', '>=', eb.ref('max_attempts')).then(now).else(null).end(),
        run_at: now,
        last_error: 'The lease ran out before the run finished (the worker stopped or hung)',
        lease_owner: null,
        lease_token: null,
        lease_until: null,
      }))
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('jobs as stale')
          .select('stale.id')
          .where('stale.state', '=', 'running')
          .where('stale.lease_until', '<', now)
          .limit(100)
          .$if(dialect === 'postgres', (q) => q.forUpdate().skipLocked()),
      )
      .where('state', '=', 'running')
      .returning('id')
      .execute();
    const ids = expired.map((r) => r.id);
    if (ids.length > 0) {
      await trx
        .updateTable('job_runs')
        .set({ outcome: 'lost', finished_at: now, error: 'The lease ran out before the run finished' })
        .where('job_id', 'in', ids)
        .where('finished_at', 'is', null)
        .execute();
    }
    return ids;
  });
}

/** Saves a checkpoint and extends the lease; false when this run no longer holds the job. */
export async function saveProgress(
  db: Executor,
  jobId: number,
  token: string,
  progress: string,
  leaseUntil: number,
): Promise<boolean> {
  const result = await db
    .updateTable('jobs')
    .set({ progress, lease_until: leaseUntil })
    .where('id', '=', jobId)
    .where('state', '=', 'running')
    .where('lease_token', '=', token)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export type RunEnd =
  | { outcome: 'done' }
  | { outcome: 'failed'; error: string; retryAt: number | null }
  | { outcome: 'interrupted'; error: string };

/**
 * Records how a run ended, if the run still holds the job (a run whose lease was taken
 * over changes nothing): done, failed for good, queued again for a retry at retryAt, or,
 * when the worker stopped it, queued again at once without counting the attempt.
 */
export async function finishRun(db: Kysely<Database>, job: ClaimedJob, now: number, end: RunEnd): Promise<boolean> {
  return transact(db, async (trx) => {
    const fenced = trx
      .updateTable('jobs')
      .where('id', '=', job.id)
      .where('state', '=', 'running')
      .where('lease_token', '=', job.token);
    const cleared = { lease_owner: null, lease_token: null, lease_until: null };
    let changed;
    if (end.outcome === 'done') {
      changed = await fenced.set({ ...cleared, state: 'done', finished_at: now, last_error: null }).executeTakeFirst();
    } else if (end.outcome === 'interrupted') {
      changed = await fenced
        .set((eb) => ({
          ...cleared,
          state: 'queued',
          run_at: now,
          attempts: eb('attempts', '-', 1),
          last_error: end.error,
        }))
        .executeTakeFirst();
    } else if (end.retryAt === null) {
      changed = await fenced
        .set({ ...cleared, state: 'failed', finished_at: now, last_error: end.error })
        .executeTakeFirst();
    } else {
      changed = await fenced
        .set({ ...cleared, state: 'queued', run_at: end.retryAt, last_error: end.error })
        .executeTakeFirst();
    }
    if (Number(changed.numUpdatedRows) !== 1) return false;
    await trx
      .updateTable('job_runs')
      .set({ outcome: end.outcome, finished_at: now, error: end.outcome === 'done' ? null : end.error })
      .where('id', '=', job.runId)
      .execute();
    return true;
  });
}

/** Replaces a job's payload: for handlers that must not leave a secret behind once it is used. */
export async function replacePayload(db: Executor, jobId: number, payload: string): Promise<void> {
  await db.updateTable('jobs').set({ payload }).where('id', '=', jobId).execute();
}

/**
 * Enqueues a job of kind unless one is waiting or running, or one finished within the
 * last `everyMs`: how the worker schedules its recurring chores. Two workers checking at the
 * same moment on PostgreSQL may both insert; chores are idempotent, so that costs a run.
 */
export async function scheduleRecurring(
  db: Executor,
  kind: string,
  now: number,
  everyMs: number,
  maxAttempts: number,
): Promise<boolean> {
  const recent = await db
    .selectFrom('jobs')
    .select('id')
    .where('kind', '=', kind)
    .where((eb) => eb.or([eb('state', 'in', ['queued', 'running']), eb('finished_at', '>', now - everyMs)]))
    .limit(1)
    .executeTakeFirst();
  if (recent) return false;
  await insertJob(db, { kind, payload: '{}', runAt: now, maxAttempts });
  return true;
}

/** Deletes finished jobs (their runs go with them) in slices, so no statement holds the write lock long. */
export async function deleteFinishedBefore(db: Executor, before: number): Promise<number> {
  let total = 0;
  for (;;) {
    const result = await db
      .deleteFrom('jobs')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('jobs as old')
          .select('old.id')
          .where('old.state', 'in', ['done', 'failed'])
          .where('old.finished_at', '<', before)
          .limit(1000),
      )
      .executeTakeFirst();
    const deleted = Number(result.numDeletedRows);
    total += deleted;
    if (deleted < 1000) return total;
  }
}
