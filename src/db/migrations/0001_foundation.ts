import type { Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('accounts')
    .$call((t) => idColumn(t, dialect))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('users')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text')
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('users_account').on('users').column('account_id').execute();

  await db.schema
    .createTable('access_tokens')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint')
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('access_tokens_user').on('access_tokens').column('user_id').execute();

  await db.schema
    .createTable('folders')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('parent_id', 'integer', (c) => c.references('folders.id').onDelete('set null'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('folders_account_parent').on('folders').columns(['account_id', 'parent_id']).execute();

  await db.schema
    .createTable('forms')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('folder_id', 'integer', (c) => c.references('folders.id').onDelete('set null'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('submit_button_title', 'text', (c) => c.notNull())
    .addColumn('settings', 'text', (c) => c.notNull())
    .addColumn('view_key', 'text', (c) => c.notNull().unique())
    .addColumn('is_encrypted', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('inactive', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('submissions_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('revision', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('deleted_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('forms_account_live').on('forms').columns(['account_id', 'deleted_at', 'id']).execute();
  await db.schema.createIndex('forms_account_folder').on('forms').columns(['account_id', 'folder_id']).execute();

  await db.schema
    .createTable('fields')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('label', 'text', (c) => c.notNull())
    .addColumn('hide_label', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('default_value', 'text')
    .addColumn('required', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('read_only', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('hidden', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('is_unique', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('column_span', 'integer', (c) => c.notNull())
    .addColumn('display_order', 'integer', (c) => c.notNull())
    .addColumn('attributes', 'text', (c) => c.notNull())
    .addColumn('options', 'text', (c) => c.notNull())
    .addColumn('logic', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('fields_form_order').on('fields').columns(['form_id', 'display_order', 'id']).execute();
}
