import { defineJob } from '../../jobs/kind.js';
import { generateDocument, MAX_ATTEMPTS, RETRY_SCHEDULE } from './generate.js';
import { GeneratePayload } from './payload.js';

export { emailDocumentJob } from './email.js';

/** One document of one integration from one submission; see generate.ts and docs/docmerge.md. */
export const generateDocumentJob = defineJob({
  name: 'docmerge.generate',
  payload: GeneratePayload,
  maxAttempts: MAX_ATTEMPTS,
  retrySchedule: RETRY_SCHEDULE,
  handler: generateDocument,
});
