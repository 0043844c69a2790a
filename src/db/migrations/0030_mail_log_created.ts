import type { Kysely } from 'kysely';

/**
 * The mail log is pruned once a day of what is older than JOB_RETENTION_DAYS
 * (emails.prune-log): this index finds those rows without reading the whole log, which
 * holds every message's bodies.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('mail_log_created').on('mail_log').column('created_at').execute();
}
