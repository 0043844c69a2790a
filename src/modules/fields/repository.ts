import type { FieldRow, FieldUpdate, NewFieldRow } from '../../db/schema.js';
import { engineOf } from '../../db/engine.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';
import { optionsOfLists } from '../smartlists/repository.js';

/** A field row, and when it uses a smart list, the list's options: one array for every field on the list. */
export interface FieldWithList {
  row: FieldRow;
  listOptions: { label: string; value: string }[] | undefined;
}

/** The rows with their lists' options, each list read once for all the fields that use it. */
async function withLists(db: Executor, rows: FieldRow[]): Promise<FieldWithList[]> {
  const listIds = [...new Set(rows.flatMap((r) => (r.smart_list_id === null ? [] : [r.smart_list_id])))];
  const lists = listIds.length === 0 ? new Map() : await optionsOfLists(db, listIds);
  return rows.map((row) => ({
    row,
    listOptions: row.smart_list_id === null ? undefined : (lists.get(row.smart_list_id) ?? []),
  }));
}

/**
 * Fields that take their options from a smart list read the list's current options into
 * their options column, so that every reader (form records, submission checks, hosted pages,
 * emails) sees them without knowing about lists. Each list's JSON is made once, however many
 * fields use it.
 */
function asRows(fields: FieldWithList[]): FieldRow[] {
  const json = new Map<unknown, string>();
  return fields.map(({ row, listOptions }) => {
    if (listOptions === undefined) return row;
    let text = json.get(listOptions);
    if (text === undefined) json.set(listOptions, (text = JSON.stringify(listOptions)));
    return { ...row, options: text };
  });
}

const withListOptions = async (db: Executor, rows: FieldRow[]): Promise<FieldRow[]> =>
  asRows(await withLists(db, rows));

/**
 * The form's fields in display order, for the hosted page: a smart list's options are read
 * once, as one array shared by the fields that use it, rather than turned into JSON and parsed
 * back for each field (as listFields does for readers that know nothing of lists). The rows
 * keep their stored options column: a field's own options, '[]' for one that uses a list.
 */
export async function listFieldsWithLists(db: Executor, accountId: number, formId: number): Promise<FieldWithList[]> {
  const rows = await db
    .selectFrom('fields')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('form_id', '=', formId)
    .orderBy('display_order')
    .orderBy('id')
    .execute();
  return withLists(db, rows);
}

/** What is stored of a field that uses a list: no options of its own (a copied row may carry the list's). */
function ownOptions<T extends { smart_list_id?: number | null; options?: string }>(row: T): T {
  return row.smart_list_id === null || row.smart_list_id === undefined ? row : { ...row, options: '[]' };
}

export async function listFields(db: Executor, accountId: number, formId: number): Promise<FieldRow[]> {
  return asRows(await listFieldsWithLists(db, accountId, formId));
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

/**
 * The next page of a form's submissions after id `after`, in id order, their rows share-locked
 * until the transaction ends (PostgreSQL): an edit or a delete of one waits, so that the unique
 * value written for a row is its data's and no value outlives its row (migration 0036).
 */
export async function submissionDataPage(
  db: Executor,
  formId: number,
  after: number,
  limit: number,
): Promise<{ id: number; data: string }[]> {
  return db
    .selectFrom('submissions')
    .select(['id', 'data'])
    .where('form_id', '=', formId)
    .where('id', '>', after)
    .orderBy('id')
    .limit(limit)
    .$call(engineOf(db).shareRows)
    .execute();
}

/** Removes every unique value stored for a field. */
export async function clearUniqueValues(db: Executor, formId: number, fieldId: number): Promise<void> {
  await db
    .deleteFrom('submission_unique_values')
    .where('form_id', '=', formId)
    .where('field_id', '=', fieldId)
    .execute();
}

/**
 * Stores a field's unique values; returns the submissions whose value was already held (by a
 * submission before them in this call too): the unique index decides, and nothing fails.
 */
export async function insertUniqueValues(
  db: Executor,
  formId: number,
  fieldId: number,
  values: { submissionId: number; norm: string }[],
): Promise<number[]> {
  if (values.length === 0) return [];
  const stored = await db
    .insertInto('submission_unique_values')
    .values(
      values.map((v) => ({ submission_id: v.submissionId, form_id: formId, field_id: fieldId, value_norm: v.norm })),
    )
    .onConflict((oc) => oc.doNothing())
    .returning('submission_id')
    .execute();
  const got = new Set(stored.map((r) => r.submission_id));
  return values.map((v) => v.submissionId).filter((id) => !got.has(id));
}

/** The submission that holds each of these values of a field, by value. */
export async function uniqueValueHolders(
  db: Executor,
  formId: number,
  fieldId: number,
  norms: string[],
): Promise<Map<string, number>> {
  if (norms.length === 0) return new Map();
  const rows = await db
    .selectFrom('submission_unique_values')
    .select(['submission_id', 'value_norm'])
    .where('form_id', '=', formId)
    .where('field_id', '=', fieldId)
    .where('value_norm', 'in', norms)
    .execute();
  return new Map(rows.map((r) => [r.value_norm, r.submission_id]));
}
