import type { FieldDefinition } from '../fields/definition.js';
import { ADDRESS_SUBFIELDS, NAME_SUBFIELDS, TYPE_RULES, type FieldType } from '../fields/types.js';

/**
 * What a submission holds for one field, once checked: the shapes below, per type.
 * Everything about reading, showing and searching field values lives here.
 *
 * text, textarea, email, phone, datetime, radio: string
 * number, product (the quantity): number
 * select, checkbox: string[] (option values)
 * name, address, matrix: Record<string, string> (subfield or row → value)
 * creditcard: { brand, last4, expMonth, expYear } (never the full number)
 * file, signature: FileRef[] (the bytes are in storage, under the upload of each fileKey)
 */
export type StoredValue = string | number | string[] | Record<string, string> | FileRef[];

/** A file that a submission holds. */
export interface FileRef {
  fileKey: string;
  name: string;
  size: number;
  contentType: string;
}

/**
 * The files of a file or signature field once checked against storage (see
 * submissions/files.ts). Not a JSON shape, so no request body can pose as one.
 */
export class ResolvedFiles {
  constructor(readonly files: FileRef[]) {}
}

/** The files of a stored value, or undefined when it is not a file list. */
export function fileRefs(value: unknown): FileRef[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.every((v) => typeof v === 'object' && v !== null && typeof (v as FileRef).fileKey === 'string')
    ? (value as FileRef[])
    : undefined;
}

export interface FieldForValues extends Pick<
  FieldDefinition,
  'type' | 'label' | 'attributes' | 'options' | 'required' | 'unique' | 'logic'
> {
  id: number;
}

export class ValueError extends Error {}

const MAX_TEXT = 100_000;
/**
 * An address as a mail header and an SMTP envelope take it bare: a local part and a domain of
 * no spaces and none of the characters that make a header's address list (comments, groups,
 * quoting, lists). "x@y.com:c" read as a header is an empty group, "a(b)@c.com" an address with
 * a display name the sender chose; such an address, taken here, then failed or changed at the
 * email that used it.
 */
export const EMAIL = /^[^\s@()<>[\]:;,"\\]+@[^\s@.()<>[\]:;,"\\]+(\.[^\s@.()<>[\]:;,"\\]+)+$/;

function record(raw: unknown): Record<string, unknown> | undefined {
  return typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : undefined;
}

/**
 * The plain value a client sent for a field: `{"value": x}`, a bare string or number, or
 * `{"subvalues": [{"subvalue": x}]}` (select, checkbox); name and address fields send
 * their subfields instead. Returns what to check, or throws ValueError with the problem.
 */
function unwrap(type: FieldType, raw: unknown): unknown {
  const obj = record(raw);
  if (!obj) return raw;
  const keys = Object.keys(obj);
  if (keys.length === 1 && keys[0] === 'value') return obj.value;
  if (keys.length === 1 && keys[0] === 'subvalues') {
    if (!Array.isArray(obj.subvalues)) throw new ValueError('subvalues must be a list');
    return obj.subvalues.map((s) => {
      const sub = record(s);
      if (!sub || Object.keys(sub).length !== 1 || !('subvalue' in sub))
        throw new ValueError('each subvalue must be {"subvalue": ...}');
      return sub.subvalue;
    });
  }
  if (type === 'name' || type === 'address' || type === 'matrix' || type === 'creditcard') return obj;
  throw new ValueError('must be {"value": ...}, {"subvalues": [...]} or a plain string or number');
}

function text(value: unknown, max = MAX_TEXT): string {
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value !== 'string') throw new ValueError('must be a string');
  if (value.length > max) throw new ValueError(`must be at most ${max} characters`);
  return value;
}

function subfields(value: unknown, allowed: readonly string[]): Record<string, string> {
  const obj = record(value);
  if (!obj) throw new ValueError(`must be an object of ${allowed.join(', ')}`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (!allowed.includes(k)) throw new ValueError(`has no subfield "${k}" (use ${allowed.join(', ')})`);
    if (v === null || v === undefined || v === '') continue;
    out[k] = text(v, 500).trim();
  }
  return out;
}

function checkDate(value: string, format: string, attributes: Record<string, unknown>): string {
  const patterns: Record<string, RegExp> = {
    date: /^(\d{4})-(\d{2})-(\d{2})$/,
    time: /^(\d{2}):(\d{2})(?::(\d{2}))?$/,
    datetime: /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?$/,
  };
  const m = patterns[format]!.exec(value);
  const ok = (() => {
    if (!m) return false;
    if (format === 'time') return Number(m[1]) < 24 && Number(m[2]) < 60 && Number(m[3] ?? 0) < 60;
    const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
    const date = new Date(Date.UTC(y, mo - 1, d));
    if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d) return false;
    return format === 'date' || (Number(m[4]) < 24 && Number(m[5]) < 60 && Number(m[6] ?? 0) < 60);
  })();
  const shapes: Record<string, string> = {
    date: 'YYYY-MM-DD',
    time: 'HH:MM or HH:MM:SS',
    datetime: 'YYYY-MM-DD HH:MM or YYYY-MM-DD HH:MM:SS',
  };
  if (!ok) throw new ValueError(`must be a ${format} as ${shapes[format]}`);
  if (format !== 'time') {
    const day = value.slice(0, 10);
    if (typeof attributes.minDate === 'string' && day < attributes.minDate)
      throw new ValueError(`must not be before ${attributes.minDate}`);
    if (typeof attributes.maxDate === 'string' && day > attributes.maxDate)
      throw new ValueError(`must not be after ${attributes.maxDate}`);
  }
  return value.replace('T', ' ');
}

