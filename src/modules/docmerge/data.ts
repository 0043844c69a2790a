import { displayValue, fileRefs, type FieldForValues, type StoredValue } from '../submissions/values.js';
import { MergeValue, type MergeData } from './template.js';

/** Tags that name no field but the submission itself. */
export const BUILT_IN_TAGS = ['submission_id', 'form_id', 'form_name', 'timestamp', 'date'] as const;
type BuiltIn = (typeof BUILT_IN_TAGS)[number];

export type TagTarget = { field: number } | { builtIn: BuiltIn } | { none: true };

export type Mapping = Record<string, number | null>;

/** What merging reads of a field (plain data: it crosses to the merge thread). */
export type FieldLike = Pick<FieldForValues, 'id' | 'label' | 'type' | 'options'>;

/**
 * What a tag merges: the field the mapping names (null: nothing, left empty), else the field
 * whose label is the tag (ignoring case and surrounding spaces), else the field whose id it
 * is (`12` or `field_12`), else a built-in tag. undefined: it names nothing.
 */
export function resolveTag(tag: string, fields: readonly FieldLike[], mapping: Mapping): TagTarget | undefined {
  if (Object.hasOwn(mapping, tag)) {
    const id = mapping[tag];
    return id === null || id === undefined ? { none: true } : { field: id };
  }
  const wanted = tag.trim().toLowerCase();
  const byLabel = fields.find((f) => f.label.trim().toLowerCase() === wanted);
  if (byLabel) return { field: byLabel.id };
  const idMatch = /^(?:field_)?(\d+)$/i.exec(tag.trim());
  if (idMatch) {
    const byId = fields.find((f) => f.id === Number(idMatch[1]));
    if (byId) return { field: byId.id };
  }
  if ((BUILT_IN_TAGS as readonly string[]).includes(wanted)) return { builtIn: wanted as BuiltIn };
  return undefined;
}

function itemsOf(field: FieldLike, value: StoredValue, text: string): Record<string, string | number>[] {
  const files = fileRefs(value);
  if (files) return files.map((f) => ({ value: f.name, name: f.name, size: f.size, contentType: f.contentType }));
  if (Array.isArray(value))
    return (value as string[]).map((v) => ({ value: field.options.find((o) => o.value === v)?.label ?? v, option: v }));
  if (typeof value === 'object' && value !== null) {
    if (field.type === 'matrix') return Object.entries(value).map(([row, column]) => ({ row, value: column, column }));
    // name, address, creditcard: one item carrying every subfield, and the whole as value.
    return [{ ...(value as Record<string, string>), value: text }];
  }
  if (field.type === 'radio' || field.type === 'select') return [{ value: String(value), label: text }];
  return text === '' ? [] : [{ value: text }];
}

export function mergeValueOf(field: FieldLike, value: StoredValue | undefined): MergeValue {
  if (value === undefined || value === '' || (Array.isArray(value) && value.length === 0))
    return new MergeValue('', []);
  const text = displayValue(field, value);
  return new MergeValue(text, itemsOf(field, value, text));
}

export interface MergeSubject {
  submissionId: number;
  formId: number;
  formName: string;
  /** ISO 8601 */
  timestamp: string;
  values: ReadonlyMap<number, StoredValue>;
}

/** What one tag merges for a submission; undefined when it names nothing. */
export function mergeValueFor(
  tag: string,
  fields: readonly FieldLike[],
  mapping: Mapping,
  subject: MergeSubject,
): MergeValue | undefined {
  const target = resolveTag(tag, fields, mapping);
  if (!target || 'none' in target) return undefined;
  if ('field' in target) {
    const field = fields.find((f) => f.id === target.field);
    return field && mergeValueOf(field, subject.values.get(field.id));
  }
  const text = {
    submission_id: String(subject.submissionId),
    form_id: String(subject.formId),
    form_name: subject.formName,
    timestamp: subject.timestamp,
    date: subject.timestamp.slice(0, 10),
  }[target.builtIn];
  return new MergeValue(text, [{ value: text }]);
}

/** The values of every tag, for a template's tags plus the tags of its file name and subject. */
export function mergeDataFor(
  tags: readonly string[],
  fields: readonly FieldLike[],
  mapping: Mapping,
  subject: MergeSubject,
): MergeData {
  const data: MergeData = new Map();
  for (const tag of new Set(tags)) {
    const value = mergeValueFor(tag, fields, mapping, subject);
    if (value) data.set(tag, value);
  }
  return data;
}
