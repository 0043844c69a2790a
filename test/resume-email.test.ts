/**
 * Resume links by email (issue 13): a respondent saving a partial on the hosted page asks for
 * its resume link to be emailed. The email is a job enqueued in the save's transaction, sent
 * with the mailer through a real SMTP server (or into the mail log without SMTP_URL),
 * limited per partial and per address, and the address is never shown back by the API but
 * in the owner's mail log.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AppContext } from '../src/context.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker, type Worker } from '../src/jobs/worker.js';
import {
  dialectName,
  startTestApp,
  type Reply,
  type TestAccount,
  type TestApp,
  expectStatus,
} from './support/helpers.js';
import { toWindowStart } from './support/quota.js';
import { startSmtpSink, type SmtpSink } from './support/smtp.js';

interface TestForm {
  id: number;
  path: string;
  emailId: number;
  noteId: number;
}

async function makeForm(acc: TestAccount, extra: Record<string, unknown> = {}): Promise<TestForm> {
  const form = expectStatus(
    await acc.post('/forms', {
      name: 'Grant <application>',
      settings: { saveAndResume: true },
      fields: [
        { type: 'email', label: 'Email' },
        { type: 'textarea', label: 'Note' },
      ],
      ...extra,
    }),
    200,
    'form',
  );
  return { id: form.id, path: new URL(form.url).pathname, emailId: form.fields[0].id, noteId: form.fields[1].id };
}

async function save(
  app: TestApp,
  form: TestForm,
  body: { note?: string; resumeEmail?: unknown; _resume?: string },
): Promise<Reply> {
  return app.request('POST', `${form.path}/partial`, {
    body: {
      fields: [{ id: form.noteId, value: body.note ?? 'draft' }],
      website: '',
      ...(body._resume !== undefined && { _resume: body._resume }),
      ...(body.resumeEmail !== undefined && { resumeEmail: body.resumeEmail }),
    },
  });
}

const countRows = async (ctx: AppContext, table: 'jobs' | 'partial_submissions') =>
  Number(
    (
      await ctx.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

describe(`resume links by email (${dialectName})`, () => {
  let smtp: SmtpSink;
  let app: TestApp;
  let ctx: AppContext;
  let worker: Worker;
  let a: TestAccount;

  before(async () => {
    smtp = await startSmtpSink();
    app = await startTestApp({ SMTP_URL: smtp.url, MAIL_FROM: 'Forms Desk <desk@forms.test>' });
    ctx = app.server.ctx;
    worker = createWorker(ctx, { kinds: jobKinds });
    a = await app.account('A');
  });
  after(async () => {
    await app.close();
    await smtp.close();
  });

  it('emails the same resume link the page shows, through SMTP, and shows the address back nowhere', async () => {
    const form = await makeForm(a);
    const address = 'first.respondent@example.org';
    const res = await save(app, form, { note: 'my plans', resumeEmail: address });
    const saved = expectStatus(res, 200, 'save');
    assert.equal(saved.emailed, true);
    assert.match(saved.resumeUrl, /^\/f\/[^?]+\?resume=/);
    assert.ok(!res.text.includes(address), 'the answer does not repeat the address');

    // The job holds neither the address nor the link in the clear.
    const jobs = JSON.stringify(await ctx.db.selectFrom('jobs').selectAll().execute());
    assert.ok(jobs.includes('emails.resume_link'));
    assert.ok(!jobs.includes(address) && !jobs.includes(saved.resumeToken), jobs);

    const before = smtp.messages.length;
    await worker.runDue();
    const mails = smtp.messages.slice(before);
    assert.equal(mails.length, 1);
    const [mail] = mails;
    assert.deepEqual(mail!.to, [address]);
    assert.match(mail!.from, /desk@forms\.test/);
    const link = `http://forms.test${saved.resumeUrl}`;
    assert.ok(mail!.decoded.includes(link), mail!.decoded);
    assert.ok(mail!.decoded.includes('Grant &lt;application&gt;'), 'the form name is escaped in HTML');

    // The link opens the form with the saved values.
    const page = await app.request('GET', saved.resumeUrl);
    assert.equal(page.status, 200);
    assert.ok(page.text.includes('my plans'));

    // The owner's API never shows the address (the partial's values do not hold it here).
    const listed = await a.get(`/form/${form.id}/partialsubmission?data=true&expandData=true&prettyName=true`);
    expectStatus(listed, 200, 'list');
    assert.equal(listed.body.total, 1);
    const one = await a.get(`/partialsubmission/${listed.body.partialSubmissions[0].id}`);
    expectStatus(one, 200, 'get');
    for (const r of [listed, one]) assert.ok(!r.text.includes(address), r.text);
  });

  it('refuses a bad address with a 400 naming it, and writes nothing', async () => {
    const form = await makeForm(a);
    const [jobs, partials] = [await countRows(ctx, 'jobs'), await countRows(ctx, 'partial_submissions')];
    for (const bad of ['not an address', 'a@b', 42, `${'x'.repeat(250)}@example.com`]) {
      const res = await save(app, form, { resumeEmail: bad });
      expectStatus(res, 400, String(bad));
      assert.equal(res.body.code, 'validation_failed');
      assert.deepEqual(
        res.body.details.map((d: any) => d.property),
        ['body.resumeEmail'],
      );
    }
    assert.equal(await countRows(ctx, 'jobs'), jobs);
    assert.equal(await countRows(ctx, 'partial_submissions'), partials);
  });

  it('limits the emails per partial and per address; a refused request saves and sends nothing', async () => {
    // The limits count in windows of an hour and of a day on the clock (hosted/routes.ts): to the
    // start of a day, which starts an hour too, so that the saves below do not straddle two.
    toWindowStart(ctx.clock, 86_400_000);
    const form = await makeForm(a);
    const address = 'limited@example.net';
    const first = expectStatus(await save(app, form, { resumeEmail: address, note: 'v0' }), 200, 'first');
    // The first email made the partial; three more of the same partial are allowed in an hour.
    for (let i = 1; i <= 3; i++)
      expectStatus(
        await save(app, form, { resumeEmail: address, note: `v${i}`, _resume: first.resumeToken }),
        200,
        `again ${i}`,
      );
    const jobs = await countRows(ctx, 'jobs');
    const refused = await save(app, form, { resumeEmail: address, note: 'v4', _resume: first.resumeToken });
    expectStatus(refused, 429, 'over the partial limit');
    assert.equal(refused.body.code, 'rate_limited');
    assert.ok(Number(refused.headers.get('retry-after')) > 0, 'Retry-After');
    assert.equal(await countRows(ctx, 'jobs'), jobs, 'no email enqueued');
    const listed = await a.get(`/form/${form.id}/partialsubmission?data=true`);
    const note = Object.values(listed.body.partialSubmissions[0].data as Record<string, any>).find(
      (d) => d.field === form.noteId,
    );
    assert.equal(note.value, 'v3', 'the refused save changed nothing');
    // Saving without asking for an email still works.
    expectStatus(await save(app, form, { note: 'v5', _resume: first.resumeToken }), 200, 'plain save');

    // Per address, across partials: four sent above, one more today, then no more.
    const other = await makeForm(a);
    expectStatus(await save(app, other, { resumeEmail: 'LIMITED@example.net' }), 200, 'fifth to the address');
    expectStatus(await save(app, other, { resumeEmail: address }), 429, 'sixth to the address');
    expectStatus(await save(app, other, { resumeEmail: 'someone.else@example.net' }), 200, 'another address');

    const before = smtp.messages.length;
    await worker.runDue();
    const sent = smtp.messages.slice(before);
    assert.equal(sent.filter((m) => m.to[0]?.toLowerCase() === address).length, 5);
    // Each message carries the link to its own partial, the same token on every save of one partial.
    for (const m of sent.filter((x) => x.decoded.includes(encodeURIComponent(first.resumeToken))))
      assert.deepEqual(m.to, [address]);
  });

  it('sends nothing once the partial is gone before the job runs', async () => {
    const form = await makeForm(a);
    expectStatus(await save(app, form, { resumeEmail: 'gone@example.com' }), 200, 'save');
    const listed = await a.get(`/form/${form.id}/partialsubmission`);
    expectStatus(await a.delete(`/partialsubmission/${listed.body.partialSubmissions[0].id}`), 200, 'delete');
    const before = smtp.messages.length;
    await worker.runDue();
    assert.equal(smtp.messages.length, before);
  });
});

describe(`resume links by email into the mail log (${dialectName})`, () => {
  let app: TestApp;
  let worker: Worker;
  let a: TestAccount;
  let b: TestAccount;

  before(async () => {
    app = await startTestApp();
    worker = createWorker(app.server.ctx, { kinds: jobKinds });
    a = await app.account('A');
    b = await app.account('B');
  });
  after(() => app.close());

  it("keeps the message in the owner's mail log, without the link", async () => {
    const form = await makeForm(a);
    const saved = expectStatus(await save(app, form, { resumeEmail: 'logged@example.com' }), 200, 'save');
    await worker.runDue();
    const log = expectStatus(await a.get('/mail-log'), 200, 'mail log');
    const [message] = log.messages;
    assert.equal(message.kind, 'resume_link');
    assert.deepEqual(message.to, ['logged@example.com']);
    assert.equal(message.formId, form.id);
    assert.equal(message.emailId, null);
    assert.equal(message.submissionId, null);
    const partials = await a.get(`/form/${form.id}/partialsubmission`);
    assert.equal(message.partialSubmissionId, partials.body.partialSubmissions[0].id);
    assert.ok(!JSON.stringify(message).includes(saved.resumeToken), 'the link is withheld from the log');
    assert.match(message.text, /withheld/);
    assert.equal(expectStatus(await b.get('/mail-log'), 200, 'B').total, 0);
    expectStatus(await b.get(`/mail-log/${message.id}`), 404, "another account's");
  });
});
