import { Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import { defineJob, type JobKind } from '../../src/jobs/kind.js';

/** Tables the jobs below write to, made by the test in its own database. */
export const TEST_TABLES_SQL = [
  'CREATE TABLE job_test_batches (job_id integer NOT NULL, batch integer NOT NULL, attempt integer NOT NULL)',
  'CREATE TABLE job_test_spread (n integer NOT NULL, worker_pid integer NOT NULL)',
];

/**
 * Works like the long jobs that encrypt a form's submissions: batch after batch, each
 * batch's writes committed together with the checkpoint that says it is done. One row
 * per batch in job_test_batches: a batch done twice shows as two rows. On its first
 * attempt it stops inside the transaction of batch `pauseAt`, prints "paused" and waits
 * there, for the test to kill the process.
 */
export const batchesJob = defineJob({
  name: 'test.batches',
  payload: Type.Object({ batches: Type.Integer(), pauseAt: Type.Integer() }),
  async handler(ctx, job, tools) {
    const { batches, pauseAt } = job.payload;
    const start = (job.progress as { next: number } | undefined)?.next ?? 0;
    for (let batch = start; batch < batches; batch++) {
      await ctx.db.transaction().execute(async (trx) => {
        await sql`INSERT INTO job_test_batches (job_id, batch, attempt) VALUES (${job.id}, ${batch}, ${job.attempt})`.execute(
          trx,
        );
        if (job.attempt === 1 && batch === pauseAt) {
          process.stdout.write('paused\n');
          await new Promise(() => {});
        }
        await tools.checkpoint({ next: batch + 1 }, trx);
      });
    }
  },
});

/** Notes which process ran job n. */
export const spreadJob = defineJob({
  name: 'test.spread',
  payload: Type.Object({ n: Type.Integer() }),
  async handler(ctx, job) {
    await sql`INSERT INTO job_test_spread (n, worker_pid) VALUES (${job.payload.n}, ${process.pid})`.execute(ctx.db);
  },
});

/** The kinds that test/jobs.test.ts runs in worker processes (test/support/job-worker-child.ts). */
export const testKinds: readonly JobKind[] = [batchesJob, spreadJob];
