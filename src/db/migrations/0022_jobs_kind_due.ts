import type { Kysely } from 'kysely';

/**
 * A worker claims the due jobs of each kind in run_at order. Through jobs_kind_state (kind,
 * state) the order needed a sort of every queued job of the kind, so SQLite's planner, which
 * keeps no statistics, read jobs_due (state, run_at, id) instead, past a backlog of other
 * kinds: 13 ms a claim behind 20,000 waiting webhook deliveries. This index gives each kind
 * its due jobs in order, and still serves what looked jobs up by kind alone.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('jobs_kind_due').on('jobs').columns(['kind', 'state', 'run_at', 'id']).execute();
  await db.schema.dropIndex('jobs_kind_state').execute();
}
