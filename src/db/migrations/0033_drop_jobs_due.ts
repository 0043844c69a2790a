import type { Kysely } from 'kysely';

/**
 * jobs_due (state, run_at, id) served no query that jobs_kind_due (kind, state, run_at, id)
 * does not serve better: claims read one kind's due jobs at a time (0022), and the outbox
 * gauges now read each kind's range too (outboxStats). Yet every job wrote it three times,
 * at enqueue, claim and end, each in the write transaction of a submission or of the worker
 * that shares SQLite's one writer with the API.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('jobs_due').execute();
}
