import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { transact, type Executor } from '../../db/transaction.js';
import { defineJob } from '../../jobs/kind.js';
import { loopTurn } from '../../loop-turn.js';
import { enqueueAllOnce, jobOf } from '../../jobs/outbox.js';
import * as fieldsRepo from '../fields/repository.js';
import { noteSubmissionChange } from '../forms/counts.js';
import * as formsRepo from '../forms/repository.js';
import { buildDefinition, parseData } from './definitions.js';
import { searchable } from './indexing.js';
import * as repo from './repository.js';
import { isSealed } from './sealing.js';

/**
 * Rows read and rewritten per transaction (and checkpoint): as many as a conversion's batch
 * (submissions/conversion.ts), since on SQLite each batch's statements run on the event loop.
 */
const BATCH = 200;

interface Progress {
  after?: number;
}

/**
 * Makes a form's search index (keyword and field tokens, pretty names) anew from its fields as
 * they are now, after a field was deleted or changed what its values show as: the deleted
 * field's values stay in the rows, hidden, and must no longer be found by a search. Batch by
 * batch, each in its own transaction with its checkpoint, so a worker that dies goes on from
 * there; a row edited meanwhile was indexed by its edit and is left alone. Sealed rows hold
 * nothing searchable but the form's own token, and a conversion indexes each row it opens.
 */
export const reindexJob = defineJob({
  name: 'submissions.reindex',
  payload: Type.Object({ formId: Type.Integer() }),
  maxAttempts: 25,
  handler: async (ctx, job, tools) => {
    let after = (job.progress as Progress | null)?.after;
    for (;;) {
      const last = await reindexBatch(ctx, job.payload.formId, after, (trx, id) =>
        tools.checkpoint({ after: id }, trx),
      );
      if (last === undefined) return;
      after = last;
      await loopTurn();
    }
  },
});

/**
 * Enqueues the forms' reindex in the transaction of the change that makes their index stale, in
 * one insert; a form whose reindex waits, not yet begun, has it do this change's work too.
 */
export async function enqueueReindex(trx: Executor, ...formIds: number[]): Promise<void> {
  await enqueueAllOnce(
    trx,
    formIds.map((formId) => jobOf(reindexJob, { formId })),
  );
}

/** Reindexes the rows after `after`; the last id done, or undefined once none are left (or the form is gone). */
export async function reindexBatch(
  ctx: AppContext,
  formId: number,
  after: number | undefined,
  commit: (trx: Executor, last: number) => Promise<void>,
  size = BATCH,
): Promise<number | undefined> {
  const { db, config } = ctx;
  const form = await formsRepo.findFormById(db, formId);
  if (!form) return undefined;
  const def = buildDefinition(form, await fieldsRepo.listFields(db, form.account_id, formId), config.secretKey);
  // Sealed rows index nothing of their values, and a form turned encrypted has its plain rows
  // sealed (and indexed so) by its conversion.
  if (def.seal !== undefined) return undefined;
  const rows = await repo.nextBatch(db, form.account_id, formId, { terms: [] }, after, 'asc', size);
  if (rows.length === 0) return undefined;
  await transact(db, async (trx) => {
    let changed = false;
    for (const row of rows) {
      // Still sealed on a form being opened: its conversion indexes it.
      if (isSealed(row.data)) continue;
      const write = searchable(def, parseData(def, row, undefined), row.updated_at);
      changed = (await repo.rewriteSubmission(trx, row, write)) || changed;
    }
    // Cached search totals count what the index holds, which has just changed.
    if (changed) await noteSubmissionChange(trx, form.account_id, formId, 0, 0);
    await commit(trx, rows[rows.length - 1]!.id);
  });
  return rows.length < size ? undefined : rows[rows.length - 1]!.id;
}
