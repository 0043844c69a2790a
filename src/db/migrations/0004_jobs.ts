import { sql, type Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * The outbox (src/jobs): one row per job, written in the transaction of the change that
 * causes it, and a log of every attempt to run it.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  // The database's own clock stamps created_at, so enqueue needs no clock of its callers.
  const nowMs =
    dialect === 'postgres'
      ? sql`(floor(extract(epoch from clock_timestamp()) * 1000)::bigint)`
      : sql`(CAST(unixepoch('subsec') * 1000 AS INTEGER))`;
  await db.schema
    .createTable('jobs')
    .$call((t) => idColumn(t, dialect))
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull().defaultTo('queued'))
    // 0 means as soon as possible; a retry moves it to the time of the next attempt.
    .addColumn('run_at', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull())
    // Set while running: which worker holds the job, the token that fences its writes, and until when.
    .addColumn('lease_owner', 'text')
    .addColumn('lease_token', 'text')
    .addColumn('lease_until', 'bigint')
    .addColumn('progress', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull().defaultTo(nowMs))
    .addColumn('finished_at', 'bigint')
    .execute();
  // Claims read due queued jobs in run_at order; reclaims read expired leases; pruning reads finished jobs.
  await db.schema.createIndex('jobs_due').on('jobs').columns(['state', 'run_at', 'id']).execute();
  await db.schema.createIndex('jobs_lease').on('jobs').columns(['state', 'lease_until']).execute();
  await db.schema.createIndex('jobs_finished').on('jobs').columns(['state', 'finished_at']).execute();
  await db.schema.createIndex('jobs_kind_state').on('jobs').columns(['kind', 'state']).execute();

  await db.schema
    .createTable('job_runs')
    .$call((t) => idColumn(t, dialect))
    .addColumn('job_id', 'integer', (c) => c.notNull().references('jobs.id').onDelete('cascade'))
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('worker', 'text', (c) => c.notNull())
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .addColumn('finished_at', 'bigint')
    // null while running; then done, failed, lost (the lease ran out) or interrupted (the worker stopped).
    .addColumn('outcome', 'text')
    .addColumn('error', 'text')
    .execute();
  await db.schema.createIndex('job_runs_job').on('job_runs').columns(['job_id', 'id']).execute();
}
