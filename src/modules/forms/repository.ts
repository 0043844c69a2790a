import { permittedForms } from '../permissions/repository.js';
import { sql } from 'kysely';
import { engineOf } from '../../db/engine.js';
import type { FormRow, FormUpdate, NewFormRow } from '../../db/schema.js';
import { hotQuery } from '../../db/hot-query.js';
import { countersOfForm, submissionsCountOf, submissionsVersionOf } from './counts.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';

const ORDER_COLUMNS = {
  id: 'id',
  name: 'name',
  created: 'created_at',
  updated: 'updated_at',
  submissionsCount: sql.ref('submissions_count'),
  // Not a choice of the query: the order of a listing of deleted forms that names none.
  deleted: 'deleted_at',
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
    .select([submissionsCountOf, submissionsVersionOf])
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

/** What a form's serialized record is kept under: its revision and submission counters. */
export interface FormVersionRow {
  id: number;
  revision: number;
  submissions_count: number;
  submissions_version: number;
}

function formsOfAccount(db: Executor, accountId: number, filter: Pick<FormListFilter, 'deleted'>) {
  return db
    .selectFrom('forms')
    .where('account_id', '=', accountId)
    .where('deleted_at', filter.deleted ? 'is not' : 'is', null);
}

function pageOf<Q extends ReturnType<typeof formsOfAccount>>(
  db: Executor,
  query: Q,
  filter: Pick<FormListFilter, 'orderBy' | 'order'>,
  limit: number,
  offset: number,
) {
  return (
    query
      .select(['id', 'revision'])
      .select([submissionsCountOf, submissionsVersionOf])
      // Names sort without regard to case, for every letter, the same on both databases.
      .orderBy(
        filter.orderBy === 'name' ? engineOf(db).lowerCase(sql.ref('name')) : ORDER_COLUMNS[filter.orderBy],
        filter.order,
      )
      .orderBy('id', filter.order)
      .limit(limit)
      .offset(offset)
  );
}

/**
 * The listing without a search, folder or member filter, the one clients page through most:
 * compiled once per ordering (see hotQuery), as building the query costs about what running it does.
 */
const plainListings = new Map<string, ReturnType<typeof plainListing>>();

function plainListing(filter: Pick<FormListFilter, 'orderBy' | 'order' | 'deleted'>) {
  return {
    page: hotQuery(3, (db, accountId: number, limit: number, offset: number) =>
      pageOf(db, formsOfAccount(db, accountId, filter), filter, limit, offset),
    ),
    count: hotQuery(1, (db, accountId: number) =>
      formsOfAccount(db, accountId, filter).select((eb) => eb.fn.countAll<number>().as('n')),
    ),
  };
}

/**
 * One page of the account's forms, as ids and versions only (the records themselves are
 * mostly served from the serialized ones kept per process), and the total that matches.
 */
export async function listFormVersions(
  db: Executor,
  accountId: number,
  filter: FormListFilter,
): Promise<{ rows: FormVersionRow[]; total: number }> {
  if (filter.search === undefined && filter.folderId === undefined && filter.visibleTo === undefined) {
    const key = `${filter.orderBy}:${filter.order}:${filter.deleted}`;
    let listing = plainListings.get(key);
    if (!listing) {
      listing = plainListing({ orderBy: filter.orderBy, order: filter.order, deleted: filter.deleted });
      plainListings.set(key, listing);
    }
    const [rows, [count]] = await Promise.all([
      listing.page(db, accountId, filter.limit, filter.offset),
      listing.count(db, accountId),
    ]);
    return { rows, total: Number(count?.n ?? 0) };
  }
  let query = formsOfAccount(db, accountId, filter);
  if (filter.folderId !== undefined) query = query.where('folder_id', '=', filter.folderId);
  if (filter.visibleTo !== undefined) query = query.where('id', 'in', permittedForms(db, filter.visibleTo));
  if (filter.search) {
    const search = filter.search;
    query = query.where((eb) => engineOf(db).containsInsensitive(eb.ref('name'), search));
  }
  const [rows, count] = await Promise.all([
    pageOf(db, query, filter, filter.limit, filter.offset).execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

/** Forms of the account by id, deleted ones included (a listing of deleted forms asks for them). */
export async function findFormsByIds(db: Executor, accountId: number, formIds: number[]): Promise<FormRow[]> {
  if (formIds.length === 0) return [];
  return db
    .selectFrom('forms')
    .selectAll()
    .select([submissionsCountOf, submissionsVersionOf])
    .where('account_id', '=', accountId)
    .where('id', 'in', formIds)
    .execute();
}

export async function insertForm(db: Executor, row: NewFormRow): Promise<FormRow> {
  const form = await db.insertInto('forms').values(row).returningAll().executeTakeFirstOrThrow();
  return { ...form, submissions_count: 0, submissions_version: 0 };
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
    .executeTakeFirstOrThrow(deletedMeanwhile('form_not_found'));
  return { ...form, ...(await countersOfForm(db, formId)) };
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
  return db
    .selectFrom('forms')
    .selectAll()
    .select([submissionsCountOf, submissionsVersionOf])
    .where('id', '=', formId)
    .executeTakeFirst();
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

/**
 * A new revision for a change that submission writes act on but the form's record does not
 * show (its webhooks and emails): every cached definition of the form, and the event
 * configuration kept with it, is read again.
 */
export async function reviseForm(db: Executor, accountId: number, formId: number): Promise<void> {
  await db
    .updateTable('forms')
    .set((eb) => ({ revision: eb('revision', '+', 1) }))
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

const selectFormRevision = hotQuery(2, (db, accountId: number, formId: number) =>
  db
    .selectFrom('forms')
    .select('revision')
    .where('id', '=', formId)
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null),
);

/** A live form's revision, what its cached definition must match; without its counts, which cost more to sum. */
export async function findFormRevision(db: Executor, accountId: number, formId: number): Promise<number | undefined> {
  const [row] = await selectFormRevision(db, accountId, formId);
  return row?.revision;
}

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
