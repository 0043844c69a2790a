import { defineJob } from '../../jobs/kind.js';
import { SendEmailPayload } from './payload.js';
import { sendSubmissionEmail } from './send.js';

/** One confirmation or notification email of one submission; retried with the outbox's backoff. */
export const sendEmailJob = defineJob({
  name: 'emails.send',
  payload: SendEmailPayload,
  maxAttempts: 8,
  // A send mostly waits on the SMTP server (through a pool of 5 connections, transport.ts).
  concurrency: 10,
  handler: (ctx, job) => sendSubmissionEmail(ctx, job.id, job.payload),
});
