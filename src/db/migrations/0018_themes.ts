import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * Themes (src/modules/themes): the look of an account's hosted forms. Ids are strings
 * (th_ and 16 URL-safe characters). Every account has one default theme, which cannot be
 * deleted: accounts made from now on get it with the account; existing ones get it here,
 * and their forms are set to it.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('themes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('is_default', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('locked_in_use', 'integer', (c) => c.notNull().defaultTo(0))
    // JSON: colors, fontFamily, spacing, logoUrl.
    .addColumn('style', 'text', (c) => c.notNull())
    .addColumn('custom_css', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('themes_account').on('themes').columns(['account_id', 'created_at', 'id']).execute();
  // One default per account.
  await db.schema
    .createIndex('themes_default')
    .on('themes')
    .column('account_id')
    .unique()
    .where(sql.ref('is_default'), '=', 1)
    .execute();

  // No ON DELETE: deleting a theme moves its forms to the default theme first (the service).
  await db.schema
    .alterTable('forms')
    .addColumn('theme_id', 'text', (c) => c.references('themes.id'))
    .execute();
  await db.schema.createIndex('forms_theme').on('forms').columns(['theme_id', 'id']).execute();

  // Each default theme dates from its account, as if it had been made with it.
  const accounts = await sql<{
    id: number;
    created_at: number;
  }>`SELECT id, created_at FROM accounts ORDER BY id`.execute(db);
  for (const { id, created_at: now } of accounts.rows) {
    const themeId = `th_${randomBytes(12).toString('base64url')}`;
    await sql`INSERT INTO themes (id, account_id, name, is_default, locked_in_use, style, custom_css, created_at, updated_at)
      VALUES (${themeId}, ${id}, ${'Default'}, 1, 0, ${'{}'}, ${''}, ${now}, ${now})`.execute(db);
    await sql`UPDATE forms SET theme_id = ${themeId}, revision = revision + 1 WHERE account_id = ${id}`.execute(db);
  }
}
