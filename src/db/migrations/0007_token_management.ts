import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/** What listing personal access tokens shows without their value: a prefix and the last use. */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  // The first characters of the token, kept when it is made (the value itself is only hashed);
  // null for tokens made before this migration.
  await db.schema.alterTable('access_tokens').addColumn('token_prefix', 'text').execute();
  // Written in batches by each process (src/modules/tokens/usage.ts), never once per request.
  await db.schema.alterTable('access_tokens').addColumn('last_used_at', 'bigint').execute();
}
