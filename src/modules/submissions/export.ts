import { TYPE_RULES } from '../fields/types.js';
import * as repo from './repository.js';
import type { SubmissionFilters } from './schemas.js';
import { bulkReaderOf } from '../../db/bulk-reader.js';
import type { SubmissionRow } from '../../db/schema.js';
import { isoTime } from '../../http/schemas.js';
import { type SubmissionsDeps, keysFor, loadDefinition, parseData, parseDataObject } from './definitions.js';
import { displayValue, type StoredValue } from './values.js';
import { derived, matches } from './indexing.js';
import { toSubmission } from './presentation.js';
import { resolveFilter } from './query.js';
import type { AccountScope, FormRef } from '../permissions/caller.js';

// OWASP's list (= + - @, and a tab or carriage return first), looked for past the blanks and
// line breaks that spreadsheets skip before a formula, and in the full-width forms that some
// of them read as the same signs.
// eslint-disable-next-line no-control-regex -- control characters before a sign are looked through
const FORMULA_START = /^(?:[\t\r]|[\s\u0000-\u001f\u007f]*[=+\-@\uff1d\uff0b\uff0d\uff20])/;

const NEEDS_QUOTES = /[",\r\n]/;

/** Rows read per query: enough to make the query's own cost small, few enough to keep memory flat. */
const BATCH = 250;

function csvCell(text: string | null): string {
  if (text === null || text === '') return '';
  // A cell that a spreadsheet would run as a formula is prefixed with a quote mark.
  const safe = FORMULA_START.test(text) ? `'${text}` : text;
  return NEEDS_QUOTES.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

export interface ExportStream {
  contentType: string;
  filename: string;
  lines: AsyncGenerator<string | Buffer>;
}

/**
 * Every matching submission as CSV (one column per input field, displayed values) or as
 * NDJSON (detailed records). Checks the form and the filters first, so that errors come
 * before any byte is sent; then reads in batches of BATCH by id, each after the socket took the last, so memory stays flat.
 */
export async function exportSubmissions(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
  q: SubmissionFilters & { format: 'csv' | 'ndjson' },
  password?: string,
): Promise<ExportStream> {
  const def = await loadDefinition(deps, { accountId }, { formId });
  const filter = resolveFilter(def, q);
  const keys = await keysFor(deps, def, password);
  // An encrypted form is searched by opening each row (see searchSealed); the range still comes from the index.
  // A keyword of no words matches nothing, as the list says, whether or not the form is encrypted.
  const indexed: repo.ResolvedFilter = keys
    ? { from: filter.from, to: filter.to, terms: [], impossible: filter.impossible }
    : filter;
  const order = q.order.toLowerCase() as 'asc' | 'desc';
  const columns = def.fields.filter((f) => TYPE_RULES[f.type].input);
  // Through a connection of its own where the database has one (see bulkReaderOf).
  const db = bulkReaderOf(deps.ctx.db);
  const csvRow = (row: SubmissionRow, values: Record<string, StoredValue>): string => {
    let line = `${row.id},${csvCell(isoTime(row.created_at))},${csvCell(row.remote_addr)},${csvCell(row.user_agent)}`;
    for (const f of columns) {
      const value = values[f.id];
      line += value === undefined ? ',' : `,${csvCell(displayValue(f, value))}`;
    }
    return `${line}\r\n`;
  };
  async function* lines(): AsyncGenerator<string | Buffer> {
    if (q.format === 'csv')
      yield `${['id', 'timestamp', 'remoteAddr', 'userAgent', ...columns.map((f) => f.label)].map(csvCell).join(',')}\r\n`;
    let after: number | undefined;
    for (;;) {
      // One bounded batch at a time, each read after the consumer took the last one: the
      // stream pulls as the socket drains, so memory holds one batch however many rows match.
      const rows = await repo.nextBatch(db, accountId, formId, indexed, after, order, BATCH);
      // Each batch goes to the socket as bytes of its own. In some processes (23 exports of 81
      // on one machine, for the same export) every batch's text outlived a scavenge, and a
      // million rows left 130–160 MiB of dead strings in the old generation for its next
      // collection; as bytes, they count as external memory, which starts that collection
      // after 64 MiB (such runs grew 72–77 MiB, the others 20–34 as before). Why a process
      // takes that way was not found: no stream between here and the socket held more than
      // one batch (docs/performance.md, fifty-first pass).
      const parts: string[] = [];
      for (const row of rows) {
        if (keys && filter.terms.length > 0) {
          const data = parseData(def, row, keys);
          if (!matches(derived(def, data).tokens, filter.terms)) continue;
        }
        parts.push(
          q.format === 'ndjson'
            ? `${JSON.stringify(toSubmission(def, row, parseData(def, row, keys)))}\n`
            : csvRow(row, parseDataObject(def, row, keys)),
        );
      }
      if (parts.length > 0) yield Buffer.from(parts.join(''));
      if (rows.length < BATCH) return;
      after = rows[rows.length - 1]!.id;
    }
  }
  return {
    contentType: q.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
    filename: `form-${formId}-submissions.${q.format}`,
    lines: lines(),
  };
}