/**
 * A number as text: digits with an optional minus and fraction. Number() would also read hex,
 * octal and binary literals and exponents ("0x10" as 16, "1e5" as 100000), which no one
 * filling in a number means.
 */
const DECIMAL = /^-?\d+(\.\d+)?$/;

function checkNumber(value: unknown, attributes: Record<string, unknown>): number {
  let n = value;
  if (typeof value === 'string') {
    const trimmed = value.trim();
    if (!DECIMAL.test(trimmed)) throw new ValueError('must be a number in decimal digits, such as 12 or -3.5');
    n = Number(trimmed);
  }
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new ValueError('must be a number');
  if (typeof attributes.min === 'number' && n < attributes.min)
    throw new ValueError(`must be at least ${attributes.min}`);
  if (typeof attributes.max === 'number' && n > attributes.max)
    throw new ValueError(`must be at most ${attributes.max}`);
  if (
    typeof attributes.decimals === 'number' &&
    Math.abs(n * 10 ** attributes.decimals - Math.round(n * 10 ** attributes.decimals)) > 1e-6
  ) {
    throw new ValueError(`must have at most ${attributes.decimals} decimals`);
  }
  return n;
}

function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

const CARD_BRANDS: [string, RegExp][] = [
  ['amex', /^3[47]\d{13}$/],
  ['visa', /^4\d{12}(\d{3})?(\d{3})?$/],
  ['mastercard', /^(5[1-5]\d{14}|2(2[2-9]|[3-6]\d|7[01])\d{13}|2720\d{12})$/],
  ['discover', /^6(011|5\d\d)\d{12,15}$/],
  ['dinersclub', /^3(0[0-5]|[68]\d)\d{11,16}$/],
  ['jcb', /^35(2[89]|[3-8]\d)\d{12,15}$/],
];

/** Card numbers are checked and then reduced to brand and last four digits: no full number is stored. */
function checkCard(value: unknown, attributes: Record<string, unknown>, nowMs: number): Record<string, string> {
  const obj = record(value);
  if (!obj) throw new ValueError('must be an object with number, expMonth and expYear');
  const allowed = ['number', 'expMonth', 'expYear', 'cvv', 'name'];
  const unknown = Object.keys(obj).find((k) => !allowed.includes(k));
  if (unknown) throw new ValueError(`has no part "${unknown}" (use number, expMonth, expYear, cvv, name)`);
  const digits =
    typeof obj.number === 'string' || typeof obj.number === 'number' ? String(obj.number).replace(/[\s-]/g, '') : '';
  if (!/^\d{12,19}$/.test(digits) || !luhn(digits)) throw new ValueError('number is not a valid card number');
  const brand = CARD_BRANDS.find(([, re]) => re.test(digits))?.[0] ?? 'other';
  const types = attributes.cardTypes as string[] | undefined;
  if (types && !types.includes(brand)) throw new ValueError(`this form takes ${types.join(', ')} cards`);
  const month = Number(obj.expMonth);
  const year = Number(obj.expYear);
  if (!Number.isInteger(month) || month < 1 || month > 12) throw new ValueError('expMonth must be 1 to 12');
  if (!Number.isInteger(year) || year < 2000 || year > 2100) throw new ValueError('expYear must be a four-digit year');
  const now = new Date(nowMs);
  if (year < now.getUTCFullYear() || (year === now.getUTCFullYear() && month < now.getUTCMonth() + 1))
    throw new ValueError('the card has expired');
  if (obj.cvv !== undefined && !/^\d{3,4}$/.test(String(obj.cvv))) throw new ValueError('cvv must be 3 or 4 digits');
  return { brand, last4: digits.slice(-4), expMonth: String(month).padStart(2, '0'), expYear: String(year) };
}

