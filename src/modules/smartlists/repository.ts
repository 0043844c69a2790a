import { sql } from 'kysely';
import { engineOf } from '../../db/engine.js';
import type { NewSmartListOptionRow, SmartListOptionRow, SmartListRow } from '../../db/schema.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';

export async function findList(db: Executor, accountId: number, listId: number): Promise<SmartListRow | undefined> {
  return db
    .selectFrom('smart_lists')
    .selectAll()
    .where('id', '=', listId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

export async function listLists(
  db: Executor,
  accountId: number,
  filter: { search?: string; limit: number; offset: number },
): Promise<{ rows: SmartListRow[]; total: number }> {
  let query = db.selectFrom('smart_lists').where('account_id', '=', accountId);
  if (filter.search) {
    const search = filter.search;
    query = query.where((eb) => engineOf(db).containsInsensitive(eb.ref('name'), search));
  }
  const [rows, count] = await Promise.all([
    query
      .selectAll()
      // Without regard to case, by code point, the same on both databases; equal names by id.
      .orderBy((eb) => engineOf(db).lowerCase(eb.ref('name')))
      .orderBy('id')
      .limit(filter.limit)
      .offset(filter.offset)
      .execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export async function countOptionsByList(db: Executor, listIds: number[]): Promise<Map<number, number>> {
  if (listIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('smart_list_options')
    .select(['list_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('list_id', 'in', listIds)
    .groupBy('list_id')
    .execute();
  return new Map(rows.map((r) => [r.list_id, Number(r.n)]));
}

export async function insertList(
  db: Executor,
  row: { accountId: number; name: string; useImages: boolean },
  now: number,
): Promise<SmartListRow> {
  return db
    .insertInto('smart_lists')
    .values({
      account_id: row.accountId,
      name: row.name,
      use_images: Number(row.useImages),
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function updateList(
  db: Executor,
  accountId: number,
  listId: number,
  update: { name?: string; use_images?: number },
  now: number,
): Promise<SmartListRow> {
  return db
    .updateTable('smart_lists')
    .set({ ...update, updated_at: now })
    .where('id', '=', listId)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('smart_list_not_found'));
}

export async function deleteList(db: Executor, accountId: number, listId: number): Promise<void> {
  await db.deleteFrom('smart_lists').where('id', '=', listId).where('account_id', '=', accountId).execute();
}

/** The fields that take their options from the list, with their forms (live or deleted). */
export async function fieldsUsingList(
  db: Executor,
  accountId: number,
  listId: number,
): Promise<{ id: number; label: string; formId: number; formName: string; formDeleted: boolean }[]> {
  const rows = await db
    .selectFrom('fields')
    .innerJoin('forms', 'forms.id', 'fields.form_id')
    .select(['fields.id', 'fields.label', 'forms.id as form_id', 'forms.name as form_name', 'forms.deleted_at'])
    .where('fields.account_id', '=', accountId)
    .where('fields.smart_list_id', '=', listId)
    .orderBy('forms.id')
    .orderBy('fields.id')
    .execute();
  return rows.map((r) => ({
    id: r.id,
    label: r.label,
    formId: r.form_id,
    formName: r.form_name,
    formDeleted: r.deleted_at !== null,
  }));
}

/** Fields of deleted forms let go of the list, keeping its options as their own. */
export async function detachFields(
  db: Executor,
  accountId: number,
  fieldIds: number[],
  options: string,
  now: number,
): Promise<void> {
  if (fieldIds.length === 0) return;
  await db
    .updateTable('fields')
    .set({ smart_list_id: null, options, updated_at: now })
    .where('account_id', '=', accountId)
    .where('id', 'in', fieldIds)
    .execute();
}

/**
 * Forms whose fields take options from the list get a new revision, so that every cached
 * definition of them (submission checks, hosted pages) is read again with the new options.
 */
/** Moves the revision of the forms whose fields show the list's options; answers their ids. */
export async function reviseFormsUsingList(db: Executor, accountId: number, listId: number): Promise<number[]> {
  const rows = await db
    .updateTable('forms')
    .set((eb) => ({ revision: eb('revision', '+', 1) }))
    .where('account_id', '=', accountId)
    .where('id', 'in', (eb) =>
      eb.selectFrom('fields').select('form_id').where('account_id', '=', accountId).where('smart_list_id', '=', listId),
    )
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

export async function findOption(
  db: Executor,
  accountId: number,
  listId: number,
  optionId: number,
): Promise<SmartListOptionRow | undefined> {
  return db
    .selectFrom('smart_list_options')
    .selectAll()
    .where('id', '=', optionId)
    .where('list_id', '=', listId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

export async function listOptions(
  db: Executor,
  listId: number,
  filter: { search?: string; limit: number; offset: number },
): Promise<{ rows: SmartListOptionRow[]; total: number }> {
  let query = db.selectFrom('smart_list_options').where('list_id', '=', listId);
  if (filter.search) {
    const search = filter.search;
    query = query.where((eb) => engineOf(db).containsInsensitive(eb.ref('label'), search));
  }
  const [rows, count] = await Promise.all([
    query.selectAll().orderBy('display_order').orderBy('id').limit(filter.limit).offset(filter.offset).execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

/** Every option of the lists, as fields show them: in list order. */
export async function optionsOfLists(
  db: Executor,
  listIds: number[],
): Promise<Map<number, { label: string; value: string }[]>> {
  const byList = new Map<number, { label: string; value: string }[]>(listIds.map((id) => [id, []]));
  if (listIds.length === 0) return byList;
  const rows = await db
    .selectFrom('smart_list_options')
    .select(['list_id', 'label', 'value'])
    .where('list_id', 'in', listIds)
    .orderBy('list_id')
    .orderBy('display_order')
    .orderBy('id')
    .execute();
  for (const r of rows) byList.get(r.list_id)!.push({ label: r.label, value: r.value });
  return byList;
}

/** The values already in the list among the given ones. */
export async function takenValues(db: Executor, listId: number, values: string[]): Promise<Set<string>> {
  const taken = new Set<string>();
  // In slices: a bulk call may bring thousands, more than a statement takes parameters.
  for (let i = 0; i < values.length; i += 500) {
    const rows = await db
      .selectFrom('smart_list_options')
      .select('value')
      .where('list_id', '=', listId)
      .where('value', 'in', values.slice(i, i + 500))
      .execute();
    for (const r of rows) taken.add(r.value);
  }
  return taken;
}

export async function optionStats(db: Executor, listId: number): Promise<{ count: number; lastOrder: number }> {
  const row = await db
    .selectFrom('smart_list_options')
    .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.max('display_order').as('last')])
    .where('list_id', '=', listId)
    .executeTakeFirstOrThrow();
  return { count: Number(row.n), lastOrder: row.last === null ? -1 : Number(row.last) };
}

export async function insertOption(db: Executor, row: NewSmartListOptionRow): Promise<SmartListOptionRow> {
  return db.insertInto('smart_list_options').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function insertOptions(db: Executor, rows: NewSmartListOptionRow[]): Promise<void> {
  // 9 columns a row: 100 rows stay well under either database's parameter limit.
  for (let i = 0; i < rows.length; i += 100) {
    await db
      .insertInto('smart_list_options')
      .values(rows.slice(i, i + 100))
      .execute();
  }
}

export async function updateOption(
  db: Executor,
  optionId: number,
  update: { label?: string; value?: string; display_order?: number },
  now: number,
): Promise<SmartListOptionRow> {
  return db
    .updateTable('smart_list_options')
    .set({ ...update, updated_at: now })
    .where('id', '=', optionId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('smart_list_option_not_found'));
}

export async function deleteOption(db: Executor, optionId: number): Promise<void> {
  await db.deleteFrom('smart_list_options').where('id', '=', optionId).execute();
}

export async function deleteAllOptions(db: Executor, listId: number): Promise<number> {
  const result = await db.deleteFrom('smart_list_options').where('list_id', '=', listId).executeTakeFirst();
  return Number(result.numDeletedRows);
}

export async function touchList(db: Executor, listId: number, now: number): Promise<void> {
  await db.updateTable('smart_lists').set({ updated_at: now }).where('id', '=', listId).execute();
}

export async function setOptionImage(
  db: Executor,
  optionId: number,
  image: { key: string; type: string; size: number } | null,
  now: number,
): Promise<SmartListOptionRow> {
  return db
    .updateTable('smart_list_options')
    .set({
      image_key: image?.key ?? null,
      image_type: image?.type ?? null,
      image_size: image?.size ?? null,
      updated_at: now,
    })
    .where('id', '=', optionId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('smart_list_option_not_found'));
}

/** The storage keys of the images of a list's options (of one option, with optionId). */
export async function imageKeys(db: Executor, listId: number, optionId?: number): Promise<string[]> {
  const rows = await db
    .selectFrom('smart_list_options')
    .select('image_key')
    .where('list_id', '=', listId)
    .where('image_key', 'is not', null)
    .$if(optionId !== undefined, (q) => q.where('id', '=', optionId!))
    .execute();
  return rows.map((r) => r.image_key!);
}

export async function clearImages(db: Executor, listId: number, now: number): Promise<void> {
  await db
    .updateTable('smart_list_options')
    .set({ image_key: null, image_type: null, image_size: null, updated_at: now })
    .where('list_id', '=', listId)
    .where('image_key', 'is not', null)
    .execute();
}

/**
 * The options with an image of those of the lists that use images: by list, each option's
 * value, id and storage key (for the hosted page, which shows them next to their labels).
 */
export async function imagesOfLists(
  db: Executor,
  listIds: number[],
): Promise<Map<number, { value: string; optionId: number; key: string }[]>> {
  const out = new Map<number, { value: string; optionId: number; key: string }[]>();
  if (listIds.length === 0) return out;
  const rows = await db
    .selectFrom('smart_list_options')
    .innerJoin('smart_lists', 'smart_lists.id', 'smart_list_options.list_id')
    .select([
      'smart_list_options.list_id',
      'smart_list_options.id',
      'smart_list_options.value',
      'smart_list_options.image_key',
    ])
    .where('smart_list_options.list_id', 'in', listIds)
    .where('smart_lists.use_images', '=', 1)
    .where('smart_list_options.image_key', 'is not', null)
    .execute();
  for (const r of rows) {
    const list = out.get(r.list_id) ?? [];
    list.push({ value: r.value, optionId: r.id, key: r.image_key! });
    out.set(r.list_id, list);
  }
  return out;
}

/**
 * An option's image as a form's hosted page shows it: only when a select, radio or checkbox
 * field of that form takes its options from the option's list, and the list uses images.
 */
export async function optionImageOfForm(
  db: Executor,
  accountId: number,
  formId: number,
  optionId: number,
): Promise<{ key: string; type: string | null } | undefined> {
  const row = await db
    .selectFrom('smart_list_options')
    .innerJoin('smart_lists', 'smart_lists.id', 'smart_list_options.list_id')
    .select(['smart_list_options.image_key', 'smart_list_options.image_type'])
    .where('smart_list_options.id', '=', optionId)
    .where('smart_list_options.account_id', '=', accountId)
    .where('smart_lists.use_images', '=', 1)
    .where('smart_list_options.image_key', 'is not', null)
    .where((eb) =>
      eb.exists(
        eb
          .selectFrom('fields')
          .select('fields.id')
          .whereRef('fields.smart_list_id', '=', 'smart_list_options.list_id')
          .where('fields.form_id', '=', formId)
          .where('fields.account_id', '=', accountId)
          .where('fields.type', 'in', ['select', 'radio', 'checkbox']),
      ),
    )
    .executeTakeFirst();
  return row ? { key: row.image_key!, type: row.image_type } : undefined;
}

/**
 * The forms' fields grouped by the list they use (null: their own options), with how many
 * fields each group holds and, for own options, how many in all (the length of each field's
 * options JSON, counted by the database: no option is read).
 */
export async function fieldOptionCounts(
  db: Executor,
  accountId: number,
  formIds: number[],
): Promise<{ form_id: number; smart_list_id: number | null; fields: number; own: number | null }[]> {
  const rows: { form_id: number; smart_list_id: number | null; fields: number; own: number | null }[] = [];
  // In slices: a list may be used by more forms than a statement takes parameters.
  for (let i = 0; i < formIds.length; i += 500) {
    const own = engineOf(db).jsonArrayLength(sql.ref('fields.options'));
    const slice = await db
      .selectFrom('fields')
      .select((eb) => [
        'fields.form_id',
        'fields.smart_list_id',
        eb.fn.countAll<number>().as('fields'),
        // A field that uses a list keeps no options of its own: the list's are counted for it.
        eb.fn.sum<number>(sql`CASE WHEN fields.smart_list_id IS NULL THEN ${own} ELSE 0 END`).as('own'),
      ])
      .where('fields.account_id', '=', accountId)
      .where('fields.form_id', 'in', formIds.slice(i, i + 500))
      .groupBy(['fields.form_id', 'fields.smart_list_id'])
      .execute();
    rows.push(...slice);
  }
  return rows;
}
