import { after, before, beforeEach } from 'node:test';
import type { AppContext } from '../../src/context.js';
import { jobKinds } from '../../src/job-kinds.js';
import { createWorker, type Worker } from '../../src/jobs/worker.js';
import { expectStatus, startTestApp, type TestAccount, type TestApp } from './helpers.js';

export interface DocmergeForm {
  app: TestApp;
  ctx: AppContext;
  /** Runs the due jobs (the documents) when a test asks it to. */
  worker: Worker;
  a: TestAccount;
  formId: number;
  /** The form's one field, a text field labelled "Full name". */
  nameField: number;
}

/**
 * The setting of a suite of document-merge tests: a test app, a worker run by hand, and a form
 * of one text field. Before each test the jobs left are run and every integration is removed,
 * so that one test's documents do not reach the next.
 */
export function withDocmergeForm(formName: string, use: (suite: DocmergeForm) => void): void {
  let suite: DocmergeForm | undefined;
  before(async () => {
    const app = await startTestApp({ WORKER_POLL_MS: '50' });
    const ctx = app.server.ctx;
    const a = await app.account('A');
    const form = expectStatus(
      await a.post('/forms', { name: formName, fields: [{ type: 'text', label: 'Full name' }] }),
      200,
      'form',
    );
    suite = {
      app,
      ctx,
      worker: createWorker(ctx, { kinds: jobKinds }),
      a,
      formId: form.id,
      nameField: form.fields[0].id,
    };
    use(suite);
  });
  after(() => suite?.app.close());
  beforeEach(async () => {
    await suite!.worker.runDue();
    await suite!.ctx.db.deleteFrom('docmerge_integrations').execute();
  });
}
