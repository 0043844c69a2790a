import type { Executor } from '../../db/transaction.js';
import { enqueue } from '../../jobs/outbox.js';
import type { JobHandler } from '../../jobs/types.js';
import { removeAbandonedWrites, removeStoredFiles, sweepExpiredUploads } from './service.js';

/** Removes stored objects whose rows a committed change deleted (a submission, replaced files). */
export const REMOVE_FILES_JOB = 'uploads.remove-files';
/**
 * Removes uploads that no submission claimed once their URL expired, and the temporary
 * files of processes that stopped mid-write (recurring, see jobs/handlers.ts).
 */
export const SWEEP_UPLOADS_JOB = 'uploads.sweep';

export const removeFilesHandler: JobHandler = (ctx, job) => removeStoredFiles(ctx, job.payload as { keys: string[] });

export const sweepUploadsHandler: JobHandler = async (ctx) => {
  await sweepExpiredUploads(ctx);
  await removeAbandonedWrites(ctx);
};

/** In the transaction that lets go of the files: their objects go once it commits. */
export async function enqueueFileRemoval(db: Executor, keys: string[]): Promise<void> {
  if (keys.length > 0) await enqueue(db, { kind: REMOVE_FILES_JOB, payload: { keys }, maxAttempts: 10 });
}
