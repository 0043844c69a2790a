import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  // 1 when the client must send a PKCE S256 challenge with every authorization request.
  // Clients registered before this migration get it too: an admin turns it off for one
  // that cannot do PKCE (PUT /oauth-clients/{id} with requirePkce false).
  await db.schema
    .alterTable('oauth_clients')
    .addColumn('require_pkce', 'integer', (c) => c.notNull().defaultTo(1))
    .execute();
}
