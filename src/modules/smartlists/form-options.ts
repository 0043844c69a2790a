import { engineOf } from '../../db/engine.js';
import type { Executor } from '../../db/transaction.js';
import { BadRequestError } from '../../errors.js';
import { countOptionsByList, fieldOptionCounts, fieldsUsingList } from './repository.js';
import { MAX_OPTIONS_PER_FORM } from './schemas.js';

/**
 * The bound on the options a form shows (MAX_OPTIONS_PER_FORM): its fields' own options plus,
 * for each field that uses a smart list, the list's options, counted once per such field.
 * Counted in two indexed reads (the form's fields grouped by list, with the length of their
 * own options' JSON; then the lists' option counts), never by reading the options.
 *
 * Every write that can make a live form show more options takes lockOptionTotals first, in
 * its transaction: creating or changing a field, creating, copying or restoring a form, adding
 * options to a list. Two such writes in one account then run one after the other, and the
 * second counts what the first committed (PostgreSQL: a transaction advisory lock; SQLite's
 * one writer serializes them anyway). Writes that only lower a total take no lock.
 */

/** 'Opts': the namespace of the advisory lock, keyed by account (processes/locks.ts and forms/counts.ts use others). */
const OPTIONS_LOCK_NAMESPACE = 0x4f707473;

/** Serializes, until the transaction ends, the account's writes that can make a form show more options. */
export async function lockOptionTotals(db: Executor, accountId: number): Promise<void> {
  await engineOf(db).serialize(db, OPTIONS_LOCK_NAMESPACE, accountId);
}

/** The options each form shows now, by form id (0 for a form without fields). */
export async function optionTotals(db: Executor, accountId: number, formIds: number[]): Promise<Map<number, number>> {
  const totals = new Map<number, number>(formIds.map((id) => [id, 0]));
  const rows = await fieldOptionCounts(db, accountId, formIds);
  const lists = await countOptionsByList(db, [
    ...new Set(rows.flatMap((r) => (r.smart_list_id === null ? [] : [r.smart_list_id]))),
  ]);
  for (const r of rows) {
    const shown = r.smart_list_id === null ? Number(r.own ?? 0) : Number(r.fields) * (lists.get(r.smart_list_id) ?? 0);
    totals.set(r.form_id, (totals.get(r.form_id) ?? 0) + shown);
  }
  return totals;
}

interface Overflow {
  form: { id: number | null; name: string };
  total: number;
  /** The fields that take their options from the list that grows, when a list grows. */
  fields?: { id: number; label: string }[];
}

function nameOf({ id, name }: Overflow['form']): string {
  return id === null ? `the new form "${name}"` : `form ${id} "${name}"`;
}

/** The 400 for forms that would show more options than they may: the message names each form and its total. */
export function tooManyOptions(property: string, over: Overflow[], cause: string): BadRequestError {
  const shown = over
    .slice(0, 20)
    .map(
      (o) =>
        `${nameOf(o.form)} would show ${o.total} options` +
        (o.fields
          ? ` (through field${o.fields.length === 1 ? '' : 's'} ${o.fields.map((f) => `${f.id} "${f.label}"`).join(', ')})`
          : ''),
    )
    .join('; ');
  const more = over.length > 20 ? `; and ${over.length - 20} more forms` : '';
  const message =
    `${cause}: ${shown}${more}. A form shows at most ${MAX_OPTIONS_PER_FORM} options across its fields ` +
    "(each field's own options, and its smart list's for each field that uses one, once per such field); nothing was written";
  return new BadRequestError('too_many_options', message, { details: [{ property, message }] });
}

/**
 * Refuses a write that adds growth options (net) to what the live form shows now. Call it
 * after lockOptionTotals and before the write, with the form's fields as they are before it.
 */
export async function checkFormGrowth(
  db: Executor,
  accountId: number,
  form: { id: number; name: string },
  growth: number,
  property: string,
  cause: string,
): Promise<void> {
  if (growth <= 0) return;
  const total = ((await optionTotals(db, accountId, [form.id])).get(form.id) ?? 0) + growth;
  if (total > MAX_OPTIONS_PER_FORM) throw tooManyOptions(property, [{ form, total }], cause);
}

/** Refuses a form (a copy's source, a form being restored) that shows more options than a live form may. */
export async function checkFormTotal(
  db: Executor,
  accountId: number,
  form: { id: number; name: string },
  property: string,
  cause: string,
  as: { id: number | null; name: string } = form,
): Promise<void> {
  const total = (await optionTotals(db, accountId, [form.id])).get(form.id) ?? 0;
  if (total > MAX_OPTIONS_PER_FORM) throw tooManyOptions(property, [{ form: as, total }], cause);
}

/**
 * Refuses adding options to a list when a live form that uses it would then show more than
 * it may (each of its fields on the list shows them all). Forms that are deleted do not count:
 * one restored later is checked then. Call it after lockOptionTotals, before the options are written.
 */
export async function checkListGrowth(
  db: Executor,
  accountId: number,
  listId: number,
  adding: number,
  property: string,
): Promise<void> {
  if (adding <= 0) return;
  const byForm = new Map<number, { name: string; fields: { id: number; label: string }[] }>();
  for (const f of await fieldsUsingList(db, accountId, listId)) {
    if (f.formDeleted) continue;
    const entry = byForm.get(f.formId) ?? { name: f.formName, fields: [] };
    entry.fields.push({ id: f.id, label: f.label });
    byForm.set(f.formId, entry);
  }
  if (byForm.size === 0) return;
  const totals = await optionTotals(db, accountId, [...byForm.keys()]);
  const over: Overflow[] = [];
  for (const [formId, { name, fields }] of byForm) {
    const total = (totals.get(formId) ?? 0) + adding * fields.length;
    if (total > MAX_OPTIONS_PER_FORM) over.push({ form: { id: formId, name }, total, fields });
  }
  if (over.length > 0)
    throw tooManyOptions(
      property,
      over,
      `Adding ${adding} option${adding === 1 ? '' : 's'} to this smart list would make forms that use it show too many`,
    );
}
