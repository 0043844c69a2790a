import { Type } from '@sinclair/typebox';
import { defineJob } from './kind.js';
import { deleteFinishedBefore } from './repository.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/** Deletes done and failed jobs, and their run logs, older than JOB_RETENTION_DAYS; once a day. */
export const pruneJob = defineJob({
  name: 'jobs.prune',
  payload: Type.Object({}),
  maxAttempts: 3,
  recurring: { everyMs: DAY_MS },
  async handler(ctx) {
    await deleteFinishedBefore(ctx.db, ctx.clock.now() - ctx.config.jobRetentionDays * DAY_MS);
  },
});
