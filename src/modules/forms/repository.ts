import { permittedForms } from '../permissions/repository.js';
import { sql } from 'kysely';
import { engineOf } from '../../db/engine.js';
import type { FormRow, FormUpdate, NewFormRow } from '../../db/schema.js';
import { hotQuery } from '../../db/hot-query.js';
import { countOfForm, submissionsCountOf, submissionsVersionOf } from './counts.js';
import type { Executor } from '../../db/transaction.js';

const ORDER_COLUMNS = {
  id: 'id',
  name: 'name',
  created: 'created_at',
  updated: 'updated_at',
  submissionsCount: sql.ref('submissions_count'),
} as const;

export interface FormListFilter {
  search?: string;
  folderId?: number;
  deleted: boolean;
  /** A member's user id: only forms they hold a permission on. */
  visibleTo?: number;
  orderBy: keyof typeof ORDER_COLUMNS;
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/** A form of the account; deleted forms only when asked for. */
export async function findForm(
  db: Executor,
  accountId: number,
  formId: number,
  deleted = false,
): Promise<FormRow | undefined> {
  return selectForm(db, accountId, formId, deleted).executeTakeFirst();
}

function selectForm(db: Executor, accountId: number, formId: number, deleted: boolean) {
  return db
    .selectFrom('forms')
    .selectAll()
    .select(submissionsCountOf)
    .where('id', '=', formId)
    .where('account_id', '=', accountId)
    .where('deleted_at', deleted ? 'is not' : 'is', null);
}

/**
 * The live form, its row locked until the transaction ends (PostgreSQL; SQLite's one writer
 * serializes anyway): for changes that must not interleave, such as encryption's.
 */
export async function lockForm(db: Executor, accountId: number, formId: number): Promise<FormRow | undefined> {
  return selectForm(db, accountId, formId, false).$call(engineOf(db).lockRows).executeTakeFirst();
}

export async function listForms(
  db: Executor,
  accountId: number,
  filter: FormListFilter,
): Promise<{ rows: FormRow[]; total: number }> {
  let query = db
    .selectFrom('forms')
    .where('account_id', '=', accountId)
    .where('deleted_at', filter.deleted ? 'is not' : 'is', null);
  if (filter.folderId !== undefined) query = query.where('folder_id', '=', filter.folderId);
  if (filter.visibleTo !== undefined) query = query.where('id', 'in', permittedForms(db, filter.visibleTo));
  if (filter.search) {
    const search = filter.search;
    query = query.where((eb) => engineOf(db).containsInsensitive(eb.ref('name'), search));
  }
  const [rows, count] = await Promise.all([
    query
      .selectAll()
      .select(submissionsCountOf)
      // Names sort as people read them, without regard to case, the same on both databases.
      .orderBy(filter.orderBy === 'name' ? sql`lower(name)` : ORDER_COLUMNS[filter.orderBy], filter.order)
      .orderBy('id', filter.order)
      .limit(filter.limit)
      .offset(filter.offset)
      .execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export async function insertForm(db: Executor, row: NewFormRow): Promise<FormRow> {
  const form = await db.insertInto('forms').values(row).returningAll().executeTakeFirstOrThrow();
  return { ...form, submissions_count: 0 };
}

export async function updateForm(
  db: Executor,
  accountId: number,
  formId: number,
  update: FormUpdate,
): Promise<FormRow> {
  const form = await db
    .updateTable('forms')
    .set((eb) => ({ ...update, revision: eb('revision', '+', 1) }))
    .where('id', '=', formId)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirstOrThrow();
  return { ...form, submissions_count: await countOfForm(db, formId) };
}

/** Moves every form of a folder (deleted ones too) to another folder or the top level. */
export async function moveFormsOfFolder(
  db: Executor,
  accountId: number,
  fromFolder: number,
  toFolder: number | null,
): Promise<void> {
  await db
    .updateTable('forms')
    .set((eb) => ({ folder_id: toFolder, revision: eb('revision', '+', 1) }))
    .where('account_id', '=', accountId)
    .where('folder_id', '=', fromFolder)
    .execute();
}

/** Ends a conversion of the form's submissions; a finished decryption leaves the form plain. */
export async function finishEncryptionChange(
  db: Executor,
  formId: number,
  direction: 'encrypt' | 'decrypt',
): Promise<void> {
  await db
    .updateTable('forms')
    .set((eb) => ({
      encryption_state: null,
      ...(direction === 'decrypt' && { is_encrypted: 0, encryption_key: null }),
      revision: eb('revision', '+', 1),
    }))
    .where('id', '=', formId)
    .where('encryption_state', '=', direction === 'encrypt' ? 'encrypting' : 'decrypting')
    .execute();
}

/** A form in any state, deleted ones too: what background work on it reads. */
export async function findFormById(db: Executor, formId: number): Promise<FormRow | undefined> {
  return db.selectFrom('forms').selectAll().select(submissionsCountOf).where('id', '=', formId).executeTakeFirst();
}

/** Marks the form as changed when something inside it (a field) changes. */
export async function touchForm(db: Executor, accountId: number, formId: number, now: number): Promise<void> {
  await db
    .updateTable('forms')
    .set((eb) => ({ updated_at: now, revision: eb('revision', '+', 1) }))
    .where('id', '=', formId)
    .where('account_id', '=', accountId)
    .execute();
}

const selectFormVersion = hotQuery(2, (db, accountId: number, formId: number) =>
  db
    .selectFrom('forms')
    .select(['revision', submissionsCountOf, submissionsVersionOf])
    .where('id', '=', formId)
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null),
);

/** What a cached read of a live form must match to be served: its revision and submission count. */
export async function findFormVersion(
  db: Executor,
  accountId: number,
  formId: number,
): Promise<{ revision: number; submissionsCount: number; submissionsVersion: number } | undefined> {
  const [row] = await selectFormVersion(db, accountId, formId);
  return (
    row && {
      revision: row.revision,
      submissionsCount: row.submissions_count,
      submissionsVersion: row.submissions_version,
    }
  );
}
