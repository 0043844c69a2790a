import type { Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/** OAuth clients, grants, codes and refresh tokens; per-form permissions of members. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('oauth_clients')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('client_id', 'text', (c) => c.notNull().unique())
    .addColumn('secret_hash', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('redirect_uris', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('oauth_clients_account').on('oauth_clients').column('account_id').execute();

  // One consent of one user to one client; every code, access and refresh token it leads to
  // belongs to it, so that a replayed code or refresh token revokes the whole family.
  await db.schema
    .createTable('oauth_grants')
    .$call((t) => idColumn(t, dialect))
    .addColumn('client_id', 'integer', (c) => c.notNull().references('oauth_clients.id').onDelete('cascade'))
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('oauth_grants_client').on('oauth_grants').column('client_id').execute();
  await db.schema.createIndex('oauth_grants_user').on('oauth_grants').column('user_id').execute();

  await db.schema
    .createTable('oauth_codes')
    .$call((t) => idColumn(t, dialect))
    .addColumn('code_hash', 'text', (c) => c.notNull().unique())
    .addColumn('grant_id', 'integer', (c) => c.notNull().references('oauth_grants.id').onDelete('cascade'))
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('code_challenge', 'text')
    .addColumn('code_challenge_method', 'text')
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .execute();
  await db.schema.createIndex('oauth_codes_grant').on('oauth_codes').column('grant_id').execute();

  await db.schema
    .createTable('oauth_refresh_tokens')
    .$call((t) => idColumn(t, dialect))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('grant_id', 'integer', (c) => c.notNull().references('oauth_grants.id').onDelete('cascade'))
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    // Set when the token is exchanged for a new pair; a later use of it is a replay.
    .addColumn('rotated_at', 'bigint')
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('oauth_refresh_tokens_grant').on('oauth_refresh_tokens').column('grant_id').execute();

  // Access tokens issued through OAuth carry their scope, client and grant; personal
  // access tokens leave all three null (every scope, no client).
  await db.schema.alterTable('access_tokens').addColumn('scope', 'text').execute();
  await db.schema
    .alterTable('access_tokens')
    .addColumn('client_id', 'integer', (c) => c.references('oauth_clients.id').onDelete('cascade'))
    .execute();
  await db.schema
    .alterTable('access_tokens')
    .addColumn('grant_id', 'integer', (c) => c.references('oauth_grants.id').onDelete('cascade'))
    .execute();
  await db.schema.createIndex('access_tokens_grant').on('access_tokens').column('grant_id').execute();

  await db.schema
    .createTable('form_permissions')
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('level', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('form_permissions_pk', ['user_id', 'form_id'])
    .execute();
  await db.schema.createIndex('form_permissions_form').on('form_permissions').column('form_id').execute();
}
