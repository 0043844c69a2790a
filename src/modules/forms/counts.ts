import { sql, type ExpressionBuilder } from 'kysely';
import { engineOf } from '../../db/engine.js';
import { hotQuery } from '../../db/hot-query.js';
import type { Database } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

/**
 * The repository of forms' submission counts (form_submission_counts, submission_hours;
 * migration 0014). They are not kept on the form's row: a write adds to the slot of its
 * connection, so concurrent writers to one form on PostgreSQL do not queue on one row lock,
 * and readers sum a form's few slots.
 */

export const HOUR_MS = 3_600_000;

/** The form's submission count, as a column of a select from forms. */
export function submissionsCountOf(eb: ExpressionBuilder<Database, 'forms'>) {
  const sum = eb
    .selectFrom('form_submission_counts')
    .select(sql<number>`coalesce(sum(n), 0)`.as('n'))
    .whereRef('form_submission_counts.form_id', '=', 'forms.id');
  return sql<number>`(${sum})`.as('submissions_count');
}

/** The sum of the form's write versions: goes up with every create, edit and delete. */
export function submissionsVersionOf(eb: ExpressionBuilder<Database, 'forms'>) {
  const sum = eb
    .selectFrom('form_submission_counts')
    .select(sql<number>`coalesce(sum(version), 0)`.as('v'))
    .whereRef('form_submission_counts.form_id', '=', 'forms.id');
  return sql<number>`(${sum})`.as('submissions_version');
}

