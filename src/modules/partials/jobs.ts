import { defineChore } from '../../jobs/kind.js';
import { HOUR_MS } from '../../time-units.js';
import { removeExpiredPartials } from './service.js';

/** Removes partial submissions PARTIAL_RETENTION_DAYS after their last save. */
export const expirePartialsJob = defineChore({
  name: 'partials.expire',
  everyMs: HOUR_MS,
  run: removeExpiredPartials,
});
