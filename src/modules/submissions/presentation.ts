import { type FormKeys } from '../../crypto/envelope.js';
import type { SubmissionRow } from '../../db/schema.js';
import { isoTime } from '../../http/schemas.js';
import { isSealed } from './sealing.js';
import type { Submission, SubmissionDataEntry, SubmissionListItem, SubmissionListQuery } from './schemas.js';
import { displayValue, fileRefs, type StoredValue } from './values.js';
import { type DataMap, type FormDefinition, parseData } from './definitions.js';
import { derived } from './indexing.js';

/** The API's base path, for download links in records (the same under /api/v2). */
const API_PATH = '/api/v2025';

/** Files as the API shows them: each with the path that downloads it. */
function shownValue(submissionId: number, fieldId: number, value: StoredValue): unknown {
  const files = fileRefs(value);
  if (!files) return value;
  return files.map((f, index) => ({
    ...f,
    url: `${API_PATH}/submissions/${submissionId}/upload?fieldId=${fieldId}&index=${index}`,
  }));
}

export function entries(def: FormDefinition, submissionId: number, data: DataMap): SubmissionDataEntry[] {
  const out: SubmissionDataEntry[] = [];
  for (const field of def.fields) {
    const stored = data.get(field.id);
    if (stored === undefined) continue;
    const value = shownValue(submissionId, field.id, stored);
    out.push({
      field: field.id,
      label: field.label,
      type: field.type,
      value,
      displayValue: displayValue(field, stored),
      parsedValue: value,
    });
  }
  return out;
}

export function baseRecord(row: SubmissionRow) {
  return {
    id: row.id,
    formId: row.form_id,
    timestamp: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
    userAgent: row.user_agent,
    remoteAddr: row.remote_addr,
    latitude: row.latitude,
    longitude: row.longitude,
  };
}

/** The name a submission goes by; null, never "", when it has none (rows written before derived said so). */
export function prettyNameOf(def: FormDefinition, row: SubmissionRow, data: DataMap): string | null {
  return isSealed(row.data) ? derived(def, data).prettyName : row.pretty_name || null;
}

export function toSubmission(def: FormDefinition, row: SubmissionRow, data: DataMap): Submission {
  return { ...baseRecord(row), prettyName: prettyNameOf(def, row, data), data: entries(def, row.id, data) };
}

export type ItemShape = Pick<SubmissionListQuery, 'data' | 'expandData' | 'prettyName' | 'dataFormat'>;

export function showsData(q: ItemShape): boolean {
  return q.data || q.expandData || q.dataFormat === 'standardized';
}

export function listItem(
  def: FormDefinition,
  row: SubmissionRow,
  q: ItemShape,
  keys: FormKeys | undefined,
): SubmissionListItem {
  const item: SubmissionListItem = baseRecord(row);
  const data = showsData(q) || (q.prettyName && isSealed(row.data)) ? parseData(def, row, keys) : undefined;
  if (q.prettyName) item.prettyName = data ? prettyNameOf(def, row, data) : row.pretty_name || null;
  if (data && showsData(q)) {
    const list = entries(def, row.id, data);
    item.data =
      q.dataFormat === 'standardized'
        ? list
        : Object.fromEntries(list.map((e) => [String(e.field), q.expandData ? e : { field: e.field, value: e.value }]));
  }
  return item;
}
