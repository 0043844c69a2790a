import type { FieldRow, NewFieldRow } from '../../db/schema.js';
import { BadRequestError, invalid, type ErrorDetail } from '../../errors.js';
import { isoTime } from '../../http/schemas.js';
import { compileBodySchema, validationDetails, type Validate } from '../../http/validation.js';
import { MAX_DISPLAY_ORDER, type Field, type FieldCreate, type FieldLogic } from './schemas.js';
import { readValue, ValueError } from '../submissions/values.js';
import { ADDRESS_SUBFIELDS, NAME_SUBFIELDS, TYPE_RULES, type FieldType } from './types.js';

/** A field as it is stored: every property present, attributes with their defaults. */
export type FieldDefinition = Required<Omit<FieldCreate, 'displayOrder'>> & { displayOrder: number | undefined };

/** Another field of the same form, as logic checks see it. */
export interface Sibling {
  id: number;
  type: FieldType;
  options: { value: string }[];
}

const attributeValidators = new Map<FieldType, Validate>();
function attributeValidator(type: FieldType): Validate {
  let validate = attributeValidators.get(type);
  if (!validate) {
    validate = compileBodySchema(TYPE_RULES[type].attributes);
    attributeValidators.set(type, validate);
  }
  return validate;
}

export function withDefaults(input: FieldCreate): FieldDefinition {
  return {
    type: input.type,
    label: input.label,
    hideLabel: input.hideLabel ?? false,
    description: input.description ?? '',
    defaultValue: input.defaultValue ?? null,
    required: input.required ?? false,
    readOnly: input.readOnly ?? false,
    hidden: input.hidden ?? false,
    unique: input.unique ?? false,
    columnSpan: input.columnSpan ?? 12,
    displayOrder: input.displayOrder,
    attributes: input.attributes ?? {},
    options: input.options ?? [],
    smartList: input.smartList ?? null,
    logic: input.logic ?? null,
  };
}

/** The shape a default value of the field's type is stored in (one option's value for a select, …). */
function defaultShapeProblem(def: FieldDefinition, value: NonNullable<FieldDefinition['defaultValue']>) {
  const optionValues = new Set(def.options.map((o) => o.value));
  switch (TYPE_RULES[def.type].defaultValue) {
    case 'string':
      return typeof value === 'string' ? undefined : 'must be a string';
    case 'number':
      return typeof value === 'number' ? undefined : 'must be a number';
    case 'option':
      return typeof value === 'string' && optionValues.has(value)
        ? undefined
        : 'must be the value of one of the options';
    case 'options':
      return Array.isArray(value) && value.every((v) => optionValues.has(v))
        ? undefined
        : 'must be a list of option values';
    case 'name':
    case 'address': {
      const allowed: readonly string[] = def.type === 'name' ? NAME_SUBFIELDS : ADDRESS_SUBFIELDS;
      if (typeof value !== 'object' || Array.isArray(value)) return `must be an object of ${allowed.join(', ')}`;
      const unknown = Object.keys(value).find((k) => !allowed.includes(k));
      return unknown ? `has no subfield "${unknown}" (use ${allowed.join(', ')})` : undefined;
    }
    case 'none':
      return `a ${def.type} field has no default value`;
  }
}

/**
 * What is wrong with the field's default value: it must have its type's shape and be what the
 * field takes from someone filling it in, checked by the submissions' own check (readValue):
 * a date as a date, within minDate and maxDate, an email as an email, a number within min and
 * max, … A default the form would refuse when sent unchanged is no default.
 */
export function defaultValueProblem(def: FieldDefinition, attributesValid = true): string | undefined {
  const value = def.defaultValue;
  if (value === null) return undefined;
  const shape = defaultShapeProblem(def, value);
  // Attributes their schema refused (a datetime's format "week") are named already; read by them, a value could throw.
  if (shape || !attributesValid) return shape;
  try {
    // The time only matters to card expiry, and cards take no default.
    readValue({ ...def, id: 0 }, value, 0);
  } catch (error) {
    if (error instanceof ValueError) return error.message;
    throw error;
  }
  return undefined;
}

/**
 * What makes a logic check fail on the field it checks, as it is now: a field that holds no
 * value, or an option that it does not offer. Undefined when the check can hold. The one rule
 * for checks that are sent and for checks left behind by a change of the field they check.
 */
