import type { Kysely } from 'kysely';

/**
 * Two changes to the outbox's indexes, both for the cost of a submission that causes jobs.
 *
 * A worker claims the due jobs of each kind in run_at order. Through jobs_kind_state (kind,
 * state) the order needed a sort of every queued job of the kind, so SQLite's planner, which
 * keeps no statistics, read jobs_due (state, run_at, id) instead, past a backlog of other
 * kinds: 13 ms a claim behind 20,000 waiting webhook deliveries. jobs_kind_due gives each
 * kind its due jobs in order, and still serves what looked jobs up by kind alone.
 *
 * jobs_lease and jobs_finished held an entry for every job, queued ones included, though
 * only running jobs have a lease and only ended ones a finish time: every enqueue wrote both
 * for nothing. Partial now, a new job writes neither. Their queries compare the column
 * (lease_until < now, finished_at < before), which implies it is not null, so both
 * databases still use them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('jobs_kind_due').on('jobs').columns(['kind', 'state', 'run_at', 'id']).execute();
  await db.schema.dropIndex('jobs_kind_state').execute();
  await db.schema.dropIndex('jobs_lease').execute();
  await db.schema
    .createIndex('jobs_lease')
    .on('jobs')
    .columns(['state', 'lease_until'])
    .where('lease_until', 'is not', null)
    .execute();
  await db.schema.dropIndex('jobs_finished').execute();
  await db.schema
    .createIndex('jobs_finished')
    .on('jobs')
    .columns(['state', 'finished_at'])
    .where('finished_at', 'is not', null)
    .execute();
}
