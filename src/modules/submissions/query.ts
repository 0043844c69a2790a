import { documentsOfSubmission } from '../docmerge/repository.js';
import { toGeneratedDocument } from '../docmerge/documents.js';
import { type FormKeys } from '../../crypto/envelope.js';
import type { SubmissionRow } from '../../db/schema.js';
import { NotFoundError } from '../../errors.js';
import { isoTime, LAST_ISO_INSTANT, page, type Page } from '../../http/schemas.js';
import { openDownload, type Download } from '../uploads/service.js';
import { easternDay, FIRST_YEAR, lowerBound, parseWallTime, upperBound, type WallTime } from './eastern-time.js';
import { fieldToken, queryWords, type Term } from './keywords.js';
import * as repo from './repository.js';
import type {
  AccountSearchQuery,
  CountQuery,
  Submission,
  SubmissionFilters,
  SubmissionListItem,
  SubmissionListQuery,
} from './schemas.js';
import { fileRefs, normalize } from './values.js';
import {
  type FormDefinition,
  type SubmissionsDeps,
  keysFor,
  loadDefinition,
  loadDefinitionAndCounts,
  parseData,
  requireSubmission,
} from './definitions.js';
import { derived, fail, matches } from './indexing.js';
import { listItem, showsData, toSubmission } from './presentation.js';
import { memberOf, type AccountScope, type Caller, type FormRef, type SubmissionRef } from '../permissions/caller.js';

export async function getSubmission(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { submissionId: id }: SubmissionRef,
  password?: string,
): Promise<Submission> {
  const { row, def } = await requireSubmission(deps, { accountId }, { submissionId: id });
  const submission = toSubmission(def, row, parseData(def, row, await keysFor(deps, def, password)));
  const documents = await documentsOfSubmission(deps.ctx.db, id);
  // Listed only when there are some, so that the record is the create's and the lists' otherwise.
  return documents.length === 0 ? submission : { ...submission, documents: documents.map(toGeneratedDocument) };
}

/** An Eastern wall-clock time of a query, or a 400 naming property. */
function wallTime(text: string, property: string): WallTime {
  const t = parseWallTime(text);
  if (!t) fail('validation_failed', [{ property, message: 'is not a real date and time' }]);
  if (t.year < FIRST_YEAR) fail('validation_failed', [{ property, message: `must be in ${FIRST_YEAR} or later` }]);
  return t;
}

export function timeBound(text: string | undefined, property: string, bound: 'lower' | 'upper'): number | undefined {
  if (text === undefined) return undefined;
  const t = wallTime(text, property);
  return bound === 'lower' ? lowerBound(t) : upperBound(t);
}

/** The list filters as the repository takes them; field criteria must name fields of the form. */
export function resolveFilter(
  def: Pick<FormDefinition, 'byId'> | undefined,
  q: SubmissionFilters,
): repo.ResolvedFilter {
  const from = timeBound(q.minTime, 'query.minTime', 'lower');
  const to = timeBound(q.maxTime, 'query.maxTime', 'upper');
  const terms: Term[] = [];
  for (const [n, c] of Object.entries(q.search ?? {}).sort(([a], [b]) => Number(a) - Number(b))) {
    if (def && !def.byId.has(c.fieldId))
      fail('validation_failed', [
        { property: `query.search[${n}].fieldId`, message: `this form has no field ${c.fieldId}` },
      ]);
    const prefix = c.value.endsWith('*');
    terms.push({ token: fieldToken(c.fieldId, normalize(prefix ? c.value.slice(0, -1) : c.value)), prefix });
  }
  const keywords = q.keyword === undefined ? [] : queryWords(q.keyword);
  for (const word of keywords) terms.push({ token: word, prefix: true });
  return { from, to, terms, impossible: q.keyword !== undefined && keywords.length === 0 };
}

function isUnfiltered(f: repo.ResolvedFilter): boolean {
  return f.from === undefined && f.to === undefined && f.terms.length === 0 && !f.impossible;
}

/**
 * An encrypted form's index holds nothing to match, so a search opens every submission in the
 * time range and tests it here: one decryption per submission of the form, per request.
 */
async function searchSealed(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  def: FormDefinition,
  keys: FormKeys,
  filter: repo.ResolvedFilter,
  page: repo.PageRequest,
): Promise<repo.Listing> {
  const { db } = deps.ctx;
  const range: repo.ResolvedFilter = { from: filter.from, to: filter.to, terms: [] };
  const rows: SubmissionRow[] = [];
  let total = 0;
  let after: number | undefined;
  for (;;) {
    const batch = await repo.nextBatch(db, accountId, def.formId, range, after, page.order, 500);
    for (const row of batch) {
      if (!matches(derived(def, parseData(def, row, keys)).tokens, filter.terms)) continue;
      if (total >= page.offset && rows.length < page.limit) rows.push(row);
      total++;
    }
    if (batch.length < 500) return { rows, total };
    after = batch[batch.length - 1]!.id;
  }
}

