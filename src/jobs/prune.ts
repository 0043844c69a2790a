import { DAY_MS } from '../time-units.js';
import { defineChore } from './kind.js';
import { deleteFinishedBefore } from './repository.js';

/** Deletes done and failed jobs, and their run logs, older than JOB_RETENTION_DAYS; once a day. */
export const pruneJob = defineChore({
  name: 'jobs.prune',
  everyMs: DAY_MS,
  run: (ctx) => deleteFinishedBefore(ctx.db, ctx.clock.now() - ctx.config.jobRetentionDays * DAY_MS),
});
