import { defineChore } from '../../jobs/kind.js';
import { transact } from '../../db/transaction.js';
import { HOUR_MS } from '../../time-units.js';
import { deleteExpiredPrefills } from './repository.js';

/** Removes the stored values of prefill URLs past PREFILL_TTL_DAYS. */
export const expirePrefillsJob = defineChore({
  name: 'hosted.expire-prefills',
  everyMs: HOUR_MS,
  run: (ctx) => transact(ctx.db, (trx) => deleteExpiredPrefills(trx, ctx.clock.now())),
});