type FieldOption = FieldForValues['options'][number];
const optionIndexes = new WeakMap<FieldForValues['options'], Map<string, FieldOption>>();

/**
 * A field's options by value, the first of each value (as a search of the list would find),
 * made once per list: a form's definition is kept, its lists with it, and no list is changed
 * in place (an edit makes a new one). A country list of 250 was searched from the start for
 * every value shown, and made into a set for every value checked.
 */
function optionsByValue(options: FieldForValues['options']): Map<string, FieldOption> {
  let index = optionIndexes.get(options);
  if (!index) {
    index = new Map();
    for (const o of options) if (!index.has(o.value)) index.set(o.value, o);
    optionIndexes.set(options, index);
  }
  return index;
}

function optionValues(field: FieldForValues, value: unknown): string[] {
  const list = Array.isArray(value) ? value : [value];
  const allowed = optionsByValue(field.options);
  const out: string[] = [];
  for (const v of list) {
    const s = text(v, 500);
    if (!allowed.has(s)) throw new ValueError(`"${s}" is not one of the options (${[...allowed.keys()].join(', ')})`);
    if (!out.includes(s)) out.push(s);
  }
  return out;
}

/** True when nothing was given: such a value clears the field and fails `required`. */
export function isEmptyInput(input: unknown): boolean {
  // A loop, not recursion: the body's schema does not look into values, so `{"value": …}`
  // nested thousands of levels deep reaches here, and recursion would overflow the stack (a 500).
  let raw = input;
  for (let obj = record(raw); obj && Object.keys(obj).length === 1 && 'value' in obj; obj = record(raw))
    raw = obj.value;
  if (raw === null || raw === undefined || raw === '') return true;
  const obj = record(raw);
  if (obj && Object.keys(obj).length === 1 && 'subvalues' in obj)
    return Array.isArray(obj.subvalues) && obj.subvalues.length === 0;
  return Array.isArray(raw) && raw.length === 0;
}

/** Checks what was sent for a field against its definition, at now (epoch ms); returns what is stored, or null for nothing. */
export function readValue(field: FieldForValues, raw: unknown, now: number): StoredValue | null {
  const rule = TYPE_RULES[field.type];
  if (!rule.input) throw new ValueError(`a ${field.type} field takes no value`);
  if (field.type === 'file' || field.type === 'signature') {
    if (raw instanceof ResolvedFiles) return raw.files.length === 0 ? null : raw.files;
    if (isEmptyInput(raw)) return null;
    throw new ValueError('takes fileKeys or inline uploads');
  }
  if (isEmptyInput(raw)) return null;
  const value = unwrap(field.type, raw);
  const a = field.attributes;
  switch (field.type) {
    case 'text':
    case 'textarea': {
      const s = text(value, typeof a.maxLength === 'number' ? a.maxLength : MAX_TEXT);
      if (typeof a.minLength === 'number' && s.length < a.minLength)
        throw new ValueError(`must be at least ${a.minLength} characters`);
      return s;
    }
    case 'email': {
      const s = text(value, 254).trim();
      if (!EMAIL.test(s)) throw new ValueError('must be an email address');
      return s;
    }
    case 'phone': {
      const s = text(value, 40).trim();
      const digits = s.replace(/\D/g, '');
      if (!/^\+?[\d\s().-]+$/.test(s) || digits.length < 7 || digits.length > 15)
        throw new ValueError('must be a phone number');
      if (a.format === 'us' && !/^1?\d{10}$/.test(digits)) throw new ValueError('must be a 10-digit US phone number');
      return s;
    }
    case 'datetime':
      return checkDate(text(value, 40).trim(), (a.format as string | undefined) ?? 'date', a);
    case 'number':
      return checkNumber(value, a);
    case 'product': {
      const n = checkNumber(value, { min: a.minQuantity ?? 0, max: a.maxQuantity, decimals: 0 });
      return n;
    }
    case 'radio': {
      const values = optionValues(field, value);
      if (values.length > 1) throw new ValueError('takes one option');
      return values[0]!;
    }
    case 'select': {
      const values = optionValues(field, value);
      if (values.length > 1) throw new ValueError('takes one option');
      return values;
    }
    case 'checkbox': {
      const values = optionValues(field, value);
      if (typeof a.minSelected === 'number' && values.length < a.minSelected)
        throw new ValueError(`needs at least ${a.minSelected} options`);
      if (typeof a.maxSelected === 'number' && values.length > a.maxSelected)
        throw new ValueError(`takes at most ${a.maxSelected} options`);
      return values;
    }
    case 'name': {
      const v = typeof value === 'string' ? { first: value } : subfields(value, NAME_SUBFIELDS);
      return Object.keys(v).length === 0 ? null : v;
    }
    case 'address': {
      const v = subfields(value, ADDRESS_SUBFIELDS);
      return Object.keys(v).length === 0 ? null : v;
    }
    case 'matrix': {
      const rows = a.rows as string[];
      const columns = a.columns as string[];
      const obj = record(value);
      if (!obj) throw new ValueError('must be an object of row → column');
      const out: Record<string, string> = {};
      for (const [row, col] of Object.entries(obj)) {
        if (!rows.includes(row)) throw new ValueError(`has no row "${row}"`);
        const cols = Array.isArray(col) ? col : [col];
        if (!a.multiple && cols.length > 1) throw new ValueError(`row "${row}" takes one column`);
        for (const c of cols)
          if (typeof c !== 'string' || !columns.includes(c))
            throw new ValueError(`row "${row}": "${String(c)}" is not a column`);
        if (cols.length > 0) out[row] = cols.join(', ');
      }
      return Object.keys(out).length === 0 ? null : out;
    }
    case 'creditcard':
      return checkCard(value, a, now);
    default:
      throw new ValueError(`a ${field.type} field takes no value`);
  }
}

