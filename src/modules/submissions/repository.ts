import { sql, type SelectQueryBuilder } from 'kysely';
import type { Dialect } from '../../db/dialect.js';
import type { Database, SubmissionRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';
import { ftsMatch, tsQuery, type Term } from './keywords.js';

export interface SubmissionWrite {
  data: string;
  prettyName: string | null;
  /** Every token of the full-text index: words and field tokens (see keywords.ts). */
  tokens: string[];
  /** Normalized values of the fields marked unique. */
  unique: { fieldId: number; norm: string }[];
  now: number;
}

export interface ResolvedFilter {
  from?: number;
  to?: number;
  /** Full-text terms that must all appear: keyword words and field criteria. */
  terms: Term[];
  /** A filter that nothing can match (a keyword with no words in it). */
  impossible?: boolean;
}

type SubmissionQuery = SelectQueryBuilder<Database, 'submissions', object>;

async function writeSearchable(db: Executor, dialect: Dialect, id: number, formId: number, w: SubmissionWrite): Promise<void> {
  if (w.unique.length > 0) {
    await db
      .insertInto('submission_unique_values')
      .values(w.unique.map((v) => ({ submission_id: id, form_id: formId, field_id: v.fieldId, value_norm: v.norm })))
      .execute();
  }
  if (dialect === 'postgres') {
    // array_to_tsvector takes the tokens as they are: no parser, no dictionary.
    await db
      .updateTable('submissions')
      .set({ search_vector: sql`array_to_tsvector(${w.tokens}::text[])` })
      .where('id', '=', id)
      .execute();
  } else {
    await db.insertInto('submissions_fts').values({ rowid: id, content: w.tokens.join(' ') }).execute();
  }
}

async function clearSearchable(db: Executor, dialect: Dialect, id: number): Promise<void> {
  await db.deleteFrom('submission_unique_values').where('submission_id', '=', id).execute();
  if (dialect === 'sqlite') await db.deleteFrom('submissions_fts').where('rowid', '=', id).execute();
}

export async function insertSubmission(
  db: Executor,
  dialect: Dialect,
  row: { accountId: number; formId: number; userAgent: string; remoteAddr: string; latitude: number | null; longitude: number | null },
  w: SubmissionWrite,
): Promise<SubmissionRow> {
  const inserted = await db
    .insertInto('submissions')
    .values({
      account_id: row.accountId,
      form_id: row.formId,
      created_at: w.now,
      updated_at: w.now,
      user_agent: row.userAgent,
      remote_addr: row.remoteAddr,
      latitude: row.latitude,
      longitude: row.longitude,
      data: w.data,
      pretty_name: w.prettyName,
    })
    .returning(['id', 'account_id', 'form_id', 'created_at', 'updated_at', 'user_agent', 'remote_addr', 'latitude', 'longitude', 'data', 'pretty_name'])
    .executeTakeFirstOrThrow();
  await writeSearchable(db, dialect, inserted.id, row.formId, w);
  return inserted;
}

export async function updateSubmission(db: Executor, dialect: Dialect, accountId: number, existing: SubmissionRow, w: SubmissionWrite): Promise<SubmissionRow> {
  const row = await db
    .updateTable('submissions')
    .set({ data: w.data, pretty_name: w.prettyName, updated_at: w.now })
    .where('id', '=', existing.id)
    .where('account_id', '=', accountId)
    .returning(['id', 'account_id', 'form_id', 'created_at', 'updated_at', 'user_agent', 'remote_addr', 'latitude', 'longitude', 'data', 'pretty_name'])
    .executeTakeFirstOrThrow();
  await clearSearchable(db, dialect, existing.id);
  await writeSearchable(db, dialect, existing.id, existing.form_id, w);
  return row;
}

export async function deleteSubmission(db: Executor, dialect: Dialect, accountId: number, id: number): Promise<void> {
  await clearSearchable(db, dialect, id);
  await db.deleteFrom('submissions').where('id', '=', id).where('account_id', '=', accountId).execute();
}

const columns = ['submissions.id', 'submissions.account_id', 'submissions.form_id', 'submissions.created_at', 'submissions.updated_at', 'submissions.user_agent', 'submissions.remote_addr', 'submissions.latitude', 'submissions.longitude', 'submissions.data', 'submissions.pretty_name'] as const;

/** A submission of a live form of the account. */
export async function findSubmission(db: Executor, accountId: number, id: number): Promise<SubmissionRow | undefined> {
  return db
    .selectFrom('submissions')
    .innerJoin('forms', 'forms.id', 'submissions.form_id')
    .select(columns)
    .where('submissions.id', '=', id)
    .where('submissions.account_id', '=', accountId)
    .where('forms.deleted_at', 'is', null)
    .executeTakeFirst();
}

/** Another submission of the form that holds this value in a unique field, if any. */
export async function findUniqueHolder(db: Executor, formId: number, fieldId: number, norm: string, except?: number): Promise<number | undefined> {
  let q = db.selectFrom('submission_unique_values').select('submission_id').where('form_id', '=', formId).where('field_id', '=', fieldId).where('value_norm', '=', norm);
  if (except !== undefined) q = q.where('submission_id', '!=', except);
  return (await q.executeTakeFirst())?.submission_id;
}

/** Applies the time range and the full-text terms to a query over submissions of one scope. */
function applyFilter(dialect: Dialect, query: SubmissionQuery, f: ResolvedFilter): SubmissionQuery | undefined {
  if (f.impossible) return undefined;
  let q = query;
  if (f.from !== undefined) q = q.where('submissions.created_at', '>=', f.from);
  if (f.to !== undefined) q = q.where('submissions.created_at', '<=', f.to);
  if (f.terms.length > 0) {
    q = q.where(
      dialect === 'postgres'
        ? sql<boolean>`submissions.search_vector @@ ${tsQuery(f.terms)}::tsquery`
        : sql<boolean>`submissions.id IN (SELECT rowid FROM submissions_fts WHERE submissions_fts MATCH ${ftsMatch(f.terms)})`,
    );
  }
  return q;
}

function scope(db: Executor, accountId: number, formId: number | undefined): SubmissionQuery {
  let q = db.selectFrom('submissions').where('submissions.account_id', '=', accountId);
  if (formId !== undefined) q = q.where('submissions.form_id', '=', formId);
  return q;
}

export interface Listing {
  rows: SubmissionRow[];
  total: number;
}

/**
 * One page of submissions, of a form or (formId undefined) of all live forms of the
 * account, newest or oldest first. total is given when known in advance (an unfiltered
 * form listing uses the form's counter); otherwise it is counted.
 */
export async function listSubmissions(
  db: Executor,
  dialect: Dialect,
  accountId: number,
  formId: number | undefined,
  f: ResolvedFilter,
  page: { order: 'asc' | 'desc'; limit: number; offset: number; knownTotal?: number },
): Promise<Listing> {
  let base = scope(db, accountId, formId);
  if (formId === undefined) {
    const liveForms = db.selectFrom('forms').select('id').where('account_id', '=', accountId).where('deleted_at', 'is', null);
    base = base.where('submissions.form_id', 'in', liveForms);
  }
  const q = applyFilter(dialect, base, f);
  if (!q) return { rows: [], total: 0 };
  const [rows, total] = await Promise.all([
    q.select(columns).orderBy('submissions.id', page.order).limit(page.limit).offset(page.offset).execute(),
    page.knownTotal ?? q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow().then((r) => Number(r.n)),
  ]);
  return { rows, total };
}

export async function countSubmissions(db: Executor, accountId: number, formId: number, from: number | undefined, to: number | undefined): Promise<number> {
  let q = scope(db, accountId, formId);
  if (from !== undefined) q = q.where('submissions.created_at', '>=', from);
  if (to !== undefined) q = q.where('submissions.created_at', '<=', to);
  const row = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Submissions of a form in id order after a given id, for streaming exports: each batch
 * is one indexed range read, so memory stays flat however many rows there are.
 */
export async function nextBatch(
  db: Executor,
  dialect: Dialect,
  accountId: number,
  formId: number,
  f: ResolvedFilter,
  after: number | undefined,
  order: 'asc' | 'desc',
  size: number,
): Promise<SubmissionRow[]> {
  let q = applyFilter(dialect, scope(db, accountId, formId), f);
  if (!q) return [];
  if (after !== undefined) q = q.where('submissions.id', order === 'asc' ? '>' : '<', after);
  return q.select(columns).orderBy('submissions.id', order).limit(size).execute();
}
