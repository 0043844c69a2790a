import type { AppContext } from '../../context.js';
import type { FormKeys } from '../../crypto/envelope.js';
import type { FieldRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';
import { ConflictError, NotFoundError, type ErrorDetail } from '../../errors.js';
import { lockForm } from '../forms/repository.js';
import { buildDefinition, parseData } from '../submissions/definitions.js';
import { derived } from '../submissions/indexing.js';
import { blindValue, isSealed } from '../submissions/sealing.js';
import type { FieldDefinition } from './definition.js';
import * as repo from './repository.js';

/** Submissions read, and their values written, per statement: a form's rows are never all in memory. */
const PAGE = 1000;
/** Pairs of submissions named when values are already held twice: enough to find them, not a listing. */
const PAIRS_SHOWN = 5;

/**
 * Whether a change makes the field's stored unique values wrong: it turns unique on, or a
 * unique field changes what its values normalize to (its type, or the option labels that a
 * radio or select value is shown, and so normalized, by).
 */
export function uniqueValuesStale(before: FieldDefinition, after: FieldDefinition): boolean {
  if (!after.unique) return false;
  if (!before.unique || before.type !== after.type) return true;
  const labels = (d: FieldDefinition) => JSON.stringify(d.options.map((o) => [o.value, o.label]));
  return labels(before) !== labels(after);
}

/**
 * Writes, inside the caller's transaction, the unique values of a field for every submission
 * its form holds, as a create would have written them (the normalized value; its HMAC on an
 * encrypted form, whose sealed rows are opened with the password), in place of what was
 * stored. A 409 `duplicate` naming a few submissions that hold one value, and nothing kept,
 * when they cannot all be unique.
 *
 * The form's row is locked first (PostgreSQL): creates in flight commit before, and those that
 * follow see the revision this change moves and are made again against the unique field.
 */
export async function fillUniqueValues(
  ctx: AppContext,
  trx: Executor,
  ids: { accountId: number; formId: number },
  field: FieldRow,
  password: string | undefined,
  /** The property of the request whose change this is, for the 409's details. */
  property: string,
): Promise<void> {
  const { accountId, formId } = ids;
  const form = await lockForm(trx, accountId, formId);
  // Deleted since requireForm read it (PostgreSQL): the answer a request after the delete gets.
  if (!form) throw new NotFoundError('form_not_found');
  // Rows are plain and sealed side by side, and their values stored both ways, until the job ends.
  if (form.encryption_state !== null) throw new ConflictError('encryption_change_running');
  const def = buildDefinition(form, [field], ctx.config.secretKey);
  const shape = { formId, fields: def.fields };
  let keys: FormKeys | undefined;
  await repo.clearUniqueValues(trx, formId, field.id);
  for (let after = 0; ;) {
    const rows = await repo.submissionDataPage(trx, formId, after, PAGE);
    const values: { submissionId: number; norm: string }[] = [];
    for (const row of rows) {
      // An encrypted form's values open only with its password: 401 without it, as for reading
      // them. A sealed row of a form that holds no key any more is parseData's 409.
      if (isSealed(row.data) && form.encryption_key !== null) keys ??= await ctx.formKeys.unlock(form, password);
      const [value] = derived(shape, parseData(def, row, keys)).unique;
      if (value === undefined) continue;
      const norm = def.seal ? blindValue(def.seal.secretKey, formId, field.id, value.norm) : value.norm;
      values.push({ submissionId: row.id, norm });
    }
    const taken = await repo.insertUniqueValues(trx, formId, field.id, values);
    if (taken.length > 0) await failHeldTwice(trx, formId, field, values, taken, property);
    if (rows.length < PAGE) return;
    after = rows[rows.length - 1]!.id;
  }
}

async function failHeldTwice(
  trx: Executor,
  formId: number,
  field: FieldRow,
  values: { submissionId: number; norm: string }[],
  taken: number[],
  property: string,
): Promise<never> {
  const normOf = new Map(values.map((v) => [v.submissionId, v.norm]));
  const shown = taken.slice(0, PAIRS_SHOWN);
  const holders = await repo.uniqueValueHolders(
    trx,
    formId,
    field.id,
    shown.map((id) => normOf.get(id)!),
  );
  const details: ErrorDetail[] = shown.map((id) => ({
    property,
    message: `submissions ${holders.get(normOf.get(id)!)} and ${id} hold the same value`,
  }));
  const more = taken.length > shown.length ? ', among others' : '';
  throw new ConflictError(
    'duplicate',
    `${field.label} (${field.id}) cannot be unique: ${details[0]!.message}${more}; change or delete one of each first`,
    { details },
  );
}