export function checkTargetProblem(
  check: FieldLogic['checks'][number],
  target: Sibling,
): { on: 'field' | 'option'; message: string } | undefined {
  if (!TYPE_RULES[target.type].input) return { on: 'field', message: `a ${target.type} field holds no value to check` };
  if (
    (check.condition === 'equals' || check.condition === 'notequals') &&
    target.options.length > 0 &&
    !target.options.some((o) => o.value === (check.option ?? ''))
  )
    return { on: 'option', message: "must be the value of one of the checked field's options" };
  return undefined;
}

/** What is wrong with logic checks on the fields of a form (siblings), named under path. */
export function logicProblems(
  logic: FieldLogic,
  path: string,
  siblings: Map<number, Sibling>,
  selfId: number | undefined,
): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  logic.checks.forEach((check, i) => {
    const at = `${path}.logic.checks[${i}]`;
    const target = siblings.get(check.field);
    const onTarget = target && check.field !== selfId ? checkTargetProblem(check, target) : undefined;
    if (check.field === selfId) {
      problems.push({ property: `${at}.field`, message: 'a field cannot depend on itself' });
    } else if (!target) {
      problems.push({ property: `${at}.field`, message: `must be a field of this form; ${check.field} is not` });
    } else if (onTarget) {
      problems.push({ property: `${at}.${onTarget.on}`, message: onTarget.message });
    } else if (
      (check.condition === 'greaterthan' || check.condition === 'lessthan') &&
      !Number.isFinite(Number(check.option))
    ) {
      problems.push({ property: `${at}.option`, message: 'must be a number for greaterthan and lessthan' });
    }
  });
  return problems;
}

/**
 * A copy of attributes that the checks may change. Their values are not looked into by the
 * body's schema (any JSON), so one nested thousands of levels deep reaches the copy, which
 * recurses: that is a 400, not a stack overflow's 500.
 */
function cloneAttributes(attributes: FieldDefinition['attributes'], path: string): FieldDefinition['attributes'] {
  try {
    return structuredClone(attributes);
  } catch (error) {
    if (error instanceof RangeError) throw invalid('invalid_field', `${path}.attributes`, 'is nested too deeply');
    throw error;
  }
}

/**
 * Checks that a field definition makes sense as a whole and fills in attribute defaults.
 * Throws one 400 that names every offending property under `path`. With checkLogic false the
 * logic is left as it is: an update that sends none is not refused for checks that the fields
 * they check no longer fit. With checkDefault false, so is the default value: an update that
 * changes neither it nor the options it is one of is not refused for a default that the
 * field's smart list no longer offers (its options replaced), nor for one stored before
 * defaults were checked as values (defaultValueProblem).
 */
export function checkDefinition(
  def: FieldDefinition,
  path: string,
  siblings: Map<number, Sibling>,
  selfId?: number,
  checkLogic = true,
  checkDefault = true,
): FieldDefinition {
  const rule = TYPE_RULES[def.type];
  const problems: ErrorDetail[] = [];

  const attributes = cloneAttributes(def.attributes, path);
  const validate = attributeValidator(def.type);
  const attributesValid = validate(attributes);
  if (!attributesValid) {
    problems.push(
      ...validationDetails(validate.errors ?? [], 'body').map((d) => ({
        ...d,
        property: d.property.replace(/^body/, `${path}.attributes`),
      })),
    );
  } else {
    const broken = rule.check?.(attributes);
    if (broken) problems.push({ property: `${path}.attributes.${broken[0]}`, message: broken[1] });
  }

  if (def.smartList !== null && !rule.options) {
    problems.push({ property: `${path}.smartList`, message: `a ${def.type} field takes no options from a smart list` });
  } else if (rule.options) {
    // A smart list may be empty for a while (its options replaced): the field then offers no choice.
    if (def.options.length === 0 && def.smartList === null)
      problems.push({ property: `${path}.options`, message: `a ${def.type} field needs at least one option` });
    const seen = new Set<string>();
    def.options.forEach((o, i) => {
      if (seen.has(o.value))
        problems.push({ property: `${path}.options[${i}].value`, message: `"${o.value}" is used twice` });
      seen.add(o.value);
    });
  } else if (def.options.length > 0) {
    problems.push({ property: `${path}.options`, message: `a ${def.type} field has no options` });
  }

  if (!rule.input) {
    for (const flag of ['required', 'unique', 'readOnly'] as const) {
      if (def[flag]) problems.push({ property: `${path}.${flag}`, message: `a ${def.type} field takes no input` });
    }
  } else if (def.unique && !rule.uniqueAllowed) {
    problems.push({ property: `${path}.unique`, message: `values of a ${def.type} field cannot be kept unique` });
  }

  const defaultProblem = checkDefault ? defaultValueProblem({ ...def, attributes }, attributesValid) : undefined;
  if (defaultProblem) problems.push({ property: `${path}.defaultValue`, message: defaultProblem });

  if (def.logic && checkLogic) problems.push(...logicProblems(def.logic, path, siblings, selfId));

  if (problems.length > 0) {
    const first = problems[0]!;
    throw new BadRequestError('invalid_field', `${first.property}: ${first.message}`, { details: problems });
  }
  return { ...def, attributes };
}

