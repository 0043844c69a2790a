import { permittedForms } from '../permissions/repository.js';
import type { FolderRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export async function findFolder(db: Executor, accountId: number, folderId: number): Promise<FolderRow | undefined> {
  return db
    .selectFrom('folders')
    .selectAll()
    .where('id', '=', folderId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

/** Every folder of the account: few enough per account to arrange as a tree in memory. */
export async function listAllFolders(db: Executor, accountId: number): Promise<FolderRow[]> {
  return db
    .selectFrom('folders')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('name')
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