const NAME_ORDER = ['prefix', 'first', 'middle', 'initial', 'last', 'suffix'];
const CARD_PARTS = ['brand', 'last4', 'expMonth', 'expYear'];

/**
 * Whether a stored object has the shape of a value of this type. A value stays as it was
 * stored when its field's type changes, so a name field may hold an old card or matrix value:
 * read by the new type's parts, it showed blank or as "undefined".
 */
function holdsShape(type: FieldType, value: Record<string, unknown>): boolean {
  const parts = Object.entries(value);
  const strings = parts.every(([, v]) => typeof v === 'string');
  switch (type) {
    case 'name':
      return strings && parts.every(([k]) => NAME_SUBFIELDS.includes(k as (typeof NAME_SUBFIELDS)[number]));
    case 'address':
      return strings && parts.every(([k]) => ADDRESS_SUBFIELDS.includes(k as (typeof ADDRESS_SUBFIELDS)[number]));
    case 'creditcard':
      return strings && parts.length === CARD_PARTS.length && CARD_PARTS.every((k) => k in value);
    default:
      return false;
  }
}

/**
 * Whether a name field's stored value names someone: its parts, or text (a field that was a
 * text field before), not an old value of another type such as a card's.
 */
export function isName(value: StoredValue): boolean {
  return typeof value === 'string' || (!Array.isArray(value) && typeof value === 'object' && holdsShape('name', value));
}

/** The value as a person reads it. */
export function displayValue(field: Pick<FieldForValues, 'type' | 'options'>, value: StoredValue): string {
  const files = fileRefs(value);
  if (files) return files.map((f) => f.name).join(', ');
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') {
    if (field.type === 'radio') return optionsByValue(field.options).get(value)?.label ?? value;
    return value;
  }
  if (Array.isArray(value)) {
    const options = optionsByValue(field.options);
    return (value as unknown[])
      .map((v) => (typeof v === 'string' ? (options.get(v)?.label ?? v) : shown(v)))
      .join(', ');
  }
  if (!holdsShape(field.type, value)) return generic(value);
  switch (field.type) {
    case 'name':
      return NAME_ORDER.filter((k) => value[k])
        .map((k) => value[k])
        .join(' ');
    case 'address': {
      const cityLine = [value.city, [value.state, value.zip].filter(Boolean).join(' ')].filter(Boolean).join(', ');
      return [value.address, value.address2, cityLine, value.country].filter(Boolean).join(', ');
    }
    case 'creditcard':
      return `${value.brand} ending in ${value.last4}, expires ${value.expMonth}/${value.expYear}`;
    default:
      return generic(value);
  }
}