/**
 * The position of a field added without a displayOrder: after the last one (the largest
 * position so far; -1 for none). Fields of one position show in id order, so one appended at
 * the largest position a request may name still comes last: past it, its record could not be
 * sent back as it reads.
 */
export function appendedOrder(last: number): number {
  return Math.min(MAX_DISPLAY_ORDER, last + 1);
}

export function toFieldRow(
  def: FieldDefinition,
  ids: { accountId: number; formId: number; displayOrder: number },
  now: number,
): NewFieldRow {
  return {
    account_id: ids.accountId,
    form_id: ids.formId,
    ...toFieldColumns(def),
    display_order: ids.displayOrder,
    created_at: now,
    updated_at: now,
  };
}

export function toFieldColumns(def: FieldDefinition) {
  return {
    type: def.type,
    label: def.label,
    hide_label: Number(def.hideLabel),
    description: def.description,
    default_value: def.defaultValue === null ? null : JSON.stringify(def.defaultValue),
    required: Number(def.required),
    read_only: Number(def.readOnly),
    hidden: Number(def.hidden),
    is_unique: Number(def.unique),
    column_span: def.columnSpan,
    attributes: JSON.stringify(def.attributes),
    // A field that uses a smart list keeps no options of its own: the list's are read with it.
    options: def.smartList === null ? JSON.stringify(def.options) : '[]',
    smart_list_id: def.smartList,
    logic: def.logic === null ? null : JSON.stringify(def.logic),
  };
}

export function toDefinition(row: FieldRow): FieldDefinition {
  return {
    type: row.type as FieldType,
    label: row.label,
    hideLabel: row.hide_label === 1,
    description: row.description,
    defaultValue:
      row.default_value === null ? null : (JSON.parse(row.default_value) as FieldDefinition['defaultValue']),
    required: row.required === 1,
    readOnly: row.read_only === 1,
    hidden: row.hidden === 1,
    unique: row.is_unique === 1,
    columnSpan: row.column_span,
    displayOrder: row.display_order,
    attributes: JSON.parse(row.attributes) as Record<string, unknown>,
    options: JSON.parse(row.options) as FieldDefinition['options'],
    smartList: row.smart_list_id ?? null,
    logic: row.logic === null ? null : (JSON.parse(row.logic) as FieldLogic),
  };
}

export function toSibling(row: FieldRow): Sibling {
  return { id: row.id, type: row.type as FieldType, options: JSON.parse(row.options) as { value: string }[] };
}

export function toField(row: FieldRow): Field {
  return {
    id: row.id,
    formId: row.form_id,
    ...toDefinition(row),
    displayOrder: row.display_order,
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

/**
 * About what fields' definitions take in memory, in bytes, for the caches that keep them
 * (submission definitions, hosted pages): a kilobyte a field, and its options by their text. A
 * form may show 50,000 options, of up to 500 characters each: counted by fields alone, a cache
 * of "16 MB" could have held gigabytes of them.
 */
export function fieldsBytes(fields: readonly { options: readonly { label?: string; value: string }[] }[]): number {
  let bytes = 1024 * fields.length;
  for (const f of fields) for (const o of f.options) bytes += 64 + 2 * ((o.label?.length ?? 0) + o.value.length);
  return bytes;
}
