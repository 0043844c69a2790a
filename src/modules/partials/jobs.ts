import { Type } from '@sinclair/typebox';
import { defineJob } from '../../jobs/kind.js';
import { removeExpiredPartials } from './service.js';

/** Removes partial submissions PARTIAL_RETENTION_DAYS after their last save. */
export const expirePartialsJob = defineJob({
  name: 'partials.expire',
  payload: Type.Object({}),
  maxAttempts: 3,
  recurring: { everyMs: 60 * 60 * 1000 },
  async handler(ctx) {
    await removeExpiredPartials(ctx);
  },
});
