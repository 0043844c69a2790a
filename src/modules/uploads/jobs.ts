import { Type } from '@sinclair/typebox';
import { defineChore, defineJob } from '../../jobs/kind.js';
import { MINUTE_MS } from '../../time-units.js';
import { removeAbandonedWrites, removeStoredFiles, sweepExpiredUploads } from './cleanup.js';

/**
 * Removes stored objects whose rows a committed change deleted (a submission, replaced
 * files): enqueued in the transaction that lets go of them, so they go once it commits.
 */
export const removeFilesJob = defineJob({
  name: 'uploads.remove-files',
  payload: Type.Object({ keys: Type.Array(Type.String()) }),
  maxAttempts: 10,
  handler: (ctx, job) => removeStoredFiles(ctx, job.payload.keys),
});

/**
 * Removes uploads that no submission claimed once their URL expired, and the temporary
 * files of processes that stopped mid-write.
 */
export const sweepUploadsJob = defineChore({
  name: 'uploads.sweep',
  // Upload URLs expire after 2 hours; this bounds how long after that their files stay.
  everyMs: 10 * MINUTE_MS,
  async run(ctx) {
    await sweepExpiredUploads(ctx);
    await removeAbandonedWrites(ctx);
  },
});
