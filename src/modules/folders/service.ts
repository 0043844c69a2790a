import type { AppContext } from '../../context.js';
import type { FolderRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { invalid, NotFoundError } from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import { moveFormsOfFolder } from '../forms/repository.js';
import * as repo from './repository.js';
import {
  MAX_FOLDER_DEPTH,
  type Folder,
  type FolderCreate,
  type FolderListQuery,
  type FolderUpdate,
} from './schemas.js';
import { memberOf, type AccountScope, type Caller, type FolderRef } from '../permissions/caller.js';

class FolderTree {
  private readonly byId: Map<number, FolderRow>;
  private readonly children = new Map<number | null, FolderRow[]>();

  constructor(
    rows: FolderRow[],
    private readonly formCounts: Map<number, number>,
  ) {
    this.byId = new Map(rows.map((r) => [r.id, r]));
    for (const row of rows) {
      const siblings = this.children.get(row.parent_id) ?? [];
      siblings.push(row);
      this.children.set(row.parent_id, siblings);
    }
  }

  /** With visibleTo (a member's user id), forms count only where the member holds a level. */
  static async load(db: Executor, accountId: number, visibleTo?: number): Promise<FolderTree> {
    const [rows, counts] = await Promise.all([
      repo.listAllFolders(db, accountId),
      repo.countFormsByFolder(db, accountId, visibleTo),
    ]);
    return new FolderTree(rows, counts);
  }

  roots(): FolderRow[] {
    return this.children.get(null) ?? [];
  }

  /** Levels from the top down to this folder: a top-level folder has depth 1. */
  depth(id: number): number {
    let depth = 0;
    for (let row = this.byId.get(id); row; row = row.parent_id === null ? undefined : this.byId.get(row.parent_id))
      depth++;
    return depth;
  }

  /** Levels from this folder down to its deepest subfolder: a leaf has height 1. */
  height(id: number): number {
    return 1 + Math.max(0, ...(this.children.get(id) ?? []).map((c) => this.height(c.id)));
  }

  isWithin(id: number, ancestor: number): boolean {
    for (let row = this.byId.get(id); row; row = row.parent_id === null ? undefined : this.byId.get(row.parent_id)) {
      if (row.id === ancestor) return true;
    }
    return false;
  }

  record(row: FolderRow): Folder {
    return {
      id: row.id,
      name: row.name,
      parent: row.parent_id,
      formsCount: this.formCounts.get(row.id) ?? 0,
      created: isoTime(row.created_at),
      updated: isoTime(row.updated_at),
      subfolders: (this.children.get(row.id) ?? []).map((c) => this.record(c)),
    };
  }
}

async function requireFolder(db: Executor, accountId: number, folderId: number): Promise<FolderRow> {
  const folder = await repo.findFolder(db, accountId, folderId);
  if (!folder) throw new NotFoundError('folder_not_found');
  return folder;
}

/** A folder id sent in a body or query: it must be one of the account's folders. */
export async function requireFolderId(
  db: Executor,
  { accountId }: AccountScope,
  folderId: number | null | undefined,
): Promise<void> {
  if (folderId !== null && folderId !== undefined) await requireFolder(db, accountId, folderId);
}

function checkDepth(tree: FolderTree, parentId: number | null, subtreeHeight: number): void {
  const depth = (parentId === null ? 0 : tree.depth(parentId)) + subtreeHeight;
  if (depth > MAX_FOLDER_DEPTH)
    throw invalid('folder_too_deep', 'body.parent', `folders nest at most ${MAX_FOLDER_DEPTH} levels deep`);
}

export async function listFolders(
  ctx: AppContext,
  caller: Caller,
  query: FolderListQuery,
): Promise<Page & { folders: Folder[] }> {
  const { accountId } = caller;
  const visibleTo = memberOf(caller);
  const tree = await FolderTree.load(ctx.db, accountId, visibleTo);
  const roots = tree.roots();
  const start = (query.page - 1) * query.perPage;
  return {
    folders: roots.slice(start, start + query.perPage).map((r) => tree.record(r)),
    ...page(roots.length, query.page, query.perPage),
  };
}

export async function getFolder(ctx: AppContext, caller: Caller, { folderId }: FolderRef): Promise<Folder> {
  const { accountId } = caller;
  const visibleTo = memberOf(caller);
  const row = await requireFolder(ctx.db, accountId, folderId);
  return (await FolderTree.load(ctx.db, accountId, visibleTo)).record(row);
}

export async function createFolder(ctx: AppContext, { accountId }: AccountScope, input: FolderCreate): Promise<Folder> {
  return transact(ctx.db, async (trx) => {
    const parentId = input.parent ?? null;
    await requireFolderId(trx, { accountId }, parentId);
    checkDepth(await FolderTree.load(trx, accountId), parentId, 1);
    const row = await repo.insertFolder(trx, { accountId, parentId, name: input.name }, ctx.clock.now());
    return (await FolderTree.load(trx, accountId)).record(row);
  });
}

export async function updateFolder(
  ctx: AppContext,
  { accountId }: AccountScope,
  { folderId }: FolderRef,
  input: FolderUpdate,
): Promise<Folder> {
  return transact(ctx.db, async (trx) => {
    const folder = await requireFolder(trx, accountId, folderId);
    const update: { name?: string; parent_id?: number | null } = {};
    if (input.name !== undefined) update.name = input.name;
    if (input.parent !== undefined && input.parent !== folder.parent_id) {
      await requireFolderId(trx, { accountId }, input.parent);
      const tree = await FolderTree.load(trx, accountId);
      if (input.parent !== null && tree.isWithin(input.parent, folderId)) {
        throw invalid('folder_cycle', 'body.parent', 'a folder cannot move into itself or one of its subfolders');
      }
      checkDepth(tree, input.parent, tree.height(folderId));
      update.parent_id = input.parent;
    }
    await repo.updateFolder(trx, accountId, folderId, update, ctx.clock.now());
    const updated = await requireFolder(trx, accountId, folderId);
    return (await FolderTree.load(trx, accountId)).record(updated);
  });
}

export async function deleteFolder(
  ctx: AppContext,
  { accountId }: AccountScope,
  { folderId }: FolderRef,
): Promise<{ id: number }> {
  return transact(ctx.db, async (trx) => {
    const folder = await requireFolder(trx, accountId, folderId);
    await repo.moveSubfolders(trx, accountId, folderId, folder.parent_id, ctx.clock.now());
    await moveFormsOfFolder(trx, accountId, folderId, folder.parent_id);
    await repo.deleteFolder(trx, accountId, folderId);
    return { id: folderId };
  });
}
