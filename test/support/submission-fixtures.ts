/**
 * Shared setup of the submission tests: a form with a field of every kind a submission is
 * checked against, row counts read straight from the tables, and created times set
 * directly in the database (test setup, not a mock: the service reads them back as stored).
 */
import assert from 'node:assert/strict';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.js';
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
  const { form_id: formId } = await app.server.db.kysely
    .updateTable('submissions')
    .set({ created_at: ms })
    .where('id', '=', id)
    .returning('form_id')
    .executeTakeFirstOrThrow();
  await rewriteHours(app, formId);
}

/**
 * The form's hourly counts and their ids' bounds, as the service would have written them for
 * the rows' times (src/modules/forms/counts.ts), for rows put in or moved by a test: the
 * service itself never moves a created_at.
 */
export async function rewriteHours(app: TestApp, formId: number): Promise<void> {
  const db = app.server.db.kysely;
  await db.deleteFrom('submission_hours').where('form_id', '=', formId).execute();
  await sql`INSERT INTO submission_hours (form_id, hour, slot, n, first_id, last_id)
    SELECT form_id, created_at / 3600000, 0, count(*), min(id), max(id) FROM submissions
    WHERE form_id = ${formId} GROUP BY form_id, created_at / 3600000`.execute(db);
}

/**
 * The form's hours (submission_hours) bound the ids of the rows created in them: each hour
 * with rows has bounds that hold them, and no slot counts submissions without bounds. A
 * delete leaves the bounds, so they may be wider than the rows left.
 */
export async function assertHourBounds(db: Kysely<Database>, formId: number): Promise<void> {
  const rows = await sql<{ hour: number; low: number; high: number }>`
    SELECT created_at / 3600000 AS hour, min(id) AS low, max(id) AS high FROM submissions
    WHERE form_id = ${formId} GROUP BY created_at / 3600000`.execute(db);
  const hours = await sql<{ hour: number; first: number | null; last: number | null; unbounded: number }>`
    SELECT hour, min(first_id) AS first, max(last_id) AS last,
      sum(CASE WHEN n > 0 AND first_id IS NULL THEN 1 ELSE 0 END) AS unbounded
    FROM submission_hours WHERE form_id = ${formId} GROUP BY hour`.execute(db);
  const byHour = new Map(hours.rows.map((h) => [Number(h.hour), h]));
  assert.ok(rows.rows.length > 0, 'the form has rows');
  for (const r of rows.rows) {
    const h = byHour.get(Number(r.hour));
    const what = `hour ${r.hour}: ids ${r.low}..${r.high}, bounds ${h?.first}..${h?.last}`;
    assert.ok(h && h.first !== null && h.last !== null, what);
    assert.ok(Number(h.first) <= Number(r.low) && Number(h.last) >= Number(r.high), what);
  }
  for (const h of hours.rows) assert.equal(Number(h.unbounded), 0, `hour ${h.hour}: a slot counts rows without bounds`);
}

/** Epoch milliseconds of an ISO instant. */
export const at = (iso: string): number => Date.parse(iso);
