import type { AppContext } from '../../context.js';
import { transact } from '../../db/transaction.js';
import { writerProcess } from '../processes/service.js';
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
    await transact(ctx.db, (trx) =>
      repo.deleteExpiredUnclaimed(
        trx,
        rows.map((r) => r.file_key),
        now,
      ),
    );
    removed += rows.length;
    if (rows.length < 500) return removed;
  }
}

/** Temporary files whose writer is not named stay this long: written by a version that named none. */
const UNNAMED_TEMPORARY_MS = 24 * 60 * 60 * 1000;

/**
 * Removes the temporary files of puts that processes which stopped left behind (local disk:
 * a process killed mid-upload leaves its .part file). Files of running processes stay,
 * whichever process they are. Run when a process starts and by the upload sweep. Returns how many went.
 */
export async function removeAbandonedWrites(ctx: Pick<AppContext, 'storage' | 'presence'>): Promise<number> {
  if (!ctx.storage.temporaryFiles || !ctx.storage.removeTemporary) return 0;
  // Listed before the processes are read: a file's writer registered before it wrote it.
  const files = await ctx.storage.temporaryFiles();
  const writers = files.map((f) => writerProcess(f.writer)).filter((id): id is number => id !== undefined);
  const stopped = await ctx.presence.stopped(writers);
  // File times are the system clock's (the file system stamps them), not the service clock's.
  // eslint-disable-next-line no-restricted-properties -- compared with file times, which the service clock does not set
  const unnamedBefore = Date.now() - UNNAMED_TEMPORARY_MS;
  const abandoned = files.filter((f) => {
    const writer = writerProcess(f.writer);
    return writer === undefined ? f.modifiedAt < unnamedBefore : stopped.has(writer);
  });
  await ctx.storage.removeTemporary(abandoned.map((f) => f.name));
  return abandoned.length;
}
