import type { Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import { BadRequestError, type CodeWithStatus, type ErrorDetail } from '../../errors.js';
import { TYPE_RULES } from '../fields/types.js';
import { fieldToken, formToken, NOT_ASCII, words, type Term } from './keywords.js';
import * as repo from './repository.js';
import { blindValue, sealData } from './sealing.js';
import type { SubmissionCreate } from './schemas.js';
import { displayValue, isName, normalize, readValue, searchKeys, ValueError, visibleFields } from './values.js';
import { dataJson, type DataMap, type FormDefinition, type FormShape } from './definitions.js';

export function fail(code: CodeWithStatus<400>, problems: ErrorDetail[]): never {
  const first = problems[0]!;
  throw new BadRequestError(code, `${first.property}: ${first.message}`, { details: problems });
}

/** Reads the values sent into data (in place); every problem is collected before failing. */
function applyValues(def: FormShape, inputs: SubmissionCreate['fields'], data: DataMap, now: number): void {
  const problems: ErrorDetail[] = [];
  const seen = new Set<number>();
  inputs.forEach((input, i) => {
    const id = Number(input.id);
    const field = def.byId.get(id);
    if (!field) {
      problems.push({ property: `body.fields[${i}].id`, message: `this form has no field ${id}` });
      return;
    }
    if (seen.has(id)) {
      problems.push({ property: `body.fields[${i}].id`, message: `field ${id} is given twice` });
      return;
    }
    seen.add(id);
    try {
      const value = readValue(field, input.value, now);
      if (value === null) data.delete(id);
      else data.set(id, value);
    } catch (error) {
      if (!(error instanceof ValueError)) throw error;
      problems.push({ property: `body.fields[${i}].value`, message: `${field.label} (${id}): ${error.message}` });
    }
  });
  if (problems.length > 0) fail('invalid_submission', problems);
}

function checkRequired(def: FormShape, data: DataMap): void {
  const visible = visibleFields(def.fields, data);
  const problems = def.fields
    .filter((f) => f.required && TYPE_RULES[f.type].input && visible.has(f.id) && !data.has(f.id))
    .map((f) => ({ property: `body.fields(id=${f.id})`, message: `${f.label} (${f.id}) is required` }));
  if (problems.length > 0) fail('required_field_missing', problems);
}

/**
 * Checks what was sent against the form and makes everything that is stored for it: the
 * data, the pretty name, the full-text tokens and the unique values. data holds the values
 * already stored (on edit) and is changed in place. Throws a 400 naming each problem.
 */
export function prepareSubmission(
  def: FormShape,
  inputs: SubmissionCreate['fields'],
  data: DataMap,
  now: number,
): repo.SubmissionWrite {
  applyValues(def, inputs, data, now);
  checkRequired(def, data);
  return searchable(def, data, now);
}

export function searchable(def: FormShape, data: DataMap, now: number): repo.SubmissionWrite {
  const { tokens, unique, prettyName } = derived(def, data);
  const json = dataJson(data);
  const seal = def.seal;
  const both = def.uniqueBothWays;
  if (!seal) {
    const alt = (u: { fieldId: number; norm: string }) =>
      both === undefined ? {} : { alt: blindValue(both, def.formId, u.fieldId, u.norm) };
    return { data: json, prettyName, tokens: [...tokens], unique: unique.map((u) => ({ ...u, ...alt(u) })), now };
  }
  // Nothing searchable in the clear: the index gets the form token alone, unique values their HMAC.
  return {
    // Sealed once the row has its id, which the seal is bound to.
    data: (id: number) => sealData(seal.form, seal.publicKey, json, id),
    prettyName: null,
    tokens: [formToken(def.formId)],
    unique: unique.map((u) => ({
      fieldId: u.fieldId,
      norm: blindValue(seal.secretKey, def.formId, u.fieldId, u.norm),
      ...(both !== undefined && { alt: u.norm }),
    })),
    now,
  };
}

/** What a submission's values make for searching: index tokens, unique values and the pretty name. */
export function derived(
  def: Pick<FormShape, 'formId' | 'fields'>,
  data: DataMap,
): { tokens: Set<string>; unique: repo.SubmissionWrite['unique']; prettyName: string | null } {
  const tokens = new Set<string>([formToken(def.formId)]);
  const unique: repo.SubmissionWrite['unique'] = [];
  let prettyName: string | null = null;
  let email: string | null = null;
  for (const field of def.fields) {
    const value = data.get(field.id);
    if (value === undefined) continue;
    const shown = displayValue(field, value);
    const norm = normalize(shown);
    const keys = searchKeys(field, value, shown, norm);
    for (const key of keys) {
      tokens.add(fieldToken(field.id, key));
      for (const word of words(key)) tokens.add(word);
    }
    // The first key is the shown value normalized, whose words are the shown value's own when
    // it is ASCII and not cut (normalize keeps 200 characters): no need to split it again.
    if (!(keys[0] === norm && shown.length <= 200 && !NOT_ASCII.test(shown)))
      for (const word of words(shown)) tokens.add(word);
    if (field.unique) unique.push({ fieldId: field.id, norm });
    // A name that shows as nothing (blank parts), or an old value of another type, names no
    // one: the next name or the email does.
    if (field.type === 'name' && prettyName === null && shown !== '' && isName(value)) prettyName = shown;
    if (field.type === 'email' && email === null) email = String(value);
  }
  return { tokens, unique, prettyName: prettyName ?? (email || null) };
}

/** Whether values hold every search term (how an encrypted form is searched, once opened). */
export function matches(tokens: Set<string>, terms: Term[]): boolean {
  return terms.every((t) => (t.prefix ? [...tokens].some((x) => x.startsWith(t.token)) : tokens.has(t.token)));
}

/**
 * Unique fields whose value a conversion still stores the other way (plain or as an HMAC) in
 * another submission: checked by reading. The stored way is checked by the unique index as
 * the values are written (repository.insertSubmission).
 */
export async function heldOtherWay(
  trx: Transaction<Database>,
  def: FormDefinition,
  write: repo.SubmissionWrite,
  except?: number,
): Promise<number[]> {
  const taken: number[] = [];
  for (const v of write.unique) {
    if (v.alt === undefined) continue;
    if ((await repo.findUniqueHolder(trx, def.form.id, v.fieldId, v.alt, except)) !== undefined) taken.push(v.fieldId);
  }
  return taken;
}

/** A 400 naming each unique field (of write, in its order) whose value another submission holds. */
export function failIfTaken(def: FormDefinition, write: repo.SubmissionWrite, ...taken: number[][]): void {
  const held = new Set(taken.flat());
  const problems: ErrorDetail[] = write.unique.flatMap(({ fieldId }) => {
    if (!held.has(fieldId)) return [];
    const field = def.byId.get(fieldId)!;
    return {
      property: `body.fields(id=${field.id})`,
      message: `${field.label} (${field.id}) must be unique; this value was already submitted`,
    };
  });
  if (problems.length > 0) fail('not_unique', problems);
}
