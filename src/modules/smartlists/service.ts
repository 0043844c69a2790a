import type { AppContext } from '../../context.js';
import type { SmartListOptionRow, SmartListRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { BadRequestError, ConflictError, invalid, NotFoundError, type ErrorDetail } from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import type { AccountScope, SmartListOptionRef, SmartListRef } from '../permissions/caller.js';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { enqueue } from '../../jobs/outbox.js';
import { removeFilesJob } from '../uploads/jobs.js';
import { enqueueReindex } from '../submissions/reindex.js';
import { requireImageType } from '../images/type.js';
import * as repo from './repository.js';
import { checkListGrowth, lockOptionTotals } from './form-options.js';
import {
  MAX_OPTIONS_PER_LIST,
  type BulkOptions,
  type OptionCreate,
  type OptionQuery,
  type OptionUpdate,
  type SmartList,
  type SmartListCreate,
  type SmartListOption,
  type SmartListQuery,
  type SmartListUpdate,
} from './schemas.js';

function toList(row: SmartListRow, optionsCount: number): SmartList {
  return {
    id: row.id,
    name: row.name,
    useImages: row.use_images === 1,
    optionsCount,
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

function toOption(row: SmartListOptionRow): SmartListOption {
  return {
    id: row.id,
    smartListId: row.list_id,
    label: row.label,
    value: row.value,
    order: row.display_order,
    image: row.image_key === null ? null : { contentType: row.image_type ?? '', size: row.image_size ?? 0 },
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

/** One of the account's smart lists, or 404: another account's answers the same as none. */
export async function requireList(db: Executor, { accountId }: AccountScope, listId: number): Promise<SmartListRow> {
  const list = await repo.findList(db, accountId, listId);
  if (!list) throw new NotFoundError('smart_list_not_found');
  return list;
}

async function requireOption(
  db: Executor,
  accountId: number,
  { smartListId, optionId }: SmartListOptionRef,
): Promise<SmartListOptionRow> {
  const option = await repo.findOption(db, accountId, smartListId, optionId);
  if (!option) throw new NotFoundError('smart_list_option_not_found');
  return option;
}

async function recordOf(db: Executor, row: SmartListRow): Promise<SmartList> {
  return toList(row, (await repo.countOptionsByList(db, [row.id])).get(row.id) ?? 0);
}

/**
 * The options changed: the list's updated time, and the forms whose fields show them. With
 * shownAnew (an option relabelled, revalued or removed), what those forms' stored values show
 * as, and so the words a search finds them by, may have changed: their index is made anew.
 */
async function optionsChanged(
  db: Executor,
  accountId: number,
  listId: number,
  now: number,
  shownAnew = false,
): Promise<void> {
  await repo.touchList(db, listId, now);
  const forms = await repo.reviseFormsUsingList(db, accountId, listId);
  if (shownAnew) await enqueueReindex(db, ...forms);
}

export async function listLists(
  ctx: AppContext,
  { accountId }: AccountScope,
  query: SmartListQuery,
): Promise<Page & { smartLists: SmartList[] }> {
  const { rows, total } = await repo.listLists(ctx.db, accountId, {
    search: query.query,
    limit: query.pageSize,
    offset: (query.pageNumber - 1) * query.pageSize,
  });
  const counts = await repo.countOptionsByList(
    ctx.db,
    rows.map((r) => r.id),
  );
  return {
    smartLists: rows.map((r) => toList(r, counts.get(r.id) ?? 0)),
    ...page(total, query.pageNumber, query.pageSize),
  };
}

export async function getList(ctx: AppContext, scope: AccountScope, { smartListId }: SmartListRef): Promise<SmartList> {
  return recordOf(ctx.db, await requireList(ctx.db, scope, smartListId));
}

export async function createList(
  ctx: AppContext,
  { accountId }: AccountScope,
  input: SmartListCreate,
): Promise<SmartList> {
  return transact(ctx.db, async (trx) => {
    const row = await repo.insertList(
      trx,
      { accountId, name: input.name, useImages: input.useImages ?? false },
      ctx.clock.now(),
    );
    return toList(row, 0);
  });
}

export async function updateList(
  ctx: AppContext,
  scope: AccountScope,
  { smartListId }: SmartListRef,
  input: SmartListUpdate,
): Promise<SmartList> {
  return transact(ctx.db, async (trx) => {
    await requireList(trx, scope, smartListId);
    const update: { name?: string; use_images?: number } = {};
    if (input.name !== undefined) update.name = input.name;
    if (input.useImages !== undefined) update.use_images = Number(input.useImages);
    const now = ctx.clock.now();
    // A list that stops using images lets its options' images go.
    if (input.useImages === false) {
      await removeImages(trx, smartListId);
      await repo.clearImages(trx, smartListId, now);
    }
    const row = await repo.updateList(trx, scope.accountId, smartListId, update, now);
    // Hosted pages show a list's images only while it uses them.
    if (input.useImages !== undefined) await repo.reviseFormsUsingList(trx, scope.accountId, smartListId);
    return recordOf(trx, row);
  });
}

function describeUse(fields: { id: number; label: string; formId: number; formName: string }[]): string {
  const shown = fields
    .slice(0, 20)
    .map((f) => `field ${f.id} "${f.label}" of form ${f.formId} "${f.formName}"`)
    .join('; ');
  return `Fields take their options from this smart list: ${shown}${fields.length > 20 ? `; and ${fields.length - 20} more` : ''}. Point them elsewhere first`;
}

export async function deleteList(
  ctx: AppContext,
  scope: AccountScope,
  { smartListId }: SmartListRef,
): Promise<{ id: number }> {
  return transact(ctx.db, async (trx) => {
    await requireList(trx, scope, smartListId);
    const using = await repo.fieldsUsingList(trx, scope.accountId, smartListId);
    const live = using.filter((f) => !f.formDeleted);
    if (live.length > 0) throw new ConflictError('smart_list_in_use', describeUse(live));
    // A deleted form may be restored: its fields keep the options they showed, as their own.
    const options = (await repo.optionsOfLists(trx, [smartListId])).get(smartListId) ?? [];
    await repo.detachFields(
      trx,
      scope.accountId,
      using.map((f) => f.id),
      JSON.stringify(options),
      ctx.clock.now(),
    );
    await removeImages(trx, smartListId);
    await repo.deleteList(trx, scope.accountId, smartListId);
    return { id: smartListId };
  });
}

export async function listOptions(
  ctx: AppContext,
  scope: AccountScope,
  { smartListId }: SmartListRef,
  query: OptionQuery,
): Promise<Page & { options: SmartListOption[] }> {
  await requireList(ctx.db, scope, smartListId);
  const { rows, total } = await repo.listOptions(ctx.db, smartListId, {
    search: query.query,
    limit: query.pageSize,
    offset: (query.pageNumber - 1) * query.pageSize,
  });
  return { options: rows.map(toOption), ...page(total, query.pageNumber, query.pageSize) };
}

export async function getOption(
  ctx: AppContext,
  scope: AccountScope,
  ref: SmartListOptionRef,
): Promise<SmartListOption> {
  await requireList(ctx.db, scope, ref.smartListId);
  return toOption(await requireOption(ctx.db, scope.accountId, ref));
}

/** The stored images of the list's options go once the change that lets them go commits. */
async function removeImages(trx: Executor, listId: number): Promise<void> {
  const keys = await repo.imageKeys(trx, listId);
  // In slices: a job's payload stays small.
  for (let i = 0; i < keys.length; i += 1000) await enqueue(trx, removeFilesJob, { keys: keys.slice(i, i + 1000) });
}

function tooMany(count: number, adding: number, property: string): BadRequestError | undefined {
  if (count + adding <= MAX_OPTIONS_PER_LIST) return undefined;
  return invalid('invalid_options', property, `a smart list holds at most ${MAX_OPTIONS_PER_LIST} options`);
}

export async function createOption(
  ctx: AppContext,
  scope: AccountScope,
  { smartListId }: SmartListRef,
  input: OptionCreate,
): Promise<SmartListOption> {
  return transact(ctx.db, async (trx) => {
    await requireList(trx, scope, smartListId);
    await lockOptionTotals(trx, scope.accountId);
    const value = input.value ?? input.label;
    const { count, lastOrder } = await repo.optionStats(trx, smartListId);
    const full = tooMany(count, 1, 'body');
    if (full) throw full;
    if ((await repo.takenValues(trx, smartListId, [value])).size > 0)
      throw invalid(
        'invalid_options',
        input.value === undefined ? 'body.label' : 'body.value',
        `"${value}" is already a value of this list`,
      );
    await checkListGrowth(trx, scope.accountId, smartListId, 1, 'body');
    const now = ctx.clock.now();
    const row = await repo.insertOption(trx, {
      account_id: scope.accountId,
      list_id: smartListId,
      label: input.label,
      value,
      display_order: input.order ?? lastOrder + 1,
      image_key: null,
      created_at: now,
      updated_at: now,
    });
    await optionsChanged(trx, scope.accountId, smartListId, now);
    return toOption(row);
  });
}

export async function updateOption(
  ctx: AppContext,
  scope: AccountScope,
  ref: SmartListOptionRef,
  input: OptionUpdate,
): Promise<SmartListOption> {
  return transact(ctx.db, async (trx) => {
    await requireList(trx, scope, ref.smartListId);
    const current = await requireOption(trx, scope.accountId, ref);
    if (
      input.value !== undefined &&
      input.value !== current.value &&
      (await repo.takenValues(trx, ref.smartListId, [input.value])).size > 0
    )
      throw invalid('invalid_options', 'body.value', `"${input.value}" is already a value of this list`);
    const now = ctx.clock.now();
    const row = await repo.updateOption(
      trx,
      current.id,
      { label: input.label, value: input.value, display_order: input.order },
      now,
    );
    const shownAnew = row.label !== current.label || row.value !== current.value;
    await optionsChanged(trx, scope.accountId, ref.smartListId, now, shownAnew);
    return toOption(row);
  });
}

export async function deleteOption(
  ctx: AppContext,
  scope: AccountScope,
  ref: SmartListOptionRef,
): Promise<{ id: number }> {
  return transact(ctx.db, async (trx) => {
    await requireList(trx, scope, ref.smartListId);
    const option = await requireOption(trx, scope.accountId, ref);
    if (option.image_key !== null) await enqueue(trx, removeFilesJob, { keys: [option.image_key] });
    await repo.deleteOption(trx, option.id);
    await optionsChanged(trx, scope.accountId, ref.smartListId, ctx.clock.now(), true);
    return { id: option.id };
  });
}

export async function addOptions(
  ctx: AppContext,
  scope: AccountScope,
  { smartListId }: SmartListRef,
  input: BulkOptions,
): Promise<{ id: number; added: number }> {
  return transact(ctx.db, async (trx) => {
    await requireList(trx, scope, smartListId);
    await lockOptionTotals(trx, scope.accountId);
    const entries = input.options.map((o) => ({ label: o.label, value: o.value ?? o.label }));
    const { count, lastOrder } = await repo.optionStats(trx, smartListId);
    const full = tooMany(count, entries.length, 'body.options');
    if (full) throw full;
    const taken = await repo.takenValues(
      trx,
      smartListId,
      entries.map((e) => e.value),
    );
    const problems: ErrorDetail[] = [];
    const firstAt = new Map<string, number>();
    entries.forEach((e, i) => {
      const property = `body.options[${i}].${input.options[i]!.value === undefined ? 'label' : 'value'}`;
      const earlier = firstAt.get(e.value);
      if (taken.has(e.value)) problems.push({ property, message: `"${e.value}" is already a value of this list` });
      else if (earlier !== undefined)
        problems.push({ property, message: `"${e.value}" is also the value of options[${earlier}]` });
      else firstAt.set(e.value, i);
    });
    if (problems.length > 0) {
      const first = problems[0]!;
      throw new BadRequestError(
        'invalid_options',
        `${problems.length} option${problems.length === 1 ? '' : 's'} not added, nothing written; ${first.property}: ${first.message}`,
        { details: problems },
      );
    }
    await checkListGrowth(trx, scope.accountId, smartListId, entries.length, 'body.options');
    const now = ctx.clock.now();
    await repo.insertOptions(
      trx,
      entries.map((e, i) => ({
        account_id: scope.accountId,
        list_id: smartListId,
        label: e.label,
        value: e.value,
        display_order: lastOrder + 1 + i,
        image_key: null,
        created_at: now,
        updated_at: now,
      })),
    );
    await optionsChanged(trx, scope.accountId, smartListId, now);
    return { id: smartListId, added: entries.length };
  });
}

export async function deleteAllOptions(
  ctx: AppContext,
  scope: AccountScope,
  { smartListId }: SmartListRef,
): Promise<{ id: number; deleted: number }> {
  return transact(ctx.db, async (trx) => {
    await requireList(trx, scope, smartListId);
    await removeImages(trx, smartListId);
    const deleted = await repo.deleteAllOptions(trx, smartListId);
    await optionsChanged(trx, scope.accountId, smartListId, ctx.clock.now(), deleted > 0);
    return { id: smartListId, deleted };
  });
}

async function requireImageTarget(
  db: Executor,
  scope: AccountScope,
  ref: SmartListOptionRef,
): Promise<SmartListOptionRow> {
  const list = await requireList(db, scope, ref.smartListId);
  const option = await requireOption(db, scope.accountId, ref);
  if (list.use_images !== 1) throw new BadRequestError('images_not_used');
  return option;
}

/**
 * Sets or (with null from read) removes an option's image. The list and option are checked
 * before the body is read, so that another account's ids answer 404 whatever the body holds.
 * The bytes are stored first, under a new key; the row points at them in one transaction,
 * which also queues the removal of the image they replace (or, should it fail, of the new one).
 */
export async function setOptionImage(
  ctx: AppContext,
  scope: AccountScope,
  ref: SmartListOptionRef,
  read: () => Promise<Buffer | null>,
): Promise<SmartListOption> {
  await requireImageTarget(ctx.db, scope, ref);
  const bytes = await read();
  if (bytes === null) return removeOptionImage(ctx, scope, ref).then(() => getOption(ctx, scope, ref));
  const type = requireImageType(bytes);
  const key = `smartlists/${scope.accountId}/${ref.smartListId}/${ref.optionId}-${randomBytes(12).toString('hex')}`;
  await ctx.storage.put(key, Readable.from([bytes]), { maxBytes: ctx.config.optionImageMaxBytes, contentType: type });
  try {
    return await transact(ctx.db, async (trx) => {
      const option = await requireImageTarget(trx, scope, ref);
      if (option.image_key !== null) await enqueue(trx, removeFilesJob, { keys: [option.image_key] });
      const row = await repo.setOptionImage(trx, option.id, { key, type, size: bytes.length }, ctx.clock.now());
      // Hosted pages show the image under a URL of its own: the forms that show it get a new page.
      await repo.reviseFormsUsingList(trx, scope.accountId, ref.smartListId);
      return toOption(row);
    });
  } catch (error) {
    await ctx.storage.deleteMany([key]).catch(() => undefined);
    throw error;
  }
}

export async function removeOptionImage(
  ctx: AppContext,
  scope: AccountScope,
  ref: SmartListOptionRef,
): Promise<{ id: number }> {
  return transact(ctx.db, async (trx) => {
    const option = await requireImageTarget(trx, scope, ref);
    if (option.image_key !== null) {
      await enqueue(trx, removeFilesJob, { keys: [option.image_key] });
      await repo.setOptionImage(trx, option.id, null, ctx.clock.now());
      await repo.reviseFormsUsingList(trx, scope.accountId, ref.smartListId);
    }
    return { id: option.id };
  });
}
