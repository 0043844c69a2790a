import { CONVERSION_JOB, conversionHandler } from '../modules/encryption/convert.js';
import { PRUNE_KIND, pruneJobs } from './prune.js';
import type { JobHandlers } from './types.js';

/**
 * Every job kind the worker runs, by name. A module that enqueues a new kind adds its
 * handler here; a kind missing from this map fails its jobs (see worker.ts).
 */
export const jobHandlers: JobHandlers = {
  [PRUNE_KIND]: pruneJobs,
  [CONVERSION_JOB]: conversionHandler,
};
