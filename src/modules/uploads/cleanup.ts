import type { AppContext } from '../../context.js';
import { transact } from '../../db/transaction.js';
import * as repo from './repository.js';

/** Removes stored objects; idempotent, so that it can be retried (see removeFilesJob). */
export async function removeStoredFiles(ctx: Pick<AppContext, 'storage'>, keys: string[]): Promise<void> {
  if (keys.length > 0) await ctx.storage.deleteMany(keys);
}

/**
 * Removes the uploads that no submission claimed once their URL expired: objects first,
 * then rows, so that a failure leaves rows for the next run. Idempotent. Returns how many went.
 */
export async function sweepExpiredUploads(ctx: Pick<AppContext, 'db' | 'storage' | 'clock'>): Promise<number> {
  let removed = 0;
  for (;;) {
    const now = ctx.clock.now();
    const rows = await repo.expiredUnclaimed(ctx.db, now, 500);
    if (rows.length === 0) return removed;
    await ctx.storage.deleteMany(rows.map((r) => r.storage_key));
    await transact(ctx.db, (trx) => repo.deleteExpiredUnclaimed(trx, rows.map((r) => r.file_key), now));
    removed += rows.length;
    if (rows.length < 500) return removed;
  }
}
