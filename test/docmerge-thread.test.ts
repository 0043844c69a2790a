import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AppContext } from '../src/context.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker, type Worker } from '../src/jobs/worker.js';
import type { MergeInput } from '../src/modules/docmerge/merge-input.js';
import { templateTags, TemplateError } from '../src/modules/docmerge/template.js';
import { MergeThread, mergeThread } from '../src/modules/docmerge/threaded-merge.js';
import { makeDocx, readDocx } from './support/docmerge-templates.js';
import { dialectName, startTestApp, type TestAccount, type TestApp, expectStatus } from './support/helpers.js';

/**
 * Merging runs in a worker thread (threaded-merge.ts), not on the event loop of the process
 * that serves the API: the loop stays free while a large DOCX merges, a merge over the time
 * limit or the memory limit fails alone and the next gets a new thread, and a TemplateError in
 * the thread reaches the job (its run log) and the preview as one on the loop did.
 */

const b64 = (bytes: Buffer) => bytes.toString('base64');

/** About 2 MiB of XML, 20,000 paragraphs with two tags each: some hundreds of ms to merge, even on a fast machine. */
const LINES = 20_000;
const large = makeDocx(Array.from({ length: LINES }, (_, i) => `Line ${i} for {Full name}, ordered on {date}.`));

/** The longest the event loop went without running a timer, while `during` runs; and how long it ran. */
async function longestStall(during: () => Promise<unknown>): Promise<{ stallMs: number; durationMs: number }> {
  let last = performance.now();
  let stallMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
  }, 5);
  const started = performance.now();
  try {
    await during();
  } finally {
    clearInterval(timer);
  }
  const durationMs = performance.now() - started;
  stallMs = Math.max(stallMs, performance.now() - last);
  return { stallMs, durationMs };
}

