import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * Subaccounts (src/modules/subaccounts): an account may belong to a parent account, whose
 * owner and admins reach it through the /subaccount routes only. A subaccount is a full
 * account of its own (users, forms, themes); deleting the parent deletes its subaccounts.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('accounts')
    .addColumn('parent_account_id', 'integer', (c) => c.references('accounts.id').onDelete('cascade'))
    .execute();
  await db.schema.createIndex('accounts_parent').on('accounts').columns(['parent_account_id', 'id']).execute();
}
