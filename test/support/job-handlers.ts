import { sql } from 'kysely';
import type { JobHandlers } from '../../src/jobs/types.js';

/** Tables the handlers below write to, made by the test in its own database. */
export const TEST_TABLES_SQL = [
  'CREATE TABLE job_test_batches (job_id integer NOT NULL, batch integer NOT NULL, attempt integer NOT NULL)',
  'CREATE TABLE job_test_spread (n integer NOT NULL, worker_pid integer NOT NULL)',
];

/** Handlers of the jobs that test/jobs.test.ts runs in worker processes (test/support/job-worker-child.ts). */
export const testHandlers: JobHandlers = {
  /**
   * Works like the long jobs that encrypt a form's submissions: batch after batch, each
   * batch's writes committed together with the checkpoint that says it is done. One row
   * per batch in job_test_batches: a batch done twice shows as two rows. On its first
   * attempt it stops inside the transaction of batch `pauseAt`, prints "paused" and waits
   * there, for the test to kill the process.
   */
  async 'test.batches'(ctx, job, tools) {
    const { batches, pauseAt } = job.payload as { batches: number; pauseAt: number };
    const start = (job.progress as { next: number } | undefined)?.next ?? 0;
    for (let batch = start; batch < batches; batch++) {
      await ctx.db.transaction().execute(async (trx) => {
        await sql`INSERT INTO job_test_batches (job_id, batch, attempt) VALUES (${job.id}, ${batch}, ${job.attempt})`.execute(trx);
        if (job.attempt === 1 && batch === pauseAt) {
          process.stdout.write('paused\n');
          await new Promise(() => {});
        }
        await tools.checkpoint({ next: batch + 1 }, trx);
      });
    }
  },

  /** Notes which process ran job n. */
  async 'test.spread'(ctx, job) {
    const { n } = job.payload as { n: number };
    await sql`INSERT INTO job_test_spread (n, worker_pid) VALUES (${n}, ${process.pid})`.execute(ctx.db);
  },
};
