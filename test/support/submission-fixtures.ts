/**
 * Shared setup of the submission tests: a form with a field of every kind a submission is
 * checked against, row counts read straight from the tables, and created times set
 * directly in the database (test setup, not a mock: the service reads them back as stored).
 */
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { dialectName, type Reply, type TestAccount, type TestApp } from './helpers.js';

export const EVERY_FIELD = [
  { type: 'name', label: 'Name', required: true },
  { type: 'email', label: 'Email', unique: true },
  { type: 'phone', label: 'Phone', attributes: { format: 'us' } },
  { type: 'number', label: 'Count', attributes: { min: 0, max: 10, decimals: 1 } },
  { type: 'datetime', label: 'Day', attributes: { format: 'date', minDate: '2020-01-01', maxDate: '2030-12-31' } },
  { type: 'datetime', label: 'Clock', attributes: { format: 'time' } },
  { type: 'datetime', label: 'When', attributes: { format: 'datetime' } },
  {
    type: 'select',
    label: 'Topic',
    options: [
      { label: 'Sales', value: 'sales' },
      { label: 'Support', value: 'support' },
    ],
  },
  {
    type: 'radio',
    label: 'Size',
    options: [
      { label: 'Small', value: 's' },
      { label: 'Medium', value: 'm' },
      { label: 'Large', value: 'l' },
    ],
  },
  {
    type: 'checkbox',
    label: 'Colours',
    options: [
      { label: 'Red', value: 'red' },
      { label: 'Green', value: 'green' },
      { label: 'Blue', value: 'blue' },
    ],
    attributes: { maxSelected: 2 },
  },
  { type: 'address', label: 'Address' },
  { type: 'text', label: 'Note', attributes: { minLength: 2, maxLength: 20 } },
  { type: 'section', label: 'Intro' },
  { type: 'richtext', label: 'Blurb' },
] as const;

export type FieldKey = (typeof EVERY_FIELD)[number]['label'] | 'Ticket';

export interface EveryFieldForm {
  form: any;
  /** Field ids by label; Ticket is a required textarea shown only when Topic is support. */
  ids: Record<FieldKey, number>;
}

export async function ok(res: Promise<Reply> | Reply, what = 'request'): Promise<any> {
  const r = await res;
  assert.equal(r.status, 200, `${what}: ${r.status} ${r.text.slice(0, 500)}`);
  return r.body;
}

export async function createEveryFieldForm(acc: TestAccount, name = 'Everything'): Promise<EveryFieldForm> {
  const form = await ok(acc.post('/forms', { name, fields: EVERY_FIELD }), 'create form');
  const ids = Object.fromEntries(form.fields.map((f: any) => [f.label, f.id])) as Record<FieldKey, number>;
  const ticket = await ok(
    acc.post(`/forms/${form.id}/fields`, {
      type: 'textarea',
      label: 'Ticket',
      required: true,
      logic: {
        action: 'show',
        conditional: 'all',
        checks: [{ field: ids.Topic, condition: 'equals', option: 'support' }],
      },
    }),
    'create field with logic',
  );
  ids.Ticket = ticket.id;
  return { form, ids };
}

/** The fields entry list of a submission body, from label → value. */
export function body(
  ids: Record<string, number>,
  values: Partial<Record<FieldKey, unknown>>,
): { fields: { id: number; value: unknown }[] } {
  return { fields: Object.entries(values).map(([label, value]) => ({ id: ids[label]!, value })) };
}

export interface RowCounts {
  submissions: number;
  /** Rows that hold the values of unique fields. */
  uniqueValues: number;
  /** SQLite's full-text index rows; always 0 on PostgreSQL, whose index is a column. */
  fts: number;
}

export async function rowCounts(app: TestApp): Promise<RowCounts> {
  const db = app.server.db.kysely;
  const count = async (table: 'submissions' | 'submission_unique_values') =>
    Number(
      (
        await db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  const fts =
    dialectName === 'sqlite'
      ? Number((await sql<{ n: number }>`SELECT count(*) AS n FROM submissions_fts`.execute(db)).rows[0]!.n)
      : 0;
  return { submissions: await count('submissions'), uniqueValues: await count('submission_unique_values'), fts };
}

/** Sets when a submission was created, as if it had been made then. */
export async function setCreated(app: TestApp, id: number, ms: number): Promise<void> {
  const db = app.server.db.kysely;
  const { form_id: formId } = await db
    .updateTable('submissions')
    .set({ created_at: ms })
    .where('id', '=', id)
    .returning('form_id')
    .executeTakeFirstOrThrow();
  // The form's hourly counts, as the service would have written them for these times
  // (src/modules/forms/counts.ts): the service itself never moves a created_at.
  await db.deleteFrom('submission_hours').where('form_id', '=', formId).execute();
  const hours = await db.selectFrom('submissions').select(['created_at']).where('form_id', '=', formId).execute();
  const perHour = new Map<number, number>();
  for (const { created_at } of hours) {
    const hour = Math.floor(created_at / 3_600_000);
    perHour.set(hour, (perHour.get(hour) ?? 0) + 1);
  }
  if (perHour.size > 0)
    await db
      .insertInto('submission_hours')
      .values([...perHour].map(([hour, n]) => ({ form_id: formId, hour, slot: 0, n })))
      .execute();
}

/** Epoch milliseconds of an ISO instant. */
export const at = (iso: string): number => Date.parse(iso);
