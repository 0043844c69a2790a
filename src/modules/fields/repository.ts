import type { FieldRow, FieldUpdate, NewFieldRow } from '../../db/schema.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';
import { optionsOfLists } from '../smartlists/repository.js';

/**
 * Fields that take their options from a smart list read the list's current options into
 * their options column, so that every reader (form records, submission checks, hosted pages,
 * emails) sees them without knowing about lists.
 */
async function withListOptions(db: Executor, rows: FieldRow[]): Promise<FieldRow[]> {
  const listIds = [...new Set(rows.flatMap((r) => (r.smart_list_id === null ? [] : [r.smart_list_id])))];
  if (listIds.length === 0) return rows;
  const options = await optionsOfLists(db, listIds);
  return rows.map((r) =>
    r.smart_list_id === null ? r : { ...r, options: JSON.stringify(options.get(r.smart_list_id) ?? []) },
  );
}

/** What is stored of a field that uses a list: no options of its own (a copied row may carry the list's). */
function ownOptions<T extends { smart_list_id?: number | null; options?: string }>(row: T): T {
  return row.smart_list_id === null || row.smart_list_id === undefined ? row : { ...row, options: '[]' };
}

export async function listFields(db: Executor, accountId: number, formId: number): Promise<FieldRow[]> {
  return db
    .selectFrom('fields')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('form_id', '=', formId)
    .orderBy('display_order')
    .orderBy('id')
    .execute()
    .then((rows) => withListOptions(db, rows));
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
    .execute()
    .then((rows) => withListOptions(db, rows));
}

export async function findField(
  db: Executor,
  accountId: number,
  formId: number,
  fieldId: number,
): Promise<FieldRow | undefined> {
  const row = await db
    .selectFrom('fields')
    .selectAll()
    .where('id', '=', fieldId)
    .where('account_id', '=', accountId)
    .where('form_id', '=', formId)
    .executeTakeFirst();
  return row && (await withListOptions(db, [row]))[0];
}

export async function insertField(db: Executor, row: NewFieldRow): Promise<FieldRow> {
  const inserted = await db.insertInto('fields').values(ownOptions(row)).returningAll().executeTakeFirstOrThrow();
  return (await withListOptions(db, [inserted]))[0]!;
}

export async function updateField(
  db: Executor,
  accountId: number,
  fieldId: number,
  update: FieldUpdate,
): Promise<FieldRow> {
  const updated = await db
    .updateTable('fields')
    .set(ownOptions(update))
    .where('id', '=', fieldId)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('field_not_found'));
  return (await withListOptions(db, [updated]))[0]!;
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