/** An object of no known shape: each part by its key (a matrix's rows, an old value of another type). */
function generic(value: Record<string, unknown>): string {
  return Object.entries(value)
    .map(([k, v]) => `${k}: ${shown(v)}`)
    .join('; ');
}

/** A part of a value of no known shape: text as it is, anything else as JSON. */
function shown(part: unknown): string {
  return typeof part === 'string' ? part : (JSON.stringify(part) ?? String(part));
}

/** Normalized strings that a field search matches: the whole value and, for lists and parts, each one. */
export function searchKeys(
  field: Pick<FieldForValues, 'type' | 'options'>,
  value: StoredValue,
  /** The value's displayValue, when the caller has it already. */
  shown: string = displayValue(field, value),
  /** normalize(shown), when the caller has it already. */
  normalized: string = normalize(shown),
): string[] {
  const keys = new Set<string>([normalized]);
  const files = fileRefs(value);
  if (files) for (const f of files) keys.add(normalize(f.name));
  else if (Array.isArray(value)) for (const v of value as string[]) keys.add(normalize(v));
  else if (typeof value === 'object' && field.type !== 'creditcard')
    for (const v of Object.values(value)) keys.add(normalize(v));
  else if (typeof value === 'string') keys.add(normalize(value));
  keys.delete('');
  return [...keys];
}

/** Field search compares values without regard to case or surrounding space, on their first 200 characters. */
export function normalize(text: string): string {
  return text.trim().toLowerCase().slice(0, 200);
}

/** Whether each field is shown, given the values: fields hidden by their logic are not required. */
export function visibleFields(fields: FieldForValues[], values: Map<number, StoredValue>): Set<number> {
  // Most forms have no logic: every field shows, and the rounds below would only say so.
  if (!fields.some((f) => f.logic)) return new Set(fields.map((f) => f.id));
  const byId = new Map(fields.map((f) => [f.id, f]));
  let visible = new Set(fields.map((f) => f.id));
  // A check on a hidden field sees an empty value; repeat until nothing changes (chains of logic).
  for (let round = 0; round <= fields.length; round++) {
    const next = new Set<number>();
    for (const f of fields) {
      if (!f.logic) {
        next.add(f.id);
        continue;
      }
      const holds = logicHolds(f.logic, byId, (id) => (visible.has(id) ? values.get(id) : undefined));
      if (holds === (f.logic.action === 'show')) next.add(f.id);
    }
    if (next.size === visible.size && [...next].every((id) => visible.has(id))) return next;
    visible = next;
  }
  return visible;
}

type LogicRule = Pick<NonNullable<FieldForValues['logic']>, 'conditional' | 'checks'>;

/**
 * Whether a rule of the shape of a field's logic holds for the values: all or any of its
 * checks. A field missing from fields, or whose valueOf is undefined, counts as empty. Emails' show/hide conditions
 * are judged by the same rule.
 */
export function logicHolds(
  logic: LogicRule,
  fields: Map<number, Pick<FieldForValues, 'type' | 'options'>>,
  valueOf: (fieldId: number) => StoredValue | undefined,
): boolean {
  const results = logic.checks.map((c) => {
    const field = fields.get(c.field);
    return checkHolds(c.condition, field, field ? valueOf(c.field) : undefined, c.option ?? '');
  });
  return logic.conditional === 'all' ? results.every(Boolean) : results.some(Boolean);
}

function checkHolds(
  condition: string,
  field: Pick<FieldForValues, 'type' | 'options'> | undefined,
  value: StoredValue | undefined,
  option: string,
): boolean {
  const files = fileRefs(value);
  const texts =
    value === undefined
      ? []
      : files
        ? files.map((f) => f.name)
        : Array.isArray(value)
          ? (value as string[])
          : [typeof value === 'object' && field ? displayValue(field, value) : String(value)];
  const want = option.toLowerCase();
  switch (condition) {
    case 'empty':
      return texts.length === 0;
    case 'notempty':
      return texts.length > 0;
    case 'equals':
      return texts.some((t) => t.toLowerCase() === want);
    case 'notequals':
      return !texts.some((t) => t.toLowerCase() === want);
    case 'contains':
      return texts.some((t) => t.toLowerCase().includes(want));
    case 'notcontains':
      return !texts.some((t) => t.toLowerCase().includes(want));
    case 'greaterthan':
      return texts.some((t) => Number(t) > Number(option));
    case 'lessthan':
      return texts.some((t) => Number(t) < Number(option));
    default:
      return false;
  }
}
