import type { AppContext } from '../../context.js';
import { decryptWith, importPrivateKey } from '../../crypto/envelope.js';
import { transact, type Executor } from '../../db/transaction.js';
import { defineJob } from '../../jobs/kind.js';
import { loopTurn } from '../../loop-turn.js';
import * as formsRepo from '../forms/repository.js';
import { deletePlainPrefills } from '../hosted/repository.js';
import { convertPartialBatch } from '../partials/conversion.js';
import { convertBatch } from '../submissions/conversion.js';
import { submissionsDeps, type SubmissionsDeps } from '../submissions/definitions.js';
import { sealQueuedEvents } from './outbox.js';
import { withholdFormMessages } from '../emails/repository.js';
import { SEALED_NOTE } from '../emails/compose.js';
import { ConversionPayload, conversionKey, conversionKeyAad } from './service.js';

/** Seals or opens a form's existing submissions (and partial submissions) after encryption was turned on or off. */
export const conversionJob = defineJob({
  name: 'forms.encryption-conversion',
  payload: ConversionPayload,
  maxAttempts: 25,
  handler: (ctx, job, tools) =>
    runConversion(
      ctx,
      job.payload,
      job.progress,
      (progress, trx) => tools.checkpoint(progress, trx),
      (trx) => tools.replacePayload({ ...job.payload, key: undefined }, trx),
    ),
});

/**
 * The last id done: of a submission, or, with partials, of a partial submission (the
 * submissions are all done then). A job saved before partials were converted has no partials.
 */
interface Progress {
  after?: number;
  partials?: true;
}

const depsByContext = new WeakMap<AppContext, SubmissionsDeps>();

/**
 * Converts the form batch by batch, saving the last id after each, so that a worker that
 * dies halfway is followed by one that goes on from there; then marks the form done. A
 * repeated batch finds its rows converted already and leaves them alone. Turning encryption
 * on first rewrites the form's events waiting in the outbox without their values (outbox.ts),
 * and the mail log's messages of its emails without them, before the first batch, so a job that resumes after a batch has done it already.
 * The submissions go first, then the partial submissions (partials/conversion.ts), checkpointed the same way.
 */
export async function runConversion(
  ctx: AppContext,
  payload: ConversionPayload,
  progress: unknown,
  checkpoint: (progress: Progress, trx: Executor) => Promise<void>,
  forgetKey?: (trx: Executor) => Promise<void>,
): Promise<void> {
  let deps = depsByContext.get(ctx);
  if (!deps) {
    deps = submissionsDeps(ctx);
    depsByContext.set(ctx, deps);
  }
  const keys =
    payload.key === undefined
      ? undefined
      : importPrivateKey(
          decryptWith(conversionKey(ctx), Buffer.from(payload.key, 'base64'), conversionKeyAad(payload.formId)),
        );
  const saved = progress as Progress | null;
  let after = saved?.after;
  const inPartials = saved?.partials === true;
  if (payload.direction === 'encrypt' && after === undefined && !inPartials) {
    await sealQueuedEvents(ctx.db, payload.formId);
    await withholdFormMessages(ctx.db, payload.formId, SEALED_NOTE);
  }
  while (!inPartials) {
    // The checkpoint commits with the batch: a batch is never done twice, and a worker that
    // lost the job to another (its lease ran out) fails its batch instead of racing.
    const last = await convertBatch(deps, payload.formId, payload.direction, keys, after, (trx, id) =>
      checkpoint({ after: id }, trx),
    );
    if (last === undefined) break;
    after = last;
    await loopTurn();
  }
  let partialsAfter = inPartials ? after : undefined;
  for (;;) {
    const last = await convertPartialBatch(ctx, payload.formId, payload.direction, keys, partialsAfter, (trx, id) =>
      checkpoint({ after: id, partials: true }, trx),
    );
    if (last === undefined) break;
    partialsAfter = last;
    await loopTurn();
  }
  await transact(ctx.db, async (trx) => {
    await formsRepo.finishEncryptionChange(trx, payload.formId, payload.direction);
    // Prefill values kept in the clear cannot be sealed to the key their links would need
    // (links carry it; these were made without one): their links open the form empty.
    if (payload.direction === 'encrypt') await deletePlainPrefills(trx, payload.formId);
    // A decryption's job carried the form's private key: it is not kept once the work is done.
    if (payload.key !== undefined) await forgetKey?.(trx);
  });
}
