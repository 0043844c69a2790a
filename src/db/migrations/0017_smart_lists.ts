import type { Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * Smart lists (src/modules/smartlists): reusable option lists of an account, and the
 * setting on select, radio and checkbox fields that takes their options from one.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('smart_lists')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('use_images', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('smart_lists_account').on('smart_lists').columns(['account_id', 'id']).execute();

  await db.schema
    .createTable('smart_list_options')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('list_id', 'integer', (c) => c.notNull().references('smart_lists.id').onDelete('cascade'))
    .addColumn('label', 'text', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('display_order', 'integer', (c) => c.notNull())
    // The storage key of the option's image, when the list uses images and one was uploaded.
    .addColumn('image_key', 'text')
    .addColumn('image_type', 'text')
    .addColumn('image_size', 'integer')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // A value picks one option, as within a field's own options: unique in its list.
  await db.schema
    .createIndex('smart_list_options_value')
    .on('smart_list_options')
    .columns(['list_id', 'value'])
    .unique()
    .execute();
  await db.schema
    .createIndex('smart_list_options_order')
    .on('smart_list_options')
    .columns(['list_id', 'display_order', 'id'])
    .execute();

  // No ON DELETE: the service refuses (409) to delete a list that fields use; the key backs it.
  await db.schema
    .alterTable('fields')
    .addColumn('smart_list_id', 'integer', (c) => c.references('smart_lists.id'))
    .execute();
  await db.schema.createIndex('fields_smart_list').on('fields').column('smart_list_id').execute();
}
