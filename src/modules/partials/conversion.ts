import type { Transaction } from 'kysely';
import type { FormKeys } from '../../crypto/envelope.js';
import type { AppContext } from '../../context.js';
import type { Database, FormRow, PartialSubmissionRow } from '../../db/schema.js';
import { transact } from '../../db/transaction.js';
import { sealingKeyOf } from '../encryption/keys.js';
import { toDefinition } from '../fields/definition.js';
import * as fieldsRepo from '../fields/repository.js';
import * as formsRepo from '../forms/repository.js';
import * as repo from './repository.js';
import { isSealedPartial, openForOwner } from './sealing.js';
import { fromJson, prettyNameOf } from './service.js';

/**
 * A row's values in the clear, or undefined when they do not open: whatever fails here fails
 * for the row's content (a SealError, or a key or JSON that was altered), and stalls no batch.
 */
function openRow(
  form: Pick<FormRow, 'view_key'>,
  keys: FormKeys,
  row: PartialSubmissionRow,
): { json: string; values: ReturnType<typeof fromJson> } | undefined {
  try {
    const json = isSealedPartial(row.data) ? openForOwner(form, keys, row.data, row.id) : row.data;
    return { json, values: fromJson(json) };
  } catch {
    return undefined;
  }
}

type Rewrite = { row: PartialSubmissionRow; data: string; prettyName: string | null; resumeData: null };

/**
 * One batch of the background conversion that follows turning encryption on ('encrypt') or
 * off ('decrypt') (encryption/convert.ts), for the form's partial submissions after `after`
 * in id order, expired ones too (the chore removes them soon):
 * - 'decrypt': the owner's copy is opened with the form's keys and stored in the clear with
 *   its pretty name; the resume copy goes, as the clear values resume. Partials already in the
 *   clear get the pretty name an encrypted form's rows do not keep.
 * - 'encrypt': the owner's copy could be sealed, but not the resume copy, which needs the
 *   resume token that the service keeps only as a hash: a partial saved in the clear stays in
 *   the clear, so that its link still resumes it (docs/encryption.md), until it is saved
 *   again, finished, deleted or expires; it only loses its pretty name, as an encrypted form's
 *   rows hold none (lists name them from their values).
 * Rows say for themselves whether they are sealed, so a batch repeated after a restart changes
 * nothing twice. A partial saved after it was read is left as that save stored it, which is
 * the form's new way (savePartial reads the form's encryption under a share lock). One whose
 * values do not open with the keys (sealed to a key the form no longer holds, or altered) is
 * left as it is: its person can still resume it, and lists show it without its values.
 * Returns the last id read, or undefined when no rows are left.
 */
export async function convertPartialBatch(
  ctx: Pick<AppContext, 'db'>,
  formId: number,
  direction: 'encrypt' | 'decrypt',
  keys: FormKeys | undefined,
  after: number | undefined,
  /** Runs in the batch's transaction with the batch's last id: where the job checkpoints. */
  commit: (trx: Transaction<Database>, last: number) => Promise<void>,
  size = 200,
): Promise<number | undefined> {
  const { db } = ctx;
  const form = await formsRepo.findFormById(db, formId);
  if (!form) return undefined;
  if ((direction === 'encrypt') !== (sealingKeyOf(form) !== undefined)) return undefined; // the form moved on
  const fields = (await fieldsRepo.listFields(db, form.account_id, formId)).map((r) => ({
    id: r.id,
    ...toDefinition(r),
  }));
  const rows = await repo.nextPartials(db, formId, after, size);
  // Opened before the transaction, which then only writes.
  const rewrites: Rewrite[] = [];
  for (const row of rows) {
    if (direction === 'encrypt') {
      if (!isSealedPartial(row.data) && (row.pretty_name !== null || row.resume_data !== null))
        rewrites.push({ row, data: row.data, prettyName: null, resumeData: null });
      continue;
    }
    const opened = openRow(form, keys!, row);
    if (opened === undefined) continue;
    const prettyName = prettyNameOf(formId, fields, opened.values);
    if (opened.json !== row.data || prettyName !== row.pretty_name || row.resume_data !== null)
      rewrites.push({ row, data: opened.json, prettyName, resumeData: null });
  }
  await transact(db, async (trx) => {
    for (const w of rewrites) await repo.rewritePartial(trx, w.row, w);
    if (rows.length > 0) await commit(trx, rows[rows.length - 1]!.id);
  });
  return rows.length < size ? undefined : rows[rows.length - 1]!.id;
}
