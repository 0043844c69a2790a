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

/**
 * The folders of a stored loop of parents (A's parent B, B's parent A), which no change of
 * the service makes but a database damaged before changes of the tree were serialized, or
 * edited by hand, may hold: each folder's parents are followed until the top, a folder
 * already followed, or one of the path itself (then the path from there on is a loop).
 * Every folder joins one path once, so it takes as many steps as there are folders.
 */
function foldersInLoops(byId: ReadonlyMap<number, FolderRow>): Set<number> {
  const inLoop = new Set<number>();
  const followed = new Set<number>();
  for (const start of byId.keys()) {
    const path: number[] = [];
    const onPath = new Map<number, number>();
    for (let id: number | null = start; id !== null && !followed.has(id); id = byId.get(id)?.parent_id ?? null) {
      const at = onPath.get(id);
      if (at !== undefined) {
        for (const member of path.slice(at)) inLoop.add(member);
        break;
      }
      if (!byId.has(id)) break;
      onPath.set(id, path.length);
      path.push(id);
    }
    for (const id of path) followed.add(id);
  }
  return inLoop;
}

/**
 * An account's folders arranged as a tree. Each is placed under its stored parent, but for a
 * folder in a stored loop of parents, or whose parent is not one of the account's folders:
 * that one is placed at the top level (its parent shown as null), so the tree it shows has no
 * loop, and a PUT of its parent (null or another folder) or a DELETE repairs the loop. Every
 * walk is bounded by the number of folders, and none recurses.
 */
class FolderTree {
  private readonly byId: Map<number, FolderRow>;
  private readonly inLoop: Set<number>;
  private readonly children = new Map<number | null, FolderRow[]>();

  constructor(
    rows: FolderRow[],
    private readonly formCounts: Map<number, number>,
  ) {
    this.byId = new Map(rows.map((r) => [r.id, r]));
    this.inLoop = foldersInLoops(this.byId);
    for (const row of rows) {
      const parent = this.parentOf(row.id);
      const siblings = this.children.get(parent) ?? [];
      siblings.push(row);
      this.children.set(parent, siblings);
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

  /** The tree without form counts: enough to check a change against. */
  static async shape(db: Executor, accountId: number): Promise<FolderTree> {
    return new FolderTree(await repo.listAllFolders(db, accountId), new Map());
  }

  roots(): FolderRow[] {
    return this.children.get(null) ?? [];
  }

  /** Whether the folder is in a stored loop of parents (and so shown at the top level). */
  isInLoop(id: number): boolean {
    return this.inLoop.has(id);
  }

  /** The parent the folder is shown under: its stored parent, or null (see the class). */
  parentOf(id: number): number | null {
    const parent = this.byId.get(id)?.parent_id ?? null;
    return parent === null || this.inLoop.has(id) || !this.byId.has(parent) ? null : parent;
  }

  /** Levels from the top down to this folder, as shown: a top-level folder has depth 1. */
  depth(id: number): number {
    let depth = 0;
    let at: number | null = id;
    while (at !== null && this.byId.has(at) && depth <= this.byId.size) {
      depth++;
      at = this.parentOf(at);
    }
    return depth;
  }

  /** Levels from this folder down to its deepest subfolder, as shown: a leaf has height 1. */
  height(id: number): number {
    let height = 1;
    for (let level = this.children.get(id) ?? []; level.length > 0 && height <= this.byId.size; height++)
      level = level.flatMap((c) => this.children.get(c.id) ?? []);
    return height;
  }

  /**
   * Whether ancestor is id or one of its stored parents, walked at most once round a loop:
   * whether making ancestor a child of id would close a loop.
   */
  leadsTo(id: number, ancestor: number): boolean {
    let at: number | null = id;
    for (let steps = 0; at !== null && steps <= this.byId.size; steps++) {
      if (at === ancestor) return true;
      at = this.byId.get(at)?.parent_id ?? null;
    }
    return false;
  }

  /** The folder with its subfolders, as shown, built level by level. */
  record(row: FolderRow): Folder {
    const entry = (r: FolderRow): Folder => ({
      id: r.id,
      name: r.name,
      parent: this.byId.has(r.id) ? this.parentOf(r.id) : r.parent_id,
      formsCount: this.formCounts.get(r.id) ?? 0,
      created: isoTime(r.created_at),
      updated: isoTime(r.updated_at),
      subfolders: [],
    });
    const top = entry(row);
    const pending: [number, Folder][] = [[row.id, top]];
    for (let next = pending.pop(); next; next = pending.pop()) {
      const [id, folder] = next;
      for (const child of this.children.get(id) ?? []) {
        const sub = entry(child);
        folder.subfolders.push(sub);
        // The shown tree has no loop (see the class), so each folder is reached once.
        pending.push([child.id, sub]);
      }
    }
    return top;
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

/**
 * Locks the account's folder tree until the transaction ends, as the tree's own changes do: for
 * a write that puts a form in a folder (creates, moves or copies it there), taken before the
 * folder is checked. A delete of the folder then runs wholly before (the write finds it gone:
 * 404) or after (it moves the form up with the folder's other forms). Unlocked, a form written
 * into a folder whose delete had already moved its forms up was left at the top level by the
 * foreign key's set null, or refused with 400 invalid_reference (PostgreSQL). Take it before
 * the form's row is locked: the tree's changes lock the forms they move after it.
 */
export async function lockFolders(db: Executor, { accountId }: AccountScope): Promise<void> {
  await repo.lockFolderTree(db, accountId);
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
    await repo.lockFolderTree(trx, accountId);
    const parentId = input.parent ?? null;
    await requireFolderId(trx, { accountId }, parentId);
    if (parentId !== null) checkDepth(await FolderTree.shape(trx, accountId), parentId, 1);
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
    await repo.lockFolderTree(trx, accountId);
    const folder = await requireFolder(trx, accountId, folderId);
    const update: { name?: string; parent_id?: number | null } = {};
    if (input.name !== undefined) update.name = input.name;
    if (input.parent !== undefined) {
      const tree = await FolderTree.shape(trx, accountId);
      // A folder in a stored loop is shown at the top level: its stored parent sent again is a
      // move back into the loop, checked (and refused) as any other.
      if (input.parent !== folder.parent_id || tree.isInLoop(folderId)) {
        await requireFolderId(trx, { accountId }, input.parent);
        if (input.parent !== null && tree.leadsTo(input.parent, folderId)) {
          throw invalid('folder_cycle', 'body.parent', 'a folder cannot move into itself or one of its subfolders');
        }
        checkDepth(tree, input.parent, tree.height(folderId));
        update.parent_id = input.parent;
      }
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
    await repo.lockFolderTree(trx, accountId);
    await requireFolder(trx, accountId, folderId);
    // Up to the parent it is shown under: the top level for a folder in a stored loop, whose
    // stored parent may be one of the subfolders that move (which would loop on itself).
    const parentId = (await FolderTree.shape(trx, accountId)).parentOf(folderId);
    await repo.moveSubfolders(trx, accountId, folderId, parentId, ctx.clock.now());
    await moveFormsOfFolder(trx, accountId, folderId, parentId);
    await repo.deleteFolder(trx, accountId, folderId);
    return { id: folderId };
  });
}
