import type { AppContext } from '../../context.js';
import type { FieldRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { BadRequestError, NotFoundError } from '../../errors.js';
import { page, type Page } from '../../http/schemas.js';
import { touchForm } from '../forms/repository.js';
import { requireForm } from '../forms/service.js';
import {
  checkDefinition,
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
import { checkFormGrowth, lockOptionTotals } from '../smartlists/form-options.js';
import { MAX_FIELDS_PER_FORM, type Field, type FieldCreate, type FieldUpdate } from './schemas.js';
import type { AccountScope, FieldRef, FormRef } from '../permissions/caller.js';

function siblingsOf(rows: FieldRow[], except?: number): Map<number, Sibling> {
  return new Map(rows.filter((r) => r.id !== except).map((r) => [r.id, toSibling(r)]));
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
    const form = await requireForm(trx, { accountId }, { formId });
    // Before anything is read: the form's options and the list's stay as counted until the write commits.
    await lockOptionTotals(trx, accountId);
    const existing = await repo.listFields(trx, accountId, formId);
    if (existing.length >= MAX_FIELDS_PER_FORM) {
      throw new BadRequestError('too_many_fields', `A form holds at most ${MAX_FIELDS_PER_FORM} fields`);
    }
    const def = checkDefinition(
      await withSmartListOptions(trx, accountId, withDefaults(input), 'body', (input.options ?? []).length > 0),
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
    const displayOrder = def.displayOrder ?? Math.max(-1, ...existing.map((f) => f.display_order)) + 1;
    const now = ctx.clock.now();
    const row = await repo.insertField(trx, toFieldRow(def, { accountId, formId, displayOrder }, now));
    await touchForm(trx, accountId, formId, now);
    return toField(row);
  });
}

export async function updateField(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId, fieldId }: FieldRef,
  input: FieldUpdate,
): Promise<Field> {
  return transact(ctx.db, async (trx) => {
    const form = await requireForm(trx, { accountId }, { formId });
    // Before anything is read: the form's options and the list's stay as counted until the write commits.
    await lockOptionTotals(trx, accountId);
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
    const withList = await withSmartListOptions(trx, accountId, merged, 'body', (input.options ?? []).length > 0);
    const def = checkDefinition(withList, 'body', siblingsOf(all, fieldId), fieldId);
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
    await requireForm(trx, { accountId }, { formId });
    const field = await requireField(trx, accountId, formId, fieldId);
    const now = ctx.clock.now();
    // Checks on the deleted field go with it; logic left with no checks is removed.
    for (const other of await repo.listFields(trx, accountId, formId)) {
      const logic = toDefinition(other).logic;
      if (!logic || !logic.checks.some((c) => c.field === fieldId)) continue;
      const checks = logic.checks.filter((c) => c.field !== fieldId);
      await repo.setLogic(
        trx,
        accountId,
        other.id,
        checks.length > 0 ? JSON.stringify({ ...logic, checks }) : null,
        now,
      );
    }
    await repo.deleteField(trx, accountId, fieldId);
    await touchForm(trx, accountId, formId, now);
    return { id: field.id, formId, type: toField(field).type, label: field.label };
  });
}
