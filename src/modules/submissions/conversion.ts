import type { Transaction } from 'kysely';
import { type FormKeys } from '../../crypto/envelope.js';
import type { Database } from '../../db/schema.js';
import { transact } from '../../db/transaction.js';
import * as fieldsRepo from '../fields/repository.js';
import { noteSubmissionChange } from '../forms/counts.js';
import * as formsRepo from '../forms/repository.js';
import * as uploadsRepo from '../uploads/repository.js';
import { commitFileMoves, convertFiles, discardCopies } from '../uploads/service.js';
import { commitDocumentMoves, convertDocuments, documentsToConvert } from '../docmerge/convert.js';
import { enqueue } from '../../jobs/outbox.js';
import { removeFilesJob } from '../uploads/jobs.js';
import * as repo from './repository.js';
import { isSealed } from './sealing.js';
import { type SubmissionsDeps, buildDefinition, parseData } from './definitions.js';
import { searchable } from './indexing.js';

/**
 * One batch of the background conversion that follows turning encryption on ('encrypt') or
 * off ('decrypt'): the form's submissions after `after` still stored the old way are
 * rewritten the new way, data, index and unique values together. Rows say for themselves
 * whether they are sealed, so a batch repeated after a restart changes nothing twice.
 * Returns the last id read, or undefined when no rows are left.
 */
export async function convertBatch(
  deps: SubmissionsDeps,
  formId: number,
  direction: 'encrypt' | 'decrypt',
  keys: FormKeys | undefined,
  after: number | undefined,
  /** Runs in the batch's transaction with the batch's last id: where the job checkpoints. */
  commit: (trx: Transaction<Database>, last: number) => Promise<void>,
  size = 200,
): Promise<number | undefined> {
  const { db, config } = deps.ctx;
  const form = await formsRepo.findFormById(db, formId);
  if (!form) return undefined;
  const def = buildDefinition(form, await fieldsRepo.listFields(db, form.account_id, formId), config.secretKey);
  const { fields } = def;
  if ((direction === 'encrypt') !== (def.seal !== undefined)) return undefined; // the form moved on: nothing of this job is left to do
  // Files are copied inside a batch, between two checkpoints (which renew the job's lease): keep
  // the batches of forms with file fields small.
  const batch = fields.some((f) => f.type === 'file' || f.type === 'signature') ? Math.min(size, 20) : size;
  const rows = await repo.nextBatch(db, form.account_id, formId, { terms: [] }, after, 'asc', batch);
  // Files first, outside the transaction (storage I/O); the transaction then switches the uploads over.
  const sealing = direction === 'encrypt';
  const files = await uploadsRepo.filesToConvert(
    db,
    rows.map((r) => r.id),
    sealing,
  );
  const to = sealing ? { publicKey: def.seal!.publicKey } : { keys: keys! };
  const moves = files.length === 0 ? [] : await convertFiles(deps.ctx, files, to);
  // Documents made by document-merge integrations are converted with their submissions, like files.
  const documents = await documentsToConvert(
    db,
    rows.map((r) => r.id),
    sealing,
  );
  const documentMoves = await convertDocuments(deps.ctx, documents, to).catch(async (error: unknown) => {
    await discardCopies(deps.ctx, moves);
    throw error;
  });
  await transact(db, async (trx) => {
    await commitFileMoves(trx, moves, sealing, deps.ctx.clock.now());
    const unused = await commitDocumentMoves(trx, documentMoves, sealing);
    if (unused.length > 0) await enqueue(trx, removeFilesJob, { keys: unused });
    let changed = false;
    for (const row of rows) {
      if (isSealed(row.data) === (direction === 'encrypt')) continue;
      const write = searchable(def, parseData(def, row, keys), row.updated_at);
      changed = (await repo.rewriteSubmission(trx, row, write)) || changed;
    }
    // Cached search totals count what the index holds, which has just changed.
    if (changed) await noteSubmissionChange(trx, form.account_id, formId, 0, 0);
    if (rows.length > 0) await commit(trx, rows[rows.length - 1]!.id);
  }).catch(async (error: unknown) => {
    await discardCopies(deps.ctx, moves);
    await discardCopies(
      deps.ctx,
      documentMoves.map((m) => ({ fileKey: '', from: m.from, to: m.to })),
    );
    throw error;
  });
  return rows.length < batch ? undefined : rows[rows.length - 1]!.id;
}
