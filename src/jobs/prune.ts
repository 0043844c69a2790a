import { deleteFinishedBefore } from './repository.js';
import type { JobHandler } from './types.js';

export const PRUNE_KIND = 'jobs.prune';

const DAY_MS = 24 * 60 * 60 * 1000;

/** Deletes done and failed jobs, and their run logs, older than JOB_RETENTION_DAYS. */
export const pruneJobs: JobHandler = async (ctx) => {
  await deleteFinishedBefore(ctx.db, ctx.clock.now() - ctx.config.jobRetentionDays * DAY_MS);
};