describe(`document merge in a worker thread (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  let worker: Worker;
  let a: TestAccount;
  // Two forms, so that a submission makes the jobs of one integration only.
  const forms: Record<'big' | 'small', { id: number; name: number }> = {} as never;
  let bigIntegration: number;

  const runs = async (formId: number, id: number) =>
    expectStatus(await a.get(`/forms/${formId}/integrations/${id}/runs`), 200, 'runs').runs as any[];
  const submit = async (form: { id: number; name: number }, name: string) =>
    expectStatus(
      await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.name, value: name }] }),
      200,
      'submit',
    );
  const create = async (formId: number, filename: string, template: Buffer) =>
    expectStatus(
      await a.post(`/forms/${formId}/integrations/docmerge`, { template: { filename, content: b64(template) } }),
      201,
      'create',
    );
  const documentText = async (submissionId: number) => {
    const record = expectStatus(await a.get(`/submissions/${submissionId}`), 200, 'submission');
    const [document] = record.documents ?? [];
    assert.ok(document, 'a document was made');
    const res = await fetch(`${app.url}/api/v2025/submissions/${submissionId}/documents/${document.id}`, {
      headers: { authorization: `Bearer ${a.token}` },
    });
    assert.equal(res.status, 200);
    return readDocx(Buffer.from(await res.arrayBuffer())).text;
  };

  before(async () => {
    app = await startTestApp({ WORKER_POLL_MS: '50' });
    ctx = app.server.ctx;
    worker = createWorker(ctx, { kinds: jobKinds });
    a = await app.account('A');
    for (const key of ['big', 'small'] as const) {
      const form = expectStatus(
        await a.post('/forms', { name: key, fields: [{ type: 'text', label: 'Full name' }] }),
        200,
        'form',
      );
      forms[key] = { id: form.id, name: form.fields[0].id };
    }
    // Its tags are read in the thread too (at save).
    bigIntegration = (await create(forms.big.id, 'large.docx', large)).id;
    await worker.runDue(); // what making the account and forms queued
  });
  after(() => app.close());

  it('keeps the event loop free, and answers requests, while a large DOCX merges', async () => {
    const submission = await submit(forms.big, 'Loop Free');
    let merging = true;
    let answered = 0;
    const health = (async () => {
      while (merging) {
        const res = await fetch(`${app.url}/healthz`);
        await res.arrayBuffer();
        if (merging && res.status === 200) answered++;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const { stallMs, durationMs } = await longestStall(async () => {
      await worker.runDue();
      merging = false;
    });
    await health;

    const [run] = await runs(forms.big.id, bigIntegration);
    assert.equal(run.outcome, 'made', run.error);
    const text = await documentText(submission.id);
    assert.ok(text.startsWith('Line 0 for Loop Free, ordered on '), text.slice(0, 100));
    assert.equal(text.split('\n').length, LINES);
    // On the loop the merge was one stall as long as nearly all of the job; off it, the loop
    // only copies the template out and the document back, and writes the rows.
    assert.ok(
      stallMs < durationMs / 3,
      `the longest stall of the loop, ${Math.round(stallMs)} ms, is far below the job's ${Math.round(durationMs)} ms`,
    );
    assert.ok(answered >= 1, `GET /healthz answered ${answered} times during the merge`);
  });

  it('stops a merge over the time limit, failing it alone, and merges the next in a new thread', async () => {
    const small = await create(forms.small.id, 'small.docx', makeDocx(['Hello {Full name}']));
    assert.ok(mergeThread.threadId !== undefined, 'the thread is running');
    const first = mergeThread.threadId;
    const limit = mergeThread.timeLimitMs;
    mergeThread.timeLimitMs = 100; // the large merge takes several times that, even on a fast machine
    try {
      await submit(forms.big, 'Too Slow');
      await worker.runDue();
    } finally {
      mergeThread.timeLimitMs = limit;
    }
    const [run] = await runs(forms.big.id, bigIntegration);
    assert.equal(run.outcome, 'failed');
    assert.equal(run.error, 'could not be merged within 0.1 s, the limit of a merge: it was stopped');
    assert.ok(run.nextAttempt, 'retried on the schedule, like any failure');
    assert.notEqual(mergeThread.threadId, first, 'the stopped thread is gone');

    const submission = await submit(forms.small, 'Next One');
    await worker.runDue();
    const [next] = await runs(forms.small.id, small.id);
    assert.equal(next.outcome, 'made', next.error);
    assert.equal(await documentText(submission.id), 'Hello Next One');
    assert.ok(mergeThread.threadId !== undefined && mergeThread.threadId !== first, 'a new thread');
  });

  it('gives a TemplateError thrown in the thread to the job and the preview, with its message', async () => {
    const integration = await create(forms.small.id, 'broken.docx', makeDocx(['Hi {Full name}']));
    // A template with a broken tag, kept as if by an older version (saving one is refused).
    const broken = makeDocx(['Hi {Full name']);
    const expected = await templateTags('docx', broken).then(
      () => assert.fail('the template is broken'),
      (error: unknown) => {
        assert.ok(error instanceof TemplateError);
        return error.message;
      },
    );
    assert.match(expected, /^has broken merge tags: /);
    await ctx.db
      .updateTable('docmerge_integrations')
      .set({ template: b64(broken) })
      .where('id', '=', integration.id)
      .execute();
    const submission = await submit(forms.small, 'Broken Bo');
    await worker.runDue();
    const [run] = await runs(forms.small.id, integration.id);
    assert.equal(run.submissionId, submission.id);
    assert.equal(run.outcome, 'failed');
    assert.equal(run.error, expected);

    const preview = await a.post(`/forms/${forms.small.id}/integrations/${integration.id}/preview`, {
      submissionId: submission.id,
    });
    const body = expectStatus(preview, 400, 'preview', 'invalid_integration');
    assert.equal(body.error, `The template ${expected}`);
    // And at save: the tags are read in the thread.
    const refused = expectStatus(
      await a.post(`/forms/${forms.small.id}/integrations/docmerge`, {
        template: { filename: 'broken.docx', content: b64(broken) },
      }),
      400,
      'save',
      'invalid_integration',
    );
    assert.equal(refused.details[0].message, `broken.docx ${expected}`);
  });

  it('fails a merge over the memory limit alone, and closes an idle thread', async () => {
    // A thread of its own, with a heap that a small merge fits in and the large one does not.
    const thread = new MergeThread(60_000, 48);
    const input = (template: Buffer): MergeInput => ({
      kind: 'docx',
      template,
      flatten: true,
      tags: ['Full name'],
      fields: [{ id: 1, label: 'Full name', type: 'text', options: [] }],
      mapping: {},
      subject: {
        submissionId: 1,
        formId: 1,
        formName: 'F',
        timestamp: '2026-01-02T03:04:05.000Z',
        values: new Map([[1, 'Mo']]),
      },
    });
    try {
      const small = makeDocx(['Hello {Full name} on {date}']);
      assert.equal(readDocx(await thread.merge(input(small))).text, 'Hello Mo on 2026-01-02');
      const first = thread.threadId;
      await assert.rejects(thread.merge(input(large)), (error: unknown) => {
        assert.ok(error instanceof TemplateError, String(error));
        assert.equal(
          error.message,
          'could not be merged: it needed more than the 48 MB of memory a merge may use, and was stopped',
        );
        return true;
      });
      assert.equal(readDocx(await thread.merge(input(small))).text, 'Hello Mo on 2026-01-02');
      assert.notEqual(thread.threadId, first, 'a new thread');
    } finally {
      await thread.close();
    }
    assert.equal(thread.threadId, undefined, 'closed');
  });
});
