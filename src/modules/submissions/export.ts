import { TYPE_RULES } from '../fields/types.js';
import * as repo from './repository.js';
import type { SubmissionFilters } from './schemas.js';
import { type SubmissionsDeps, keysFor, loadDefinition, parseData } from './definitions.js';
import { derived, matches } from './indexing.js';
import { toSubmission } from './presentation.js';
import { resolveFilter } from './query.js';
import type { AccountScope, FormRef } from '../permissions/caller.js';

// OWASP's list (= + - @, and a tab or carriage return first), looked for past the blanks and
// line breaks that spreadsheets skip before a formula, and in the full-width forms that some
// of them read as the same signs.
// eslint-disable-next-line no-control-regex -- control characters before a sign are looked through
const FORMULA_START = /^(?:[\t\r]|[\s\u0000-\u001f\u007f]*[=+\-@\uff1d\uff0b\uff0d\uff20])/;

function csvCell(text: string): string {
  // A cell that a spreadsheet would run as a formula is prefixed with a quote mark.
  const safe = FORMULA_START.test(text) ? `'${text}` : text;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

export interface ExportStream {
  contentType: string;
  filename: string;
  lines: AsyncGenerator<string>;
}

/**
 * Every matching submission as CSV (one column per input field, displayed values) or as
 * NDJSON (detailed records). Checks the form and the filters first, so that errors come
 * before any byte is sent; then reads in batches of 500 by id, so memory stays flat.
 */
export async function exportSubmissions(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
  q: SubmissionFilters & { format: 'csv' | 'ndjson' },
  password?: string,
): Promise<ExportStream> {
  const { def } = await loadDefinition(deps, { accountId }, { formId });
  const filter = resolveFilter(def, q);
  const keys = await keysFor(deps, def, password);
  // An encrypted form is searched by opening each row (see searchSealed); the range still comes from the index.
  const indexed: repo.ResolvedFilter = keys ? { from: filter.from, to: filter.to, terms: [] } : filter;
  const order = q.order.toLowerCase() as 'asc' | 'desc';
  const columns = def.fields.filter((f) => TYPE_RULES[f.type].input);
  const { db } = deps.ctx;
  async function* lines(): AsyncGenerator<string> {
    if (q.format === 'csv')
      yield `${['id', 'timestamp', 'remoteAddr', 'userAgent', ...columns.map((f) => f.label)].map(csvCell).join(',')}\r\n`;
    let after: number | undefined;
    for (;;) {
      const rows = await repo.nextBatch(db, accountId, formId, indexed, after, order, 500);
      let chunk = '';
      for (const row of rows) {
        const data = parseData(def, row, keys);
        if (keys && filter.terms.length > 0 && !matches(derived(def, data).tokens, filter.terms)) continue;
        const record = toSubmission(def, row, data);
        if (q.format === 'ndjson') {
          chunk += `${JSON.stringify(record)}\n`;
        } else {
          const shown = new Map(record.data.map((e) => [e.field, e.displayValue]));
          const cells = [
            String(record.id),
            record.timestamp,
            record.remoteAddr,
            record.userAgent,
            ...columns.map((f) => shown.get(f.id) ?? ''),
          ];
          chunk += `${cells.map(csvCell).join(',')}\r\n`;
        }
      }
      if (chunk) yield chunk;
      if (rows.length < 500) return;
      after = rows[rows.length - 1]!.id;
    }
  }
  return {
    contentType: q.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
    filename: `form-${formId}-submissions.${q.format}`,
    lines: lines(),
  };
}
