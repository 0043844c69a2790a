import type { FieldRow, FieldUpdate, NewFieldRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export async function listFields(db: Executor, accountId: number, formId: number): Promise<FieldRow[]> {
  return db
    .selectFrom('fields')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('form_id', '=', formId)
    .orderBy('display_order')
    .orderBy('id')
    .execute();
}

/** Fields of several forms at once, in display order within each form. */
export async function listFieldsOfForms(db: Executor, accountId: number, formIds: number[]): Promise<FieldRow[]> {
  if (formIds.length === 0) return [];
  return db
    .selectFrom('fields')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('form_id', 'in', formIds)
    .orderBy('form_id')
    .orderBy('display_order')
    .orderBy('id')
    .execute();
}

export async function findField(
  db: Executor,
  accountId: number,
  formId: number,
  fieldId: number,
): Promise<FieldRow | undefined> {
  return db
    .selectFrom('fields')
    .selectAll()
    .where('id', '=', fieldId)
    .where('account_id', '=', accountId)
    .where('form_id', '=', formId)
    .executeTakeFirst();
}

export async function insertField(db: Executor, row: NewFieldRow): Promise<FieldRow> {
  return db.insertInto('fields').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateField(
  db: Executor,
  accountId: number,
  fieldId: number,
  update: FieldUpdate,
): Promise<FieldRow> {
  return db
    .updateTable('fields')
    .set(update)
    .where('id', '=', fieldId)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function setLogic(
  db: Executor,
  accountId: number,
  fieldId: number,
  logic: string | null,
  now: number,
): Promise<void> {
  await db
    .updateTable('fields')
    .set({ logic, updated_at: now })
    .where('id', '=', fieldId)
    .where('account_id', '=', accountId)
    .execute();
}

export async function deleteField(db: Executor, accountId: number, fieldId: number): Promise<void> {
  await db.deleteFrom('fields').where('id', '=', fieldId).where('account_id', '=', accountId).execute();
}
