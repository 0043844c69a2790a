import { Type } from '@sinclair/typebox';
import { defineJob } from '../../jobs/kind.js';
import { transact } from '../../db/transaction.js';
import { deleteExpiredPrefills } from './repository.js';

/** Removes the stored values of prefill URLs past PREFILL_TTL_DAYS. */
export const expirePrefillsJob = defineJob({
  name: 'hosted.expire-prefills',
  payload: Type.Object({}),
  maxAttempts: 3,
  recurring: { everyMs: 60 * 60 * 1000 },
  async handler(ctx) {
    await transact(ctx.db, (trx) => deleteExpiredPrefills(trx, ctx.clock.now()));
  },
});
