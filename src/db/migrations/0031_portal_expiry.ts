import type { Kysely } from 'kysely';

/**
 * Portal sign-in links and sessions are deleted once a day a day after they expired
 * (portals.prune): these indexes find them without reading every row.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('portal_signin_tokens_expires').on('portal_signin_tokens').column('expires_at').execute();
  await db.schema.createIndex('portal_sessions_expires').on('portal_sessions').column('expires_at').execute();
}
