import type { FieldForValues } from '../submissions/values.js';
import { ADDRESS_SUBFIELDS, NAME_SUBFIELDS, TYPE_RULES } from '../fields/types.js';

/**
 * How a hosted form's inputs map to submission values: one definition, run by the server on
 * a plain HTML post and by the page's script (bundled from this file) before it posts, so
 * that both read the same names into the same values as the API takes.
 */

/** A field as the page and its script know it: what values.ts needs, plus what the page shows. */
export interface PageField extends FieldForValues {
  description: string;
  hideLabel: boolean;
  hidden: boolean;
  readOnly: boolean;
  defaultValue: unknown;
  /** Images of the options (by value: their URL under the page), when the field's smart list uses images. */
  optionImages?: Record<string, string>;
}

type DefinitionKey = 'required' | 'unique' | 'options' | 'attributes' | 'logic' | 'hidden';

/**
 * What a field of the page's definition (the JSON the script reads) has unless it says
 * otherwise. The page leaves these out (withoutDefaults: about a quarter of the definition,
 * which is a quarter of a page's bytes) and the script puts them back (withDefaults).
 */
const DEFINITION_DEFAULTS: Pick<PageField, DefinitionKey> = {
  required: false,
  unique: false,
  options: [],
  attributes: {},
  logic: null,
  hidden: false,
};

export function withoutDefaults<T extends object>(field: T): Partial<T> {
  const defaults = DEFINITION_DEFAULTS as Record<string, unknown>;
  return Object.fromEntries(
    Object.entries(field).filter(([k, v]) => !(k in defaults) || !isDefault(v, defaults[k])),
  ) as Partial<T>;
}

/** Whether v is the default d (false, null, [] or {}), without serializing v: options may be thousands. */
function isDefault(v: unknown, d: unknown): boolean {
  if (Array.isArray(d)) return Array.isArray(v) && v.length === 0;
  if (typeof d === 'object' && d !== null)
    return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;
  return v === d;
}

export function withDefaults(field: Partial<PageField>): PageField {
  return { ...structuredClone(DEFINITION_DEFAULTS), ...field } as PageField;
}

/**
 * Whether the page's controls carry a field's options exactly (every type with options shows
 * them as controls: a select's options, a radio or checkbox group's inputs), so that the
 * definition may leave them out and the script read them back from the controls
 * (optionsOfControls in the script): the options would otherwise be in the page twice, a
 * tenth of its bytes on a typical form. Not when a label or value holds a carriage return,
 * which HTML parsing turns into a line feed (the other characters it changes, NUL and lone
 * surrogates, are refused at every input: http/characters.ts).
 */
export function optionsInControls(field: Pick<FieldForValues, 'type' | 'options'>): boolean {
  return (
    TYPE_RULES[field.type].options && field.options.every((o) => !o.label.includes('\r') && !o.value.includes('\r'))
  );
}

export interface FieldInput {
  id: number;
  value: unknown;
}

export const CARD_PARTS = ['number', 'expMonth', 'expYear', 'cvv'] as const;

/** The name of a field's input, or of one of its parts (a subfield, a matrix row's index, a card part). */
export function inputName(fieldId: number, part?: string | number): string {
  return part === undefined ? `f${fieldId}` : `f${fieldId}.${part}`;
}

/** The parts a name or address field shows, in order. */
export function subfieldsOf(field: Pick<FieldForValues, 'type' | 'attributes'>): readonly string[] {
  const a = field.attributes;
  if (field.type === 'name')
    return NAME_SUBFIELDS.filter(
      (s) =>
        s === 'first' ||
        s === 'last' ||
        (s === 'prefix' && a.showPrefix === true) ||
        (s === 'middle' && a.showMiddle === true) ||
        (s === 'initial' && a.showInitial === true) ||
        (s === 'suffix' && a.showSuffix === true),
    );
  if (field.type === 'address')
    return ADDRESS_SUBFIELDS.filter(
      (s) => (s !== 'address2' || a.showAddress2 === true) && (s !== 'country' || a.showCountry !== false),
    );
  return [];
}

/**
 * The values that the inputs hold, as submission fields ({id, value} as POST /submissions
 * takes them). get returns every value posted under a name (several for checkboxes).
 * Empty inputs give no entry.
 */
export function collectFields(fields: readonly PageField[], get: (name: string) => string[]): FieldInput[] {
  const out: FieldInput[] = [];
  const one = (name: string) => (get(name)[0] ?? '').trim();
  for (const f of fields) {
    if (!TYPE_RULES[f.type].input) continue;
    let value: unknown;
    switch (f.type) {
      case 'name':
      case 'address': {
        const parts: Record<string, string> = {};
        for (const s of subfieldsOf(f)) {
          const v = one(inputName(f.id, s));
          if (v !== '') parts[s] = v;
        }
        value = Object.keys(parts).length > 0 ? parts : undefined;
        break;
      }
      case 'checkbox':
      case 'select': {
        const chosen = get(inputName(f.id)).filter((v) => v !== '');
        value = chosen.length > 0 ? { subvalues: chosen.map((subvalue) => ({ subvalue })) } : undefined;
        break;
      }
      case 'matrix': {
        const rows = (f.attributes.rows as string[] | undefined) ?? [];
        const picked: Record<string, string | string[]> = {};
        rows.forEach((row, i) => {
          const cols = get(inputName(f.id, i)).filter((v) => v !== '');
          if (cols.length > 0) picked[row] = f.attributes.multiple === true ? cols : cols[0]!;
        });
        value = Object.keys(picked).length > 0 ? picked : undefined;
        break;
      }
      case 'creditcard': {
        const card: Record<string, string> = {};
        for (const p of CARD_PARTS) {
          const v = one(inputName(f.id, p));
          if (v !== '') card[p] = v;
        }
        value = Object.keys(card).length > 0 ? card : undefined;
        break;
      }
      case 'file':
      case 'signature': {
        const keys = get(inputName(f.id, 'fileKey')).filter((v) => v !== '');
        value = keys.length > 0 ? keys : undefined;
        break;
      }
      default: {
        const v = one(inputName(f.id));
        value = v === '' ? undefined : v;
      }
    }
    if (value !== undefined) out.push({ id: f.id, value });
  }
  return out;
}

/** The fields of each page: a section field starts a new page (unless it comes first). */
export function splitPages<F extends Pick<FieldForValues, 'type'>>(fields: readonly F[]): F[][] {
  const pages: F[][] = [[]];
  for (const f of fields) {
    if (f.type === 'section' && pages[pages.length - 1]!.length > 0) pages.push([]);
    pages[pages.length - 1]!.push(f);
  }
  return pages;
}

/**
 * A problem with one field as the page shows it next to that field: the service's message
 * without the label and id it starts with ("Email (12): must be …" → "Must be …").
 */
export function fieldMessage(field: Pick<FieldForValues, 'id' | 'label'>, message: string): string {
  const prefix = `${field.label} (${field.id})`;
  let rest = message.startsWith(prefix) ? message.slice(prefix.length).replace(/^:?\s*/, '') : message;
  if (rest.startsWith('is ') || rest.startsWith('must ')) rest = `This field ${rest}`;
  rest = rest.charAt(0).toUpperCase() + rest.slice(1);
  return /[.!?]$/.test(rest) ? rest : `${rest}.`;
}