/** A form's submission count, alone. */
export async function countOfForm(db: Executor, formId: number): Promise<number> {
  const row = await db
    .selectFrom('form_submission_counts')
    .select(sql<number>`coalesce(sum(n), 0)`.as('n'))
    .where('form_id', '=', formId)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** A form's submission count and write version, alone. */
export async function countersOfForm(
  db: Executor,
  formId: number,
): Promise<{ submissions_count: number; submissions_version: number }> {
  const row = await db
    .selectFrom('form_submission_counts')
    .select([sql<number>`coalesce(sum(n), 0)`.as('n'), sql<number>`coalesce(sum(version), 0)`.as('v')])
    .where('form_id', '=', formId)
    .executeTakeFirst();
  return { submissions_count: Number(row?.n ?? 0), submissions_version: Number(row?.v ?? 0) };
}

/** key1 of the lock on a limited form's creates: "Flim" in ASCII (processes' locks use "Form"). */
const LIMIT_LOCK_NAMESPACE = 0x466c696d;

/**
 * For a create on a form with a submission limit: waits until no other create of the form
 * holds the form's limit lock, takes it until this transaction ends, and then reads the
 * form's revision and count, which include every create that held it before. So a count
 * checked against the limit stays exact until this create commits, across connections and
 * processes. Forms without a limit never take it, and their creates stay concurrent (the
 * lock is no row lock: it holds up no other write). Undefined when the form is gone.
 */
export async function holdCountOfForm(
  db: Executor,
  accountId: number,
  formId: number,
): Promise<{ revision: number; count: number } | undefined> {
  await engineOf(db).serialize(db, LIMIT_LOCK_NAMESPACE, formId);
  // A statement of its own, after the lock: on PostgreSQL it reads as of its own start.
  const row = await db
    .selectFrom('forms')
    .select((eb) => ['revision', submissionsCountOf(eb)])
    .where('id', '=', formId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row && { revision: row.revision, count: Number(row.submissions_count) };
}

/** Submissions created in whole hours from first to end (exclusive); either end open. */
export async function countOfHours(
  db: Executor,
  formId: number,
  first: number | undefined,
  end: number | undefined,
): Promise<number> {
  const row = await db
    .selectFrom('submission_hours')
    .select(sql<number>`coalesce(sum(n), 0)`.as('n'))
    .where('form_id', '=', formId)
    .$if(first !== undefined, (q) => q.where('hour', '>=', first!))
    .$if(end !== undefined, (q) => q.where('hour', '<', end!))
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * What a form's hours from first to last (inclusive; either open) say of its ids: the
 * smallest and largest id of the submissions created in them (bounds, as deletes leave them;
 * null where none were, or where an hour's slot counts submissions without bounds, which no
 * create path writes: rows put in by hand), and how many submissions the hour `counted` holds.
 */
export async function idBoundsOfHours(
  db: Executor,
  formId: number,
  first: number | undefined,
  last: number | undefined,
  counted: number,
): Promise<{ low: number | null; high: number | null; inCounted: number }> {
  const row = await db
    .selectFrom('submission_hours')
    .select((eb) => [
      eb.fn.min('first_id').as('low'),
      eb.fn.max('last_id').as('high'),
      sql<number>`coalesce(sum(CASE WHEN hour = ${counted} THEN n ELSE 0 END), 0)`.as('in_counted'),
      sql<number>`coalesce(sum(CASE WHEN n > 0 AND first_id IS NULL THEN 1 ELSE 0 END), 0)`.as('unbounded'),
    ])
    .where('form_id', '=', formId)
    .$if(first !== undefined, (q) => q.where('hour', '>=', first!))
    .$if(last !== undefined, (q) => q.where('hour', '<=', last!))
    .executeTakeFirst();
  const bound = (v: number | null | undefined) =>
    v === null || v === undefined || Number(row!.unbounded) > 0 ? null : Number(v);
  return { low: bound(row?.low), high: bound(row?.high), inCounted: Number(row?.in_counted ?? 0) };
}

/**
 * Records that a submission of the form was created (+1, id: the new row's), deleted (-1) or
 * edited (0), created at createdAt: keeps the count and its hour (and the hour's ids' bounds)
 * right and moves the version that cached totals check. Returns the form's revision as of this
 * write, read under a share lock that lasts until commit: a change to the form (which updates
 * its row) waits for this write to commit, or this write sees its new revision, which the
 * writer compares with the definition it checked the values against. Undefined when the form
 * is gone.
 */
export async function noteSubmissionChange(
  db: Executor,
  accountId: number,
  formId: number,
  delta: number,
  createdAt: number,
  id: number | null = null,
): Promise<number | undefined> {
  const engine = engineOf(db);
  const hour = Math.floor(createdAt / HOUR_MS);
  if (engine.writableCtes) {
    const slot = engine.countSlot();
    // One round trip: the lock and both counters in one statement.
    const { rows } = await sql<{ revision: number }>`
      WITH f AS (SELECT revision FROM forms WHERE id = ${formId} AND account_id = ${accountId} FOR SHARE),
      c AS (
        INSERT INTO form_submission_counts (form_id, slot, n, version)
        SELECT ${formId}, ${slot}, ${delta}, 1 FROM f
        ON CONFLICT (form_id, slot) DO UPDATE
        SET n = form_submission_counts.n + excluded.n, version = form_submission_counts.version + 1
      ),
      h AS (
        INSERT INTO submission_hours (form_id, hour, slot, n, first_id, last_id)
        SELECT ${formId}, ${hour}, ${slot}, ${delta}, ${id}::int, ${id}::int FROM f WHERE ${delta}::int <> 0
        ON CONFLICT (form_id, hour, slot) DO UPDATE SET ${HOUR_ADDED}
      )
      SELECT revision FROM f`.execute(db);
    return rows[0]?.revision;
  }
  const [form] = await revisionForWrite(db, formId, accountId);
  if (!form) return undefined;
  await addToCount(db, formId, delta, 1);
  if (delta !== 0) await addToHour(db, formId, hour, delta, id, id);
  return form.revision;
}

// The statements of noteSubmissionChange where a database has no writable CTEs (SQLite): run
// on every create, edit and delete, and built once (hotQuery), as building one costs about as
// much as running it.
export const revisionForWrite = hotQuery(2, (db, formId: number, accountId: number) =>
  engineOf(db).shareRows(
    db.selectFrom('forms').select('revision').where('id', '=', formId).where('account_id', '=', accountId),
  ),
);

/** Adds n to the count of the form's slot and version (always 1, an argument: see hotQuery) to its version. */
export const addToCount = hotQuery(3, (db, formId: number, n: number, version: number) =>
  db
    .insertInto('form_submission_counts')
    .values({ form_id: formId, slot: engineOf(db).countSlot(), n, version })
    .onConflict((oc) =>
      oc.columns(['form_id', 'slot']).doUpdateSet((eb) => ({
        n: eb('form_submission_counts.n', '+', eb.ref('excluded.n')),
        version: eb('form_submission_counts.version', '+', eb.ref('excluded.version')),
      })),
    ),
);

/**
 * Adds n to the count of the form's hour and slot, and widens the hour's bounds to the ids
 * (null for none: a delete's).
 */
export const addToHour = hotQuery(
  5,
  (db, formId: number, hour: number, n: number, firstId: number | null, lastId: number | null) =>
    db
      .insertInto('submission_hours')
      .values({ form_id: formId, hour, slot: engineOf(db).countSlot(), n, first_id: firstId, last_id: lastId })
      .onConflict((oc) =>
        oc.columns(['form_id', 'hour', 'slot']).doUpdateSet({
          n: sql`submission_hours.n + excluded.n`,
          first_id: widenedBound('first_id'),
          last_id: widenedBound('last_id'),
        }),
      ),
);

/**
 * An hour's bound widened by the one a write brings (excluded's), in SQL both databases run:
 * a null on either side is no bound (SQLite's two-argument min() of a null is null, and
 * PostgreSQL has no such min()).
 */
function widenedBound(column: 'first_id' | 'last_id') {
  const [kept, given] = [`submission_hours.${column}`, `excluded.${column}`];
  const wider = column === 'first_id' ? '<=' : '>=';
  return sql<number | null>`CASE WHEN ${sql.raw(`${kept} ${wider} ${given}`)} THEN ${sql.raw(kept)}
    ELSE coalesce(${sql.raw(`${given}, ${kept}`)}) END`;
}

/** The SET of an insert into submission_hours that met its row (ON CONFLICT): what every create path adds. */
export const HOUR_ADDED = sql`n = submission_hours.n + excluded.n, first_id = ${widenedBound('first_id')},
  last_id = ${widenedBound('last_id')}`;
