import type { Kysely } from 'kysely';

/**
 * The request id (x-request-id) of the request whose transaction enqueued a job, so that the
 * worker's log lines for the job carry the id of the request that caused it. Null for jobs
 * enqueued outside a request (recurring chores, the CLI) and for jobs written before this.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('jobs').addColumn('request_id', 'text').execute();
}
