import { after, before } from 'node:test';
import { jobKinds } from '../../src/job-kinds.js';
import { startWorker, type Worker } from '../../src/jobs/worker.js';
import { startTestApp, type TestAccount, type TestApp } from './helpers.js';

/**
 * A test app with an account and a worker of its own running every job kind (polling every
 * 50 ms), for the tests of a describe block that wait for jobs to be done; stopped after them.
 */
export function withWorkingApp(use: (suite: { app: TestApp; a: TestAccount; worker: Worker }) => void): void {
  let app: TestApp | undefined;
  let worker: Worker | undefined;
  before(async () => {
    app = await startTestApp();
    const a = await app.account();
    worker = startWorker(app.server.ctx, { kinds: jobKinds, pollMs: 50 });
    use({ app, a, worker });
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
  });
}

/** Polls probe every 100 ms until it answers something, failing after timeoutMs (a job's work, seen from outside). */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
