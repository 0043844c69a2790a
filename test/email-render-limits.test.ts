import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AppContext } from '../src/context.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker, type Worker } from '../src/jobs/worker.js';
import { render, RENDER_LIMIT_MS, TemplateLimitError } from '../src/modules/emails/template.js';
import { renderTemplates, renderThread } from '../src/modules/emails/threaded-render.js';
import { dialectName, startTestApp, type TestAccount, type TestApp, expectStatus } from './support/helpers.js';

/**
 * Text doubled `times` times by captures (four parts each, no loop: rendered on the event loop).
 * Twelve doublings of 90,000 characters, then `| replace: "x", ""`, aborted the process: V8
 * joins strings without copying, LiquidJS charged neither the capture nor, before its split, the
 * replace, and the split asked for an array V8 cannot size.
 */
const doubled = (seed: string, times: number) =>
  `{% capture a %}${seed}{% endcapture %}` + '{% capture a %}{{a}}{{a}}{% endcapture %}'.repeat(times);

/** The auditor's template: nine million links, whatever the submission holds. */
const RUNAWAY = '{% for i in (1..3000) %}{% for j in (1..3000) %}<a href="x">{{ field_8 }}</a>{% endfor %}{% endfor %}';

describe(`email templates past the limits of a render (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  let a: TestAccount;
  let worker: Worker;

  before(async () => {
    // No SMTP_URL: a message that is sent is a row of the mail log.
    app = await startTestApp();
    ctx = app.server.ctx;
    a = await app.account();
    worker = createWorker(ctx, { kinds: jobKinds });
  });
  after(async () => {
    await worker.stop();
    await app.close();
  });

  async function makeForm(): Promise<{ id: number; count: number; note: number }> {
    const form = expectStatus(
      await a.post('/forms', {
        name: 'Loops',
        fields: [
          { type: 'text', label: 'Count' },
          { type: 'text', label: 'Note' },
        ],
      }),
      200,
      'form',
    );
    return { id: form.id, count: form.fields[0].id, note: form.fields[1].id };
  }

  const notify = (formId: number, message: string, subject = 'New entry') =>
    a.post(`/forms/${formId}/notifications`, { subject, message, recipients: ['desk@example.com'] });

  const submit = async (form: { id: number; count: number; note: number }, count: string) =>
    expectStatus(
      await a.post(`/forms/${form.id}/submissions`, {
        fields: [
          { id: form.count, value: count },
          { id: form.note, value: 'hello' },
        ],
      }),
      200,
      'submit',
    );

  const sendJobs = () =>
    ctx.db
      .selectFrom('jobs')
      .select(['id', 'state', 'attempts', 'last_error', 'payload'])
      .where('kind', '=', 'emails.send')
      .orderBy('id')
      .execute();

  const runsOf = (jobId: number) =>
    ctx.db.selectFrom('job_runs').select(['outcome', 'error']).where('job_id', '=', jobId).execute();

  const mailOf = (formId: number) =>
    ctx.db.selectFrom('mail_log').select(['subject', 'text_body']).where('form_id', '=', formId).execute();

  it('refuses, when it is saved, a template that runs past the limits whatever the values', async () => {
    const form = await makeForm();
    const refused = expectStatus(await notify(form.id, RUNAWAY), 400, 'runaway message');
    assert.equal(refused.code, 'invalid_template');
    assert.equal(refused.details[0].property, 'body.message');
    assert.match(refused.details[0].message, /limit/);
    const subject = expectStatus(await notify(form.id, 'x', RUNAWAY), 400, 'runaway subject');
    assert.equal(subject.details[0].property, 'body.subject');
    // Nor can an email be changed into one.
    const saved = expectStatus(await notify(form.id, 'Entry {{ submission_id }}'), 201, 'plain');
    expectStatus(await a.put(`/notifications/${saved.id}`, { message: RUNAWAY }), 400, 'update');
    assert.equal(
      expectStatus(await a.get(`/notifications/${saved.id}`), 200, 'read').message,
      'Entry {{ submission_id }}',
    );
  });

  it("fails such an email once and for good, saying why, and serves requests while it renders; the form's other emails go", async () => {
    const form = await makeForm();
    // Runs away only with the values a submission brings: it can be saved, and is stopped when sent.
    const looping = RUNAWAY.replace('(1..3000) %}<a', `(1..field_${form.count}) %}<a`).replace(
      'field_8',
      `field_${form.note}`,
    );
    expectStatus(await notify(form.id, looping), 201, 'looping notification');
    expectStatus(await notify(form.id, 'Note: {{ fields["Note"] }}', 'Plain'), 201, 'plain notification');
    await submit(form, '3000');
    const [runaway, plain] = await sendJobs();

    let ended = false;
    const running = worker.runDue().finally(() => {
      ended = true;
    });
    // Once the thread has the templates, the API still answers, every account's requests.
    while (!renderThread.busy && !ended) await new Promise((r) => setImmediate(r));
    const other = await app.account();
    expectStatus(await other.get('/forms'), 200, 'a request while the template renders');
    expectStatus(await a.get(`/forms/${form.id}`), 200, 'another');
    assert.equal(ended, false, 'the requests were answered while the email was being rendered');
    await running;

    const jobs = new Map((await sendJobs()).map((j) => [j.id, j]));
    const failed = jobs.get(runaway!.id)!;
    assert.equal(failed.state, 'failed', 'failed for good, not queued again');
    assert.equal(failed.attempts, 1);
    assert.match(failed.last_error!, /^the message could not be rendered: template render limit exceeded/);
    const runs = await runsOf(runaway!.id);
    assert.equal(runs.length, 1);
    assert.equal(runs[0]!.outcome, 'failed');
    assert.equal(runs[0]!.error, failed.last_error);
    assert.equal(jobs.get(plain!.id)!.state, 'done');
    assert.deepEqual(
      (await mailOf(form.id)).map((m) => m.text_body),
      ['Note: hello'],
      'only the other email was sent',
    );

    // Nothing runs it again, however long one waits.
    ctx.clock.advance(2 * 24 * 60 * 60 * 1000);
    await worker.runDue();
    assert.equal((await runsOf(runaway!.id)).length, 1);
  });

  it('stops, at its time limit, a render that its template limits do not (a filter over a huge range), and renders the next', async () => {
    const form = await makeForm();
    // One filter call: LiquidJS checks its render limit only between the parts of a template.
    expectStatus(
      await notify(form.id, `{% assign n = (1..field_${form.count}) | uniq %}{{ n | size }}`),
      201,
      'uniq notification',
    );
    await submit(form, '5000000');
    const limit = renderThread.timeLimitMs;
    // Shorter than the filter takes on any machine: the thread is stopped, not waited for.
    renderThread.timeLimitMs = 100;
    try {
      await worker.runDue();
    } finally {
      renderThread.timeLimitMs = limit;
    }
    const [job] = await sendJobs().then((jobs) => jobs.filter((j) => JSON.parse(j.payload).formId === form.id));
    assert.equal(job!.state, 'failed');
    assert.match(
      job!.last_error!,
      /^the templates could not be rendered: the templates took more than 0\.1 s to render/,
    );

    // A new thread renders what comes next.
    expectStatus(await a.delete(`/notifications/${JSON.parse(job!.payload).emailId}`), 200, 'delete');
    expectStatus(await notify(form.id, 'Count {{ fields["Count"] }}', 'Next'), 201, 'next notification');
    await submit(form, '7');
    await worker.runDue();
    assert.deepEqual(
      (await mailOf(form.id)).map((m) => m.text_body),
      ['Count 7'],
    );
  });

  it('charges what a capture holds, and what replace splits, to the memory limit of a render', async () => {
    // 23 million characters held in a variable, only their count written out.
    await assert.rejects(render(`${doubled('x'.repeat(90_000), 8)}{{ a | size }}`, {}), (error: unknown) => {
      assert.ok(error instanceof TemplateLimitError, String(error));
      assert.match(error.message, /memory alloc limit exceeded/);
      return true;
    });
    // Small captures are not hindered.
    assert.equal(await render(`${doubled('ab', 3)}{{ a | replace: "a", "c" }}`, {}), 'cbcbcbcbcbcbcbcb');
    // Each replace is charged its input before it splits it (LiquidJS charged only its output).
    const long = 'x'.repeat(12_000_000);
    await assert.rejects(
      render('{{ v | replace: "x", "" | size }}{{ v | replace: "x", "" | size }}', { v: long }),
      TemplateLimitError,
    );

    // Saved, such a template is refused as any other past the limits (it was rendered on the loop).
    const form = await makeForm();
    const refused = expectStatus(
      await notify(form.id, `${doubled('x'.repeat(90_000), 8)}{{ a | replace: "x", "" | size }}`),
      400,
      'doubled capture',
    );
    assert.equal(refused.code, 'invalid_template');
    assert.match(refused.details[0].message, /memory alloc limit exceeded/);

    // One whose size comes from a submitted value is saved, and fails for good when it is sent.
    expectStatus(await notify(form.id, `${doubled(`{{ field_${form.note} }}`, 8)}{{ a | size }}`), 201, 'by value');
    expectStatus(
      await a.post(`/forms/${form.id}/submissions`, {
        fields: [
          { id: form.count, value: '1' },
          { id: form.note, value: 'y'.repeat(100_000) },
        ],
      }),
      200,
      'submit',
    );
    await worker.runDue();
    const [job] = (await sendJobs()).filter((j) => JSON.parse(j.payload).formId === form.id);
    assert.equal(job!.state, 'failed');
    assert.match(job!.last_error!, /^the message could not be rendered: memory alloc limit exceeded/);
    assert.deepEqual(await mailOf(form.id), []);
  });
  it("renders a plain template on the loop within its limit whatever the loop's other work does meanwhile", async () => {
    // The worker's other jobs (and in serve the API) run on the same loop: 300 ms of theirs in a
    // continuation queued beside the render stopped it at its 250 ms, and failed its email for good.
    const busy = (ms: number) => {
      const end = performance.now() + ms;
      while (performance.now() < end);
    };
    const values = { field_1: 'Ada', all_fields: 'Note: hi' };
    // Queued first, as another job's continuation is when the render starts.
    const other = Promise.resolve().then(() => busy(RENDER_LIMIT_MS + 50));
    const [rendered] = await Promise.all([
      renderTemplates({
        format: 'html',
        subject: 'Thanks {{ field_1 }}',
        message: '<p>Hi {{ field_1 }}</p>{{ all_fields }}',
        textVariables: values,
        htmlVariables: values,
      }),
      other,
    ]);
    assert.equal(rendered.subject, 'Thanks Ada');
    assert.equal(rendered.html, '<p>Hi Ada</p>Note: hi');
  });
});
