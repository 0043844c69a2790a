import { defineChore, defineJob } from '../../jobs/kind.js';
import { DAY_MS } from '../../time-units.js';
import { SendEmailPayload } from './payload.js';
import { deleteMailBefore } from './repository.js';
import { sendSubmissionEmail } from './send.js';

/** One confirmation or notification email of one submission; retried with the outbox's backoff. */
export const sendEmailJob = defineJob({
  name: 'emails.send',
  payload: SendEmailPayload,
  maxAttempts: 8,
  // A send mostly waits on the SMTP server, through SMTP_CONNECTIONS connections (5 unless
  // set; at most this concurrency, config.ts).
  concurrency: 10,
  handler: (ctx, job, tools) => sendSubmissionEmail(ctx, job.id, job.payload, tools),
});

/**
 * Deletes the mail log's messages (kept when SMTP_URL is unset) older than
 * JOB_RETENTION_DAYS, once a day: the log holds submitted values, and the jobs that wrote
 * its messages are pruned after as long (jobs.prune), so none of them can run again and
 * look for its message.
 */
export const pruneMailLogJob = defineChore({
  name: 'emails.prune-log',
  everyMs: DAY_MS,
  run: (ctx) => deleteMailBefore(ctx.db, ctx.clock.now() - ctx.config.jobRetentionDays * DAY_MS),
});
