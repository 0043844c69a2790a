import { CONVERSION_JOB, conversionHandler } from '../modules/encryption/convert.js';
import { REMOVE_FILES_JOB, removeFilesHandler, SWEEP_UPLOADS_JOB, sweepUploadsHandler } from '../modules/uploads/jobs.js';
import { PRUNE_KIND, pruneJobs } from './prune.js';
import type { JobHandlers } from './types.js';

/**
 * Every job kind the worker runs, by name. A module that enqueues a new kind adds its
 * handler here; a kind missing from this map fails its jobs (see worker.ts).
 */
export const jobHandlers: JobHandlers = {
  [PRUNE_KIND]: pruneJobs,
  [CONVERSION_JOB]: conversionHandler,
  [REMOVE_FILES_JOB]: removeFilesHandler,
  [SWEEP_UPLOADS_JOB]: sweepUploadsHandler,
};

/** Chores that workers schedule for themselves: at most one queued or running of each, every so often. */
export const recurringJobs: readonly { kind: string; everyMs: number; maxAttempts: number }[] = [
  { kind: PRUNE_KIND, everyMs: 24 * 60 * 60 * 1000, maxAttempts: 3 },
  // Unclaimed uploads go once their URL has expired (2 hours); this bounds how long after.
  { kind: SWEEP_UPLOADS_JOB, everyMs: 10 * 60 * 1000, maxAttempts: 3 },
];