export async function listSubmissions(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
  q: SubmissionListQuery,
  password?: string,
): Promise<Page & { submissions: SubmissionListItem[] }> {
  const { def, submissionsCount, submissionsVersion } = await loadDefinitionAndCounts(deps, { accountId }, { formId });
  const filter = resolveFilter(def, q);
  // The password is needed to show values or names, and to search, on an encrypted form.
  const keys = showsData(q) || q.prettyName || filter.terms.length > 0 ? await keysFor(deps, def, password) : undefined;
  if (keys && filter.terms.length > 0) {
    const order = q.order.toLowerCase() as 'asc' | 'desc';
    const { rows, total } = await searchSealed(deps, { accountId }, def, keys, filter, {
      order,
      limit: q.pageSize,
      offset: (q.pageNumber - 1) * q.pageSize,
    });
    return { submissions: rows.map((r) => listItem(def, r, q, keys)), ...page(total, q.pageNumber, q.pageSize) };
  }
  // Counting a filtered million rows costs more than the page; the count holds until a
  // submission of the form changes, which moves the version it is kept under.
  const totalKey = `${formId}:${JSON.stringify([filter.from, filter.to, filter.terms, filter.impossible])}`;
  const version = String(submissionsVersion);
  let knownTotal = isUnfiltered(filter) ? submissionsCount : deps.totals.get(totalKey, version);
  // A time range alone is counted from the hourly counts, not row by row.
  if (knownTotal === undefined && filter.terms.length === 0 && !filter.impossible)
    knownTotal = await repo.countSubmissions(deps.ctx.db, formId, filter.from, filter.to);
  const { rows, total } = await repo.listSubmissions(deps.ctx.db, accountId, formId, filter, {
    order: q.order.toLowerCase() as 'asc' | 'desc',
    limit: q.pageSize,
    offset: (q.pageNumber - 1) * q.pageSize,
    knownTotal,
  });
  deps.totals.set(totalKey, version, total);
  return { submissions: rows.map((r) => listItem(def, r, q, keys)), ...page(total, q.pageNumber, q.pageSize) };
}

/**
 * Across every live form of the account: keyword search, newest first, with the standardized
 * data. Encrypted forms index no words, so their submissions are never found here.
 */
export async function searchAccount(
  deps: SubmissionsDeps,
  caller: Caller,
  q: AccountSearchQuery,
): Promise<Page & { submissions: SubmissionListItem[] }> {
  const { accountId } = caller;
  const visibleTo = memberOf(caller);
  const keywords = queryWords(q.search);
  const filter: repo.ResolvedFilter = {
    terms: keywords.map((token) => ({ token, prefix: true })),
    impossible: keywords.length === 0,
    visibleTo,
  };
  const { rows, total } = await repo.listSubmissions(deps.ctx.db, accountId, undefined, filter, {
    order: 'desc',
    limit: q.pageSize,
    offset: (q.pageNumber - 1) * q.pageSize,
  });
  const submissions: SubmissionListItem[] = [];
  for (const row of rows) {
    const def = await loadDefinition(deps, { accountId }, { formId: row.form_id });
    // A form that is encrypted, or being converted, shows no values here: that takes its password.
    const sealed = def.form.encryption_key !== null;
    submissions.push(
      listItem(
        def,
        row,
        { data: !sealed, expandData: !sealed, prettyName: !sealed, dataFormat: sealed ? 'legacy' : 'standardized' },
        undefined,
      ),
    );
  }
  return { submissions, ...page(total, q.pageNumber, q.pageSize) };
}

export async function countSubmissions(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
  q: CountQuery,
): Promise<{ formId: number; count: number; from: string | null; to: string | null }> {
  const { submissionsCount } = await loadDefinitionAndCounts(deps, { accountId }, { formId });
  let from: number | undefined;
  let to: number | undefined;
  const start = q.startDate === undefined ? undefined : wallTime(q.startDate, 'query.startDate');
  if (q.lookbackPeriod !== undefined) {
    // The lookback counts whole Eastern days: the day of startDate (or today) and the days before it.
    const day = start ?? { ...easternDay(deps.ctx.clock.now()), hour: 0, minute: 0, second: 0, dateOnly: true };
    const last =
      start && !start.dateOnly
        ? upperBound(start)
        : upperBound({ ...day, hour: 0, minute: 0, second: 0, dateOnly: true });
    const first = new Date(Date.UTC(day.year, day.month - 1, day.day - q.lookbackPeriod + 1));
    from = lowerBound({
      year: first.getUTCFullYear(),
      month: first.getUTCMonth() + 1,
      day: first.getUTCDate(),
      hour: 0,
      minute: 0,
      second: 0,
      dateOnly: true,
    });
    to = last;
  } else if (start) {
    from = lowerBound(start);
  }
  const count =
    from === undefined && to === undefined
      ? submissionsCount
      : await repo.countSubmissions(deps.ctx.db, formId, from, to);
  // The end of 9999-12-31 in Eastern Time is in the year 10000 in UTC, which no ISO time (and no submission) reaches.
  return {
    formId,
    count,
    from: from === undefined ? null : isoTime(Math.min(from, LAST_ISO_INSTANT)),
    to: to === undefined ? null : isoTime(Math.min(to, LAST_ISO_INSTANT)),
  };
}

/** The index-th file of a submission's field; on an encrypted form the password opens it. 404 for no such file. */
export async function openSubmissionFile(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { submissionId }: SubmissionRef,
  { fieldId, index }: { fieldId: number; index: number },
  password?: string,
): Promise<Download> {
  const { row, def } = await requireSubmission(deps, { accountId }, { submissionId });
  // A deleted field's values stay in the row, hidden from every read: its files too.
  if (!def.byId.has(fieldId)) throw new NotFoundError('file_not_found');
  const keys = await keysFor(deps, def, password);
  const file = fileRefs(parseData(def, row, keys).get(fieldId))?.[index];
  if (!file) throw new NotFoundError('file_not_found');
  return openDownload(deps.ctx, { accountId }, { submissionId }, file, keys);
}
