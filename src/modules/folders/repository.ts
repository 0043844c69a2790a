import { permittedForms } from '../permissions/repository.js';
import { sql } from 'kysely';
import { engineOf } from '../../db/engine.js';
import type { FolderRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

/**
 * 'Fldr': the namespace of the advisory lock on an account's folder tree, keyed by account
 * (processes/locks.ts, forms/counts.ts and smartlists/form-options.ts use others).
 */
const TREE_LOCK_NAMESPACE = 0x466c6472;

/**
 * Serializes, until the transaction ends, the account's changes of its folder tree (create,
 * move, delete): each reads the tree to check it for loops and depth and then writes, so two
 * at once would each check the tree without the other's change (PostgreSQL: a transaction
 * advisory lock; SQLite's one writer serializes them anyway). Take it before reading the tree:
 * what is read after it includes what the lock's previous holder committed.
 */
export async function lockFolderTree(db: Executor, accountId: number): Promise<void> {
  await engineOf(db).serialize(db, TREE_LOCK_NAMESPACE, accountId);
}

export async function findFolder(db: Executor, accountId: number, folderId: number): Promise<FolderRow | undefined> {
  return db
    .selectFrom('folders')
    .selectAll()
    .where('id', '=', folderId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

/**
 * Every folder of the account: few enough per account to arrange as a tree in memory. By name
 * without regard to case, as forms are listed: the same on both databases whatever
 * PostgreSQL's collation (a plain order by name put "Zulu" before "beta" on SQLite, and
 * followed the database's collation on PostgreSQL).
 */
export async function listAllFolders(db: Executor, accountId: number): Promise<FolderRow[]> {
  return db
    .selectFrom('folders')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy(engineOf(db).lowerCase(sql.ref('name')))
    .orderBy('id')
    .execute();
}

/** Live forms per folder id; with visibleTo (a member's user id), only the forms they hold a level on. */
export async function countFormsByFolder(
  db: Executor,
  accountId: number,
  visibleTo?: number,
): Promise<Map<number, number>> {
  const rows = await db
    .selectFrom('forms')
    .select(['folder_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null)
    .where('folder_id', 'is not', null)
    .$if(visibleTo !== undefined, (q) => q.where('id', 'in', permittedForms(db, visibleTo!)))
    .groupBy('folder_id')
    .execute();
  return new Map(rows.map((r) => [r.folder_id as number, Number(r.n)]));
}

export async function insertFolder(
  db: Executor,
  row: { accountId: number; parentId: number | null; name: string },
  now: number,
): Promise<FolderRow> {
  return db
    .insertInto('folders')
    .values({ account_id: row.accountId, parent_id: row.parentId, name: row.name, created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function updateFolder(
  db: Executor,
  accountId: number,
  folderId: number,
  update: { name?: string; parent_id?: number | null },
  now: number,
): Promise<void> {
  await db
    .updateTable('folders')
    .set({ ...update, updated_at: now })
    .where('id', '=', folderId)
    .where('account_id', '=', accountId)
    .execute();
}

export async function moveSubfolders(
  db: Executor,
  accountId: number,
  fromParent: number,
  toParent: number | null,
  now: number,
): Promise<void> {
  await db
    .updateTable('folders')
    .set({ parent_id: toParent, updated_at: now })
    .where('account_id', '=', accountId)
    .where('parent_id', '=', fromParent)
    .execute();
}

export async function deleteFolder(db: Executor, accountId: number, folderId: number): Promise<void> {
  await db.deleteFrom('folders').where('id', '=', folderId).where('account_id', '=', accountId).execute();
}
