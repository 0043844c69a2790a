import type { AppContext } from '../../context.js';
import type { FieldRow, FormRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { BadRequestError, NotFoundError } from '../../errors.js';
import { page, type Page } from '../../http/schemas.js';
import { findForm, lockForm, touchForm } from '../forms/repository.js';
import { requireForm } from '../forms/service.js';
import {
  appendedOrder,
  checkDefinition,
  checkTargetProblem,
  defaultValueProblem,
  toDefinition,
  toField,
  toFieldColumns,
  toFieldRow,
  toSibling,
  withDefaults,
  type Sibling,
} from './definition.js';
import * as repo from './repository.js';
import { withSmartListOptions } from './smart-list.js';
import { fillUniqueValues, uniqueValuesStale } from './unique-values.js';
import { enqueueReindex } from '../submissions/reindex.js';
import { checkFormGrowth, lockOptionTotals } from '../smartlists/form-options.js';
import { MAX_FIELDS_PER_FORM, type Field, type FieldCreate, type FieldLogic, type FieldUpdate } from './schemas.js';
import type { AccountScope, FieldRef, FormRef } from '../permissions/caller.js';

function siblingsOf(rows: FieldRow[], except?: number): Map<number, Sibling> {
  return new Map(rows.filter((r) => r.id !== except).map((r) => [r.id, toSibling(r)]));
}

/**
 * The live form, its row locked until the transaction ends (PostgreSQL; SQLite's one writer
 * serializes anyway), or 404: the field changes of one form take turns. Each checks logic
 * against the fields it reads, so a delete that read them while a check on the field it
 * removes was being written would leave that check pointing at a field that is gone.
 * Taken after lockOptionTotals where that is taken too, the order every writer takes them in.
 */
async function lockLiveForm(trx: Executor, accountId: number, formId: number): Promise<FormRow> {
  const form = await lockForm(trx, accountId, formId);
  if (!form) throw new NotFoundError('form_not_found');
  return form;
}

async function requireField(db: Executor, accountId: number, formId: number, fieldId: number): Promise<FieldRow> {
  const field = await repo.findField(db, accountId, formId, fieldId);
  if (!field) throw new NotFoundError('field_not_found');
  return field;
}

export async function listFields(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId }: FormRef,
): Promise<Page & { fields: Field[] }> {
  await requireForm(ctx.db, { accountId }, { formId });
  const fields = (await repo.listFields(ctx.db, accountId, formId)).map(toField);
  return { fields, ...page(fields.length, 1, MAX_FIELDS_PER_FORM) };
}

export async function getField(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId, fieldId }: FieldRef,
): Promise<Field> {
  await requireForm(ctx.db, { accountId }, { formId });
  return toField(await requireField(ctx.db, accountId, formId, fieldId));
}

export async function createField(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId }: FormRef,
  input: FieldCreate,
): Promise<Field> {
  return transact(ctx.db, async (trx) => {
    // Before anything is read: the form's options and the list's stay as counted until the write commits.
    await lockOptionTotals(trx, accountId);
    const form = await lockLiveForm(trx, accountId, formId);
    const existing = await repo.listFields(trx, accountId, formId);
    if (existing.length >= MAX_FIELDS_PER_FORM) {
      throw new BadRequestError('too_many_fields', `A form holds at most ${MAX_FIELDS_PER_FORM} fields`);
    }
    const def = checkDefinition(
      await withSmartListOptions(trx, accountId, withDefaults(input), 'body', input.options),
      'body',
      siblingsOf(existing),
    );
    await checkFormGrowth(
      trx,
      accountId,
      form,
      def.options.length,
      def.smartList === null ? 'body.options' : 'body.smartList',
      'This field would make its form show too many options',
    );
    const displayOrder = def.displayOrder ?? appendedOrder(Math.max(-1, ...existing.map((f) => f.display_order)));
    const now = ctx.clock.now();
    const row = await repo.insertField(trx, toFieldRow(def, { accountId, formId, displayOrder }, now));
    await touchForm(trx, accountId, formId, now);
    return toField(row);
  });
}

/**
 * Takes the checks that drop says go out of the logic of each of fields; logic left with no
 * checks is removed, so that the field shows as if it had none.
 */
async function dropChecks(
  trx: Executor,
  accountId: number,
  fields: FieldRow[],
  drop: (check: FieldLogic['checks'][number]) => boolean,
  now: number,
): Promise<void> {
  for (const other of fields) {
    const logic = toDefinition(other).logic;
    if (!logic || !logic.checks.some(drop)) continue;
    const checks = logic.checks.filter((c) => !drop(c));
    await repo.setLogic(trx, accountId, other.id, checks.length > 0 ? JSON.stringify({ ...logic, checks }) : null, now);
  }
}

/** Whether an update may need the form's stored values read again (see uniqueValuesStale). */
const mayReadValues = (input: FieldUpdate): boolean =>
  input.unique === true || input.type !== undefined || input.options !== undefined || input.smartList !== undefined;

