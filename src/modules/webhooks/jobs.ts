import { defineJob } from '../../jobs/kind.js';
import { deliver, MAX_ATTEMPTS, RETRY_SCHEDULE } from './delivery.js';
import { DeliveryPayload } from './payload.js';

/** One event to one webhook; see delivery.ts and docs/webhooks.md. */
export const deliverWebhookJob = defineJob({
  name: 'webhooks.deliver',
  payload: DeliveryPayload,
  maxAttempts: MAX_ATTEMPTS,
  retrySchedule: RETRY_SCHEDULE,
  // A delivery mostly waits on its receiver: slots of its own, so that deliveries keep up with
  // submissions and neither hold up nor are held up by the other kinds.
  concurrency: 32,
  handler: deliver,
});