export async function updateField(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId, fieldId }: FieldRef,
  input: FieldUpdate,
  /** An encrypted form's password: what opens its submissions when their unique values must be made anew. */
  password?: string,
): Promise<Field> {
  // The password's check (scrypt, about a third of a second) is made here, not under the
  // transaction's locks: the keys are then found kept in memory inside it.
  if (password !== undefined && mayReadValues(input)) {
    const form = await findForm(ctx.db, accountId, formId);
    if (form?.encryption_key) await ctx.formKeys.unlock(form, password);
  }
  return transact(ctx.db, async (trx) => {
    // Before anything is read: the form's options and the list's stay as counted until the write commits.
    await lockOptionTotals(trx, accountId);
    const form = await lockLiveForm(trx, accountId, formId);
    const current = await requireField(trx, accountId, formId, fieldId);
    const all = await repo.listFields(trx, accountId, formId);
    const before = toDefinition(current);
    const merged = { ...before, ...input };
    // A new type brings its own attributes and options; the old ones rarely make sense for it.
    if (input.type !== undefined && input.type !== current.type) {
      merged.attributes = input.attributes ?? {};
      merged.options = input.options ?? [];
      merged.smartList = input.smartList ?? null;
      merged.defaultValue = input.defaultValue ?? null;
    }
    // Letting go of a list (smartList: null) keeps the options the field showed, unless others are sent.
    const withList = await withSmartListOptions(trx, accountId, merged, 'body', input.options);
    // Stored logic is checked only when sent: checks that a change of the field they check left
    // behind (see below) must not refuse an edit of the label.
    // So is the stored default value, unless it or what it must be one of is sent: a smart
    // list's options replaced can leave it offered no more, and that must not refuse a relabel.
    // Attributes sent alone (a number's max) are checked against it when it fit the ones they
    // replace: they may not make it one the field refuses, but a default that fit no more
    // before (or was stored before defaults were read as values) does not refuse the change.
    const defaultSent =
      input.defaultValue !== undefined ||
      input.type !== undefined ||
      input.options !== undefined ||
      input.smartList !== undefined;
    const def = checkDefinition(
      withList,
      'body',
      siblingsOf(all, fieldId),
      fieldId,
      input.logic !== undefined,
      defaultSent ||
        (input.attributes !== undefined &&
          defaultValueProblem({ ...withList, attributes: before.attributes }) === undefined),
    );
    await checkFormGrowth(
      trx,
      accountId,
      form,
      def.options.length - before.options.length,
      def.smartList === null ? 'body.options' : 'body.smartList',
      'This change would make its form show too many options',
    );
    const now = ctx.clock.now();
    const row = await repo.updateField(trx, accountId, fieldId, {
      ...toFieldColumns(def),
      display_order: def.displayOrder ?? current.display_order,
      updated_at: now,
    });
    if (uniqueValuesStale(before, def)) {
      const property = !before.unique
        ? 'body.unique'
        : before.type !== def.type
          ? 'body.type'
          : input.smartList !== undefined
            ? 'body.smartList'
            : 'body.options';
      await fillUniqueValues(ctx, trx, { accountId, formId }, row, password, property);
    } else if (before.unique && !def.unique) {
      // What a field that is not unique leaves stored is never looked at, and turning unique
      // on again writes every value anew: removing them only keeps the table lean.
      await repo.clearUniqueValues(trx, formId, fieldId);
    }
    // Checks of other fields that the new type or options no longer fit go, as a deleted
    // field's do: left, they would hide or show their field for a value it can no longer hold.
    const target = toSibling(row);
    const was = toSibling(current);
    if (target.type !== was.type || JSON.stringify(target.options) !== JSON.stringify(was.options)) {
      const others = all.filter((f) => f.id !== fieldId);
      await dropChecks(
        trx,
        accountId,
        others,
        (c) => c.field === fieldId && checkTargetProblem(c, target) !== undefined,
        now,
      );
      // What its values show as, and so the words a search finds them by, may have changed.
      await enqueueReindex(trx, formId);
    }
    await touchForm(trx, accountId, formId, now);
    return toField(row);
  });
}

export async function deleteField(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId, fieldId }: FieldRef,
): Promise<{ id: number; formId: number; type: Field['type']; label: string }> {
  return transact(ctx.db, async (trx) => {
    // Before the logic is read: a check on this field written meanwhile is then seen, and dropped.
    await lockLiveForm(trx, accountId, formId);
    const field = await requireField(trx, accountId, formId, fieldId);
    const now = ctx.clock.now();
    // Checks on the deleted field go with it.
    await dropChecks(trx, accountId, await repo.listFields(trx, accountId, formId), (c) => c.field === fieldId, now);
    await repo.deleteField(trx, accountId, fieldId);
    // Nothing would look at its unique values again.
    await repo.clearUniqueValues(trx, formId, fieldId);
    // Its values stay in the rows, hidden: the worker takes them out of the search index.
    await enqueueReindex(trx, formId);
    await touchForm(trx, accountId, formId, now);
    return { id: field.id, formId, type: toField(field).type, label: field.label };
  });
}
