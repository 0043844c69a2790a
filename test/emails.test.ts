import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { ConfigError, loadConfig } from '../src/config.js';
import { jobKinds } from '../src/job-kinds.js';
import { startWorker, type Worker } from '../src/jobs/worker.js';
import { pruneMailLogJob } from '../src/modules/emails/jobs.js';
import { safeSmtpError, sendSmtp, type OutgoingMail, type SmtpSettings } from '../src/modules/emails/transport.js';
import { dialectName, startTestApp, type TestAccount, type TestApp, expectStatus } from './support/helpers.js';
import { startSmtpSink, type ReceivedMail, type SmtpSink } from './support/smtp.js';

const KINDS = ['confirmation', 'notification'] as const;
/** The signal of a job that is never stopped. */
const never = () => new AbortController().signal;

/** SMTP settings as smtpOf makes them from the configuration. */
function smtpAt(url: string, connections = 1, timeoutMs = 30_000): SmtpSettings {
  return { url, connections, timeoutMs };
}
const PASSWORD = 'a sealed form password';

async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const until = Date.now() + 30_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A header as a person reads it: RFC 2047 encoded-words decoded. */
function decodeWords(value: string): string {
  return value
    .replace(/\?=\s+=\?/g, '?==?')
    .replace(/=\?utf-8\?([qb])\?([^?]*)\?=/gi, (_, encoding: string, text: string) =>
      encoding.toLowerCase() === 'b'
        ? Buffer.from(text, 'base64').toString('utf8')
        : Buffer.from(
            text
              .replace(/_/g, ' ')
              .replace(/=([0-9a-f]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))),
            'latin1',
          ).toString('utf8'),
    );
}

const FIELDS = [
  { type: 'name', label: 'Name' },
  { type: 'email', label: 'Email' },
  { type: 'textarea', label: 'Note' },
  {
    type: 'select',
    label: 'Topic',
    options: [
      { label: 'Sales', value: 'sales' },
      { label: 'Support', value: 'support' },
    ],
  },
  { type: 'file', label: 'Upload', attributes: { maxFiles: 3 } },
];

interface TestForm {
  id: number;
  ids: Record<string, number>;
}

async function makeForm(acc: TestAccount, extra: Record<string, unknown> = {}): Promise<TestForm> {
  const form = expectStatus(await acc.post('/forms', { name: 'Contact <us>', fields: FIELDS, ...extra }), 200, 'form');
  return { id: form.id, ids: Object.fromEntries(form.fields.map((f: any) => [f.label, f.id])) };
}

function submissionBody(form: TestForm, values: { note?: string; topic?: string; files?: string[] } = {}) {
  return {
    fields: [
      { id: form.ids.Name, value: { first: 'Ann', last: 'O"Neil' } },
      { id: form.ids.Email, value: 'ann@example.com' },
      { id: form.ids.Note, value: values.note ?? 'Hello' },
      { id: form.ids.Topic, value: values.topic ?? 'sales' },
      ...(values.files
        ? [{ id: form.ids.Upload, value: { subvalues: values.files.map((f) => ({ subvalue: f })) } }]
        : []),
    ],
  };
}

async function jobsOf(
  app: TestApp,
  state?: string,
): Promise<{ id: number; state: string; last_error: string | null }[]> {
  let q = app.server.ctx.db
    .selectFrom('jobs')
    .select(['id', 'state', 'last_error'])
    .where('kind', '=', 'emails.send')
    .orderBy('id');
  if (state) q = q.where('state', '=', state as 'done');
  return q.execute();
}

describe(`confirmation and notification records (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;
  let form: TestForm;
  before(async () => {
    app = await startTestApp();
    a = await app.account('A');
    b = await app.account('B');
    form = await makeForm(a);
  });
  after(() => app.close());

  const minimal = (kind: (typeof KINDS)[number]) =>
    kind === 'confirmation'
      ? { subject: 'Thanks', message: 'Got it', recipientField: form.ids.Email }
      : { subject: 'New', message: 'New one', recipients: ['team@example.com'] };

  for (const kind of KINDS) {
    const plural = `${kind}s`;

    it(`${kind}s: create 201 with defaults, read, list, update, delete`, async () => {
      const created = expectStatus(await a.post(`/forms/${form.id}/${plural}`, minimal(kind)), 201, 'create');
      assert.equal(created.formId, form.id);
      assert.equal(created.name, kind === 'confirmation' ? 'Confirmation' : 'Notification');
      assert.equal(created.format, 'html');
      assert.equal(created.senderName, '');
      assert.equal(created.replyTo, null);
      assert.equal(created.logic, null);
      assert.equal(created.attachFiles, false);
      if (kind === 'confirmation') assert.equal(created.recipientField, form.ids.Email);
      else assert.deepEqual([created.recipients, created.replyToField], [['team@example.com'], null]);

      assert.deepEqual(expectStatus(await a.get(`/${plural}/${created.id}`), 200, 'read'), created);
      const list = expectStatus(await a.get(`/forms/${form.id}/${plural}`), 200, 'list');
      assert.deepEqual(list[plural], [created]);
      assert.deepEqual([list.total, list.pages, list.pageNumber, list.pageSize], [1, 1, 1, 20]);

      const logic = {
        action: 'show',
        conditional: 'all',
        checks: [{ field: form.ids.Topic, condition: 'equals', option: 'sales' }],
      };
      const updated = expectStatus(
        await a.put(`/${plural}/${created.id}`, { name: 'Renamed', format: 'text', logic, attachFiles: true }),
        200,
        'update',
      );
      assert.deepEqual(
        [updated.name, updated.format, updated.logic, updated.attachFiles, updated.subject],
        ['Renamed', 'text', logic, true, created.subject],
      );

      // The two kinds are two resources: neither answers for the other's ids.
      const other = kind === 'confirmation' ? 'notifications' : 'confirmations';
      expectStatus(await a.get(`/${other}/${created.id}`), 404, 'other kind');
      // Another account sees nothing of it.
      expectStatus(await b.get(`/${plural}/${created.id}`), 404, "B reads A's", `${kind}_not_found`);
      expectStatus(await b.get(`/forms/${form.id}/${plural}`), 404, "B lists A's", 'form_not_found');

      const preview = expectStatus(await a.delete(`/${plural}/${created.id}`), 200, 'delete');
      assert.deepEqual(preview, { id: created.id, formId: form.id, name: 'Renamed' });
      expectStatus(await a.get(`/${plural}/${created.id}`), 404, 'read deleted', `${kind}_not_found`);
      expectStatus(await a.put(`/${plural}/${created.id}`, { name: 'x' }), 404, 'update deleted', `${kind}_not_found`);
      expectStatus(await a.delete(`/${plural}/${created.id}`), 404, 'delete again', `${kind}_not_found`);
    });

    it(`${kind}s: refuses bad input with 400 and unknown references with 404`, async () => {
      const base = minimal(kind);
      const post = (body: unknown) => a.post(`/forms/${form.id}/${plural}`, body);
      for (const [subject, message] of [
        ['{{ oops', 'fine'],
        ['fine', '{% if %}'],
        ['fine', "{% include 'secrets' %}"],
        ['fine', '{{ field_1 | no_such_filter }}'],
        ['fine', '{% for x in list %}no end'],
      ]) {
        const res = expectStatus(
          await post({ ...base, subject, message }),
          400,
          `template ${subject} ${message}`,
          'invalid_template',
        );
        assert.equal(res.details[0].property, subject === 'fine' ? 'body.message' : 'body.subject');
      }
      expectStatus(await post({ ...base, subject: '' }), 400, 'empty subject', 'validation_failed');
      expectStatus(await post({ ...base, format: 'pdf' }), 400, 'format', 'validation_failed');
      expectStatus(await post({ ...base, id: 5 }), 400, 'read-only id', 'validation_failed');
      expectStatus(await post({ ...base, replyTo: 'not an address' }), 400, 'replyTo', 'validation_failed');
      for (const senderName of ['Evil\r\nBcc: v@example.com', 'Tab\there', 'Next\u0085line', 'Line\u2028sep']) {
        const refused = expectStatus(await post({ ...base, senderName }), 400, 'senderName', 'validation_failed');
        assert.equal(refused.details[0].property, 'body.senderName');
      }
      const { subject: _s, ...noSubject } = base;
      expectStatus(await post(noSubject), 400, 'no subject', 'validation_failed');
      const badLogic = { action: 'show', conditional: 'any', checks: [{ field: 999_999, condition: 'empty' }] };
      const logicRes = expectStatus(await post({ ...base, logic: badLogic }), 400, 'logic', 'invalid_email');
      assert.equal(logicRes.details[0].property, 'body.logic.checks[0].field');

      if (kind === 'confirmation') {
        const wrongType = expectStatus(
          await post({ ...base, recipientField: form.ids.Note }),
          400,
          'not email',
          'invalid_email',
        );
        assert.equal(wrongType.details[0].property, 'body.recipientField');
        expectStatus(await post({ ...base, recipientField: 999_999 }), 404, 'no such field', 'field_not_found');
        const { recipientField: _r, ...noRecipient } = base as { recipientField: number };
        expectStatus(await post(noRecipient), 400, 'no recipient field', 'validation_failed');
      } else {
        expectStatus(await post({ ...base, recipients: [] }), 400, 'no recipients', 'validation_failed');
        expectStatus(await post({ ...base, recipients: ['nope'] }), 400, 'bad recipient', 'validation_failed');
        expectStatus(await post({ ...base, replyToField: form.ids.Name }), 400, 'replyToField', 'invalid_email');
        expectStatus(await post({ ...base, replyToField: 999_999 }), 404, 'no such field', 'field_not_found');
      }
      expectStatus(await a.post(`/forms/999999/${plural}`, base), 404, 'no such form', 'form_not_found');
      expectStatus(await b.post(`/forms/${form.id}/${plural}`, base), 404, "B on A's form", 'form_not_found');

      const created = expectStatus(await post(base), 201, 'create');
      expectStatus(await a.put(`/${plural}/${created.id}`, {}), 400, 'empty update', 'validation_failed');
      expectStatus(await a.put(`/${plural}/${created.id}`, { message: '{{' }), 400, 'bad update', 'invalid_template');
      expectStatus(await a.get(`/${plural}/abc`), 400, 'id not a number', 'validation_failed');
      // A refused update changed nothing.
      assert.equal(expectStatus(await a.get(`/${plural}/${created.id}`), 200, 'read').message, base.message);
    });

    it(`${kind}s: a form holds at most 20 of each kind`, async () => {
      const own = await makeForm(a);
      const base = kind === 'confirmation' ? { ...minimal(kind), recipientField: own.ids.Email } : minimal(kind);
      for (let i = 0; i < 20; i++) expectStatus(await a.post(`/forms/${own.id}/${plural}`, base), 201, `create ${i}`);
      expectStatus(await a.post(`/forms/${own.id}/${plural}`, base), 400, 'the 21st', 'too_many_emails');
      const list = expectStatus(await a.get(`/forms/${own.id}/${plural}`), 200, 'list');
      assert.equal(list.total, 20);
    });
  }

  it('keeps a recipient written twice, in any case, once', async () => {
    const created = expectStatus(
      await a.post(`/forms/${form.id}/notifications`, {
        subject: 'New',
        message: 'New one',
        recipients: ['team@example.com', 'boss@example.com', 'Team@Example.com', 'boss@example.com'],
      }),
      201,
      'create',
    );
    assert.deepEqual(created.recipients, ['team@example.com', 'boss@example.com']);
    const updated = expectStatus(
      await a.put(`/notifications/${created.id}`, { recipients: ['BOSS@example.com', 'boss@example.com'] }),
      200,
      'update',
    );
    assert.deepEqual(updated.recipients, ['BOSS@example.com']);
    expectStatus(await a.delete(`/notifications/${created.id}`), 200, 'delete');
  });

  it("copies a form's emails with the form when asked (includeEmails), pointing them at the copied fields", async () => {
    const from = await makeForm(a);
    const logic = { action: 'hide', conditional: 'any', checks: [{ field: from.ids.Topic, condition: 'empty' }] };
    expectStatus(
      await a.post(`/forms/${from.id}/confirmations`, {
        ...minimal('confirmation'),
        recipientField: from.ids.Email,
        logic,
      }),
      201,
      'confirmation',
    );
    expectStatus(
      await a.post(`/forms/${from.id}/notifications`, {
        ...minimal('notification'),
        subject: `New from {{ field_${from.ids.Email} }}`,
        message: `field_${from.ids.Email} is {{ fields["${from.ids.Email}"] }}, {{ fields['Email'] }}`,
        replyToField: from.ids.Email,
      }),
      201,
      'notification',
    );
    const plain = expectStatus(await a.post(`/forms/${from.id}/copy`), 200, 'copy without');
    assert.equal(expectStatus(await a.get(`/forms/${plain.id}/confirmations`), 200, 'list').total, 0);

    const copy = expectStatus(await a.post(`/forms/${from.id}/copy?includeEmails=true`), 200, 'copy with');
    const to = Object.fromEntries(copy.fields.map((f: any) => [f.label, f.id])) as Record<string, number>;
    assert.notEqual(to.Email, from.ids.Email);
    const [confirmation, more] = expectStatus(
      await a.get(`/forms/${copy.id}/confirmations`),
      200,
      'list',
    ).confirmations;
    assert.equal(more, undefined);
    assert.equal(confirmation.formId, copy.id);
    assert.equal(confirmation.recipientField, to.Email);
    assert.deepEqual(confirmation.logic.checks, [{ field: to.Topic, condition: 'empty' }]);
    const [notification] = expectStatus(await a.get(`/forms/${copy.id}/notifications`), 200, 'list').notifications;
    assert.equal(notification.replyToField, to.Email);
    // Merge tags by id name the copied fields; text outside a tag and tags by label stay as written.
    assert.equal(notification.subject, `New from {{ field_${to.Email} }}`);
    assert.equal(notification.message, `field_${from.ids.Email} is {{ fields["${to.Email}"] }}, {{ fields['Email'] }}`);
    assert.deepEqual(notification.recipients, ['team@example.com']);
    // The original's emails are untouched.
    const [original] = expectStatus(await a.get(`/forms/${from.id}/confirmations`), 200, 'list').confirmations;
    assert.equal(original.recipientField, from.ids.Email);
  });

  it('hides the emails of a deleted form with it', async () => {
    const own = await makeForm(a);
    const created = expectStatus(
      await a.post(`/forms/${own.id}/notifications`, minimal('notification')),
      201,
      'create',
    );
    expectStatus(await a.delete(`/forms/${own.id}`), 200, 'delete form');
    expectStatus(await a.get(`/notifications/${created.id}`), 404, 'read', 'notification_not_found');
    expectStatus(await a.get(`/forms/${own.id}/notifications`), 404, 'list', 'form_not_found');
  });
});

/** A one-line text message from the service's address, for sendSmtp itself. */
function plainMail(to: string, messageId: string): OutgoingMail {
  return {
    from: { name: 'x', address: 'desk@forms.test' },
    to: [to],
    replyTo: undefined,
    subject: 's',
    text: 't',
    html: undefined,
    attachments: [],
    messageId,
  };
}

/** An SMTP server on loopback without login or STARTTLS, quiet, quick to close. */
const PLAIN_SERVER: SMTPServerOptions = {
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  logger: false,
  closeTimeout: 200,
};

/** loadConfig refuses each of these values of one setting, naming it. */
function refusesEach(setting: string, values: string[]): void {
  for (const value of values)
    assert.throws(
      () => loadConfig({ [setting]: value }),
      (e: unknown) => e instanceof ConfigError && e.setting === setting,
      value,
    );
}

/**
 * A real SMTP server that never answers the first message it is sent (a relay that stalls),
 * and delivers the ones after it. With `pause`, it stops reading the first message after its
 * first bytes until resumeFirst(), as a server too busy to read.
 */
async function startStallingServer(options: { pause?: boolean } = {}) {
  let resumeFirst = () => undefined as unknown;
  const state = {
    connections: 0,
    closed: 0,
    /** Messages begun. */
    taken: 0,
    /** The bytes of the first message read, and whether its end was. */
    firstBytes: 0,
    firstEnded: false,
    delivered: [] as string[],
    resumeFirst: () => resumeFirst(),
  };
  const server = new SMTPServer({
    ...PLAIN_SERVER,
    onConnect(_session, callback) {
      state.connections++;
      callback();
    },
    onClose() {
      state.closed++;
    },
    onData(stream, session, callback) {
      const first = ++state.taken === 1;
      if (first) {
        let paused = false;
        stream.on('data', (chunk: Buffer) => {
          state.firstBytes += chunk.length;
          if (options.pause && !paused) {
            paused = true;
            stream.pause();
          }
        });
        resumeFirst = () => stream.resume();
      } else {
        stream.resume();
      }
      stream.on('end', () => {
        if (first) {
          state.firstEnded = true;
          return;
        }
        state.delivered.push(session.envelope.rcptTo[0]!.address);
        callback();
      });
    },
  });
  // A connection cut by the client is reported here: what the tests make happen.
  server.on('error', () => undefined);
  server.listen(0, '127.0.0.1');
  await once(server.server, 'listening');
  const { port } = server.server.address() as AddressInfo;
  return Object.assign(state, {
    url: `smtp://127.0.0.1:${port}`,
    close: () => new Promise((r) => server.close(() => r(undefined))),
  });
}

describe(`sending through SMTP (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let smtp: SmtpSink;
  let worker: Worker;
  before(async () => {
    smtp = await startSmtpSink();
    app = await startTestApp({ SMTP_URL: smtp.url, MAIL_FROM: 'Forms Desk <desk@forms.test>' });
    a = await app.account('A');
    worker = startWorker(app.server.ctx, { kinds: jobKinds, pollMs: 50 });
  });
  after(async () => {
    await worker.stop();
    await app.close();
    await smtp.close();
  });

  const received = (count: number) =>
    waitFor(`${count} messages`, () => (smtp.messages.length >= count ? smtp.messages : undefined));
  const header = (mail: ReceivedMail, name: string) =>
    decodeWords(
      new RegExp(`^${name}:\\s*(.*(?:\\r?\\n[ \\t].*)*)`, 'im').exec(mail.raw)?.[1]?.replace(/\r?\n[ \t]/g, ' ') ?? '',
    );

  it('sends a confirmation (HTML with a text part, values escaped) and a notification (text, files attached)', async () => {
    const form = await makeForm(a);
    expectStatus(
      await a.post(`/forms/${form.id}/confirmations`, {
        senderName: 'Contact team',
        replyTo: 'help@forms.test',
        subject: 'Thanks {{ fields["Name"] }} for #{{ submission_id }}',
        message:
          '<h1>{{ form_name }}</h1><p>You wrote: {{ field_' +
          form.ids.Note +
          ' }}</p>{{ all_fields }}<p>At {{ submission_time }}</p>',
        recipientField: form.ids.Email,
      }),
      201,
      'confirmation',
    );
    expectStatus(
      await a.post(`/forms/${form.id}/notifications`, {
        subject: 'New on {{ form_name }}: {{ field_' + form.ids.Note + ' }}',
        message: 'Note: {{ fields["Note"] }}\n{{ all_fields }}',
        format: 'text',
        recipients: ['team@example.com', 'boss@example.com'],
        replyToField: form.ids.Email,
        attachFiles: true,
      }),
      201,
      'notification',
    );
    const hostile = '<script>alert("x")</script> & <b>bold</b>';
    const file = `report.txt;${Buffer.from('the attached bytes').toString('base64')}`;
    const submission = expectStatus(
      await a.post(`/forms/${form.id}/submissions`, submissionBody(form, { note: hostile, files: [file] })),
      200,
      'submit',
    );

    const [first, second] = await received(2);
    const confirmation = [first!, second!].find((m) => m.to.includes('ann@example.com'))!;
    const notification = [first!, second!].find((m) => m.to.includes('team@example.com'))!;
    assert.ok(confirmation && notification, 'one message of each');

    // The confirmation: to the respondent, from MAIL_FROM's address under the sender name.
    assert.deepEqual(confirmation.to, ['ann@example.com']);
    assert.equal(confirmation.from, 'desk@forms.test');
    assert.match(header(confirmation, 'From')!, /Contact team.*<desk@forms\.test>/);
    assert.equal(header(confirmation, 'Reply-To'), 'help@forms.test');
    assert.equal(header(confirmation, 'Subject'), `Thanks Ann O"Neil for #${submission.id}`);
    assert.match(header(confirmation, 'Message-ID')!, /^<formwork-email-\d+@forms\.test>$/);
    assert.match(confirmation.raw, /multipart\/alternative/i, 'an HTML email has a text part');
    const html = confirmation.decoded.slice(confirmation.decoded.search(/content-type:\s*text\/html/i));
    const text = confirmation.decoded.slice(
      confirmation.decoded.search(/content-type:\s*text\/plain/i),
      confirmation.decoded.search(/content-type:\s*text\/html/i),
    );
    // In HTML the value arrives inert: escaped, never as markup.
    assert.ok(!html.includes('<script>'), html);
    assert.ok(!html.includes('<b>bold'), html);
    assert.ok(html.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;'), html);
    assert.ok(html.includes('<h1>Contact &lt;us&gt;</h1>'), 'the form name is escaped too');
    assert.ok(html.includes('<table'), 'all_fields is a table');
    assert.ok(html.includes(`At ${submission.timestamp}`), html);
    // The text part says the same as plain text.
    assert.ok(text.includes(`You wrote: ${hostile}`), text);
    assert.match(text, /Name: Ann O"Neil/);
    assert.match(text, /Contact <us>/);

    // The notification: text only, to every recipient, replying to the respondent, file attached.
    assert.deepEqual(notification.to.sort(), ['boss@example.com', 'team@example.com']);
    assert.equal(header(notification, 'Reply-To'), 'ann@example.com');
    assert.match(header(notification, 'From')!, /Forms Desk.*<desk@forms\.test>/);
    assert.ok(!/text\/html/i.test(notification.raw), 'a text email has no HTML part');
    assert.ok(notification.decoded.includes(`Note: ${hostile}`), notification.decoded);
    assert.match(notification.decoded, /Topic: Sales/);
    assert.match(notification.raw, /filename="?report\.txt/);
    assert.ok(notification.decoded.includes('the attached bytes'), 'the file is attached');

    const jobs = await jobsOf(app);
    assert.equal(jobs.length, 2);
    await waitFor('jobs done', async () => ((await jobsOf(app, 'done')).length === 2 ? true : undefined));
  });

  it('sends on creation only, and only when the conditions hold', async () => {
    const form = await makeForm(a);
    const logic = {
      action: 'show',
      conditional: 'all',
      checks: [{ field: form.ids.Topic, condition: 'equals', option: 'support' }],
    };
    expectStatus(
      await a.post(`/forms/${form.id}/notifications`, {
        subject: 'Support: {{ submission_id }}',
        message: 'x',
        recipients: ['support@example.com'],
        logic,
      }),
      201,
      'shown on support',
    );
    expectStatus(
      await a.post(`/forms/${form.id}/notifications`, {
        subject: 'Not support: {{ submission_id }}',
        message: 'x',
        recipients: ['other@example.com'],
        logic: { ...logic, action: 'hide' },
      }),
      201,
      'hidden on support',
    );
    const before = (await jobsOf(app)).length;
    const sales = expectStatus(
      await a.post(`/forms/${form.id}/submissions`, submissionBody(form, { topic: 'sales' })),
      200,
      'sales',
    );
    const support = expectStatus(
      await a.post(`/forms/${form.id}/submissions`, submissionBody(form, { topic: 'support' })),
      200,
      'support',
    );
    // Edits and deletes send nothing.
    expectStatus(
      await a.put(`/submissions/${sales.id}`, { fields: [{ id: form.ids.Topic, value: 'support' }] }),
      200,
      'edit',
    );
    expectStatus(await a.delete(`/submissions/${support.id}`), 200, 'delete');
    assert.equal((await jobsOf(app)).length, before + 2, 'one job per submission: the email whose logic holds');

    const subjects = await waitFor('both', () => {
      const s = smtp.messages.map((m) => header(m, 'Subject'));
      return s.includes(`Support: ${support.id}`) && s.includes(`Not support: ${sales.id}`) ? s : undefined;
    });
    assert.ok(!subjects.includes(`Support: ${sales.id}`));
    assert.ok(!subjects.includes(`Not support: ${support.id}`));
  });

  it('sends nothing for a confirmation without an address, or an email deleted before its job ran', async () => {
    const form = await makeForm(a);
    const confirmation = expectStatus(
      await a.post(`/forms/${form.id}/confirmations`, {
        subject: 'c',
        message: 'c',
        recipientField: form.ids.Email,
      }),
      201,
      'confirmation',
    );
    const before = (await jobsOf(app)).length;
    const body = submissionBody(form);
    body.fields = body.fields.filter((f) => f.id !== form.ids.Email);
    expectStatus(await a.post(`/forms/${form.id}/submissions`, body), 200, 'no email given');
    assert.equal((await jobsOf(app)).length, before, 'no job without an address');

    await worker.stop();
    const sent = smtp.messages.length;
    expectStatus(await a.post(`/forms/${form.id}/submissions`, submissionBody(form)), 200, 'with email');
    expectStatus(await a.delete(`/confirmations/${confirmation.id}`), 200, 'delete');
    worker = startWorker(app.server.ctx, { kinds: jobKinds, pollMs: 50 });
    await waitFor('job done', async () => ((await jobsOf(app, 'queued')).length === 0 ? true : undefined));
    await waitFor('job done', async () => ((await jobsOf(app, 'running')).length === 0 ? true : undefined));
    assert.equal(smtp.messages.length, sent);
  });

  it("sends an encrypted form's emails without values", async () => {
    const form = await makeForm(a, { isEncrypted: true, encryptionPassword: PASSWORD });
    expectStatus(
      await a.post(`/forms/${form.id}/notifications`, {
        subject: 'Sealed {{ submission_id }} {{ field_' + form.ids.Note + ' }}',
        message: '<p>{{ fields["Note"] }}</p>{{ all_fields }}',
        recipients: ['sealed@example.com'],
        attachFiles: true,
      }),
      201,
      'notification',
    );
    expectStatus(
      await a.post(`/forms/${form.id}/confirmations`, { subject: 'c', message: 'c', recipientField: form.ids.Email }),
      201,
      'confirmation',
    );
    const before = (await jobsOf(app)).length;
    const secret = 'sealed-value-do-not-mail';
    const submission = expectStatus(
      await a.post(`/forms/${form.id}/submissions`, submissionBody(form, { note: secret })),
      200,
      'submit',
    );
    // The confirmation's address is a sealed value: only the notification goes.
    assert.equal((await jobsOf(app)).length, before + 1);
    const mail = await waitFor('sealed mail', () => smtp.messages.find((m) => m.to.includes('sealed@example.com')));
    assert.equal(header(mail, 'Subject'), `Sealed ${submission.id}`);
    assert.ok(!mail.raw.includes(secret) && !mail.decoded.includes(secret), 'no value in the email');
    assert.match(mail.decoded, /encrypted/);
    const rows = await app.server.ctx.db
      .selectFrom('jobs')
      .select('payload')
      .where('kind', '=', 'emails.send')
      .execute();
    assert.ok(
      rows.every((r) => !r.payload.includes(secret)),
      'no value in the job either',
    );
  });

  it('never shows the SMTP credentials in an error', async () => {
    const wrong = smtp.url.replace(smtp.password, 'Wr0ng-password-here');
    const mail = plainMail('x@example.com', '<t@forms.test>');
    await assert.rejects(sendSmtp(smtpAt(wrong), mail, never()), (error: Error) => {
      assert.match(error.message, /^SMTP: /);
      assert.ok(!error.message.includes('Wr0ng-password-here'), error.message);
      return true;
    });
    const redacted = safeSmtpError(new Error(`login as mailer with Wr0ng-password-here failed`), wrong);
    assert.equal(redacted.message, 'SMTP: login as [redacted] with [redacted] failed');
  });

  it('sends over implicit TLS (smtps) on the connection it opens itself, and says when none opens', async () => {
    // The pool's connections are opened by transport.ts (with Nagle's algorithm off), and
    // nodemailer is handed them: it must still upgrade them to TLS. smtp-server's own
    // self-signed certificate, so the URL waives its check (nodemailer reads tls.* there).
    const received: string[] = [];
    const server = new SMTPServer({
      secure: true,
      authOptional: true,
      logger: false,
      closeTimeout: 200,
      onData(stream, session, callback) {
        stream.resume();
        stream.on('end', () => {
          received.push(`${session.secure ? 'tls' : 'plain'} ${session.envelope.rcptTo[0]!.address}`);
          callback();
        });
      },
    });
    // The client that refuses the certificate closes mid-handshake, which the server reports.
    server.on('error', () => undefined);
    server.listen(0, '127.0.0.1');
    await once(server.server, 'listening');
    const { port } = server.server.address() as AddressInfo;
    const mail = plainMail('tls@example.com', '<tls@forms.test>');
    try {
      await sendSmtp(smtpAt(`smtps://127.0.0.1:${port}/?tls.rejectUnauthorized=false`), mail, never());
      assert.deepEqual(received, ['tls tls@example.com']);
      // Checked as any TLS connection is: the sink's certificate is its own.
      await assert.rejects(sendSmtp(smtpAt(`smtps://127.0.0.1:${port}`), mail, never()), /^Error: SMTP: .*certificate/);
    } finally {
      await new Promise((r) => server.close(() => r(undefined)));
    }
    // Nothing listens on the port any more: the attempt fails at once, with the reason.
    await assert.rejects(sendSmtp(smtpAt(`smtp://127.0.0.1:${port}`), mail, never()), /^Error: SMTP: .*ECONNREFUSED/);
  });

  it('opens as many connections at once as SMTP_CONNECTIONS says, and no more', async () => {
    for (const connections of [2, 8]) {
      // A sink of its own (the pool of the round before keeps its connections open) that holds
      // each message a while: messages sent together wait for a free connection, or open
      // another while the pool has room.
      let open = 0;
      let peak = 0;
      let received = 0;
      const server = new SMTPServer({
        ...PLAIN_SERVER,
        onConnect(_session, callback) {
          peak = Math.max(peak, ++open);
          callback();
        },
        onClose() {
          open--;
        },
        onData(stream, _session, callback) {
          stream.resume();
          stream.on('end', () => {
            received++;
            setTimeout(callback, 50);
          });
        },
      });
      server.listen(0, '127.0.0.1');
      await once(server.server, 'listening');
      const { port } = server.server.address() as AddressInfo;
      try {
        await Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            sendSmtp(
              smtpAt(`smtp://127.0.0.1:${port}`, connections),
              plainMail(`to${i}@example.com`, `<c${i}@forms.test>`),
              never(),
            ),
          ),
        );
        assert.equal(received, 16);
        assert.equal(peak, connections, `connections open at once with SMTP_CONNECTIONS=${connections}`);
      } finally {
        await new Promise((r) => server.close(() => r(undefined)));
      }
    }
  });

  it('cuts a message with no answer within SMTP_TIMEOUT_MS, and the message behind it, and sends the next anew', async () => {
    const stalled = await startStallingServer();
    try {
      // nodemailer's own idle timeout (60 s) is longer than waitFor's 30 s: a close seen below is the cut.
      const at = smtpAt(stalled.url, 1, 1000);
      // One connection: the second message waits in the pool behind the first.
      const [first, second] = await Promise.allSettled([
        sendSmtp(at, plainMail('stalled@example.com', '<s1@forms.test>'), never()),
        sendSmtp(at, plainMail('behind@example.com', '<s2@forms.test>'), never()),
      ]);
      assert.equal(first.status, 'rejected');
      assert.match(String(first.reason), /^Error: SMTP: no answer within 1000 ms \(SMTP_TIMEOUT_MS\)$/);
      assert.equal(second.status, 'rejected', 'the message queued behind it fails with its pool');
      assert.match(String(second.reason), /^Error: SMTP: /);
      // The stalled connection is closed from this side: nothing more of it reaches the server.
      await waitFor('the stalled connection closed', () => (stalled.closed >= 1 ? true : undefined));
      assert.equal(stalled.connections, 1);
      await sendSmtp(at, plainMail('next@example.com', '<s3@forms.test>'), never());
      assert.equal(stalled.connections, 2, 'the next message opens a new connection');
      assert.deepEqual(stalled.delivered, ['next@example.com']);
    } finally {
      await stalled.close();
    }
  });

  it('cuts a message at once when its job is stopped, mid-message, and sends nothing for a job already stopped', async () => {
    const stalled = await startStallingServer({ pause: true });
    try {
      // nodemailer's own idle timeout (60 s) is longer than waitFor's 30 s: a close seen here is the cut.
      const at = smtpAt(stalled.url, 1, 600_000);
      const stopped = new AbortController();
      stopped.abort(new Error('stopped'));
      await assert.rejects(sendSmtp(at, plainMail('never@example.com', '<a0@forms.test>'), stopped.signal));
      assert.equal(stalled.connections, 0, 'no connection for a job already stopped');
      // More than the sockets' buffers hold: the client is still writing it when the job stops.
      const mail = {
        ...plainMail('stalled@example.com', '<a1@forms.test>'),
        attachments: [{ filename: 'big.bin', content: randomBytes(16 << 20), contentType: 'application/octet-stream' }],
      };
      const job = new AbortController();
      const sending = sendSmtp(at, mail, job.signal);
      await waitFor('the message begun', () => (stalled.firstBytes > 0 ? true : undefined));
      job.abort(new Error('the lease ran out'));
      await assert.rejects(sending, /^Error: SMTP: the send was stopped with its job$/);
      // The server reads what had reached it before the cut, then sees the connection closed;
      // the rest of the message never comes.
      stalled.resumeFirst();
      await waitFor('the connection closed', () => (stalled.closed >= 1 ? true : undefined));
      assert.ok(stalled.firstBytes < 16 << 20, `${stalled.firstBytes} bytes of a message of more than 16 MiB`);
      assert.equal(stalled.firstEnded, false, 'the message never ended');
    } finally {
      await stalled.close();
    }
  });

  it('takes SMTP_TIMEOUT_MS from 1 s to 10 min, 2 min unless set, and shorter than the job lease when SMTP_URL is set', () => {
    assert.equal(loadConfig({}).smtpTimeoutMs, 120_000);
    assert.equal(loadConfig({ SMTP_TIMEOUT_MS: '1000' }).smtpTimeoutMs, 1000);
    refusesEach('SMTP_TIMEOUT_MS', ['999', '600001', 'long']);
    const url = 'smtp://127.0.0.1:2525';
    for (const env of [
      { SMTP_URL: url, JOB_LEASE_SECONDS: '120' },
      { SMTP_URL: url, JOB_LEASE_SECONDS: '60', SMTP_TIMEOUT_MS: '60000' },
    ])
      assert.throws(
        () => loadConfig(env),
        (e: unknown) =>
          e instanceof ConfigError && e.setting === 'JOB_LEASE_SECONDS' && /SMTP_TIMEOUT_MS \(\d+ ms\)/.test(e.message),
        JSON.stringify(env),
      );
    assert.equal(loadConfig({ SMTP_URL: url, JOB_LEASE_SECONDS: '60', SMTP_TIMEOUT_MS: '59000' }).jobLeaseSeconds, 60);
    // Without SMTP_URL a message is a row of the mail log: no send to outlast the lease.
    assert.equal(loadConfig({ JOB_LEASE_SECONDS: '60' }).jobLeaseSeconds, 60);
  });

  it('takes SMTP_CONNECTIONS from 1 to 10, 5 unless set', () => {
    assert.equal(loadConfig({}).smtpConnections, 5);
    assert.equal(loadConfig({ SMTP_CONNECTIONS: '10' }).smtpConnections, 10);
    refusesEach('SMTP_CONNECTIONS', ['0', '11', 'many']);
  });
});

describe(`the mail log, without SMTP (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;
  let worker: Worker;
  before(async () => {
    app = await startTestApp({ MAIL_ATTACHMENT_MAX_BYTES: '20' });
    a = await app.account('A');
    b = await app.account('B');
    worker = startWorker(app.server.ctx, { kinds: jobKinds, pollMs: 50 });
  });
  after(async () => {
    await worker.stop();
    await app.close();
  });

  it('keeps every email, for the owner and admins to list and read', async () => {
    const form = await makeForm(a);
    const notification = expectStatus(
      await a.post(`/forms/${form.id}/notifications`, {
        subject: 'New: {{ field_' + form.ids.Note + ' }}',
        message: '<p>{{ field_' + form.ids.Note + ' }}</p>',
        recipients: ['team@example.com'],
        attachFiles: true,
      }),
      201,
      'notification',
    );
    const small = `small.txt;${Buffer.from('tiny').toString('base64')}`;
    const big = `big.txt;${Buffer.from('x'.repeat(100)).toString('base64')}`;
    const submission = expectStatus(
      await a.post(
        `/forms/${form.id}/submissions`,
        submissionBody(form, { note: '<script>x</script>', files: [small, big] }),
      ),
      200,
      'submit',
    );
    const list = await waitFor('the mail log', async () => {
      const res = expectStatus(await a.get('/mail-log'), 200, 'list');
      return res.total > 0 ? res : undefined;
    });
    assert.deepEqual([list.total, list.pages, list.pageNumber, list.pageSize], [1, 1, 1, 25]);
    const [message] = list.messages;
    assert.equal(message.emailId, notification.id);
    assert.equal(message.submissionId, submission.id);
    assert.equal(message.kind, 'notification');
    assert.deepEqual(message.to, ['team@example.com']);
    assert.equal(message.subject, 'New: <script>x</script>');
    assert.ok(message.html.startsWith('<p>&lt;script&gt;x&lt;/script&gt;</p>'), message.html);
    assert.ok(message.text.startsWith('<script>x</script>'), message.text);
    // Within the 20-byte cap: the small file is attached, the big one named instead.
    assert.deepEqual(message.attachments, [{ name: 'small.txt', size: 4, contentType: 'text/plain' }]);
    assert.match(message.text, /Files not attached.*big\.txt/);
    assert.deepEqual(expectStatus(await a.get(`/mail-log/${message.id}`), 200, 'read'), message);

    // Another account: nothing listed, 404 for the message.
    assert.equal(expectStatus(await b.get('/mail-log'), 200, 'B lists').total, 0);
    expectStatus(await b.get(`/mail-log/${message.id}`), 404, 'B reads', 'mail_not_found');
    expectStatus(await a.get('/mail-log/999999'), 404, 'no such message', 'mail_not_found');
    expectStatus(await a.get('/mail-log?pageSize=1000'), 400, 'page size', 'validation_failed');

    // A member, even with the edit level on the form, may not read it.
    const member = expectStatus(
      await a.post('/users', { email: 'member-mail@example.com', name: 'M', role: 'member' }),
      200,
      'member',
    );
    expectStatus(await a.put(`/users/${member.id}/permissions/${form.id}`, { level: 'full' }), 200, 'level');
    const token = expectStatus(await a.post(`/users/${member.id}/tokens`, { name: 't' }), 200, 'token').token;
    const res = await app.request('GET', '/api/v2025/mail-log', { token });
    expectStatus(res, 403, 'member', 'admin_required');
  });

  it('keeps one message per job, however often the job runs', async () => {
    const form = await makeForm(a);
    expectStatus(
      await a.post(`/forms/${form.id}/notifications`, { subject: 'once', message: 'x', recipients: ['t@example.com'] }),
      201,
      'notification',
    );
    await worker.stop();
    expectStatus(await a.post(`/forms/${form.id}/submissions`, submissionBody(form)), 200, 'submit');
    const [job] = await app.server.ctx.db
      .selectFrom('jobs')
      .select(['id', 'payload'])
      .where('kind', '=', 'emails.send')
      .where('state', '=', 'queued')
      .execute();
    const { sendSubmissionEmail } = await import('../src/modules/emails/send.js');
    const payload = JSON.parse(job!.payload);
    // The tools of a run whose end writes nothing (the payload holds no value to drop).
    const tools = { signal: never(), atEnd: () => undefined, replacePayload: async () => undefined };
    await sendSubmissionEmail(app.server.ctx, job!.id, payload, tools);
    await sendSubmissionEmail(app.server.ctx, job!.id, payload, tools);
    worker = startWorker(app.server.ctx, { kinds: jobKinds, pollMs: 50 });
    await waitFor('job done', async () => ((await jobsOf(app, 'queued')).length === 0 ? true : undefined));
    await waitFor('job done', async () => ((await jobsOf(app, 'running')).length === 0 ? true : undefined));
    const rows = await app.server.ctx.db.selectFrom('mail_log').select('id').where('job_id', '=', job!.id).execute();
    assert.equal(rows.length, 1);
  });

  // Last in this block: it moves the clock on by weeks.
  it('deletes messages older than JOB_RETENTION_DAYS in its daily prune, and keeps the newer', async () => {
    const DAY = 24 * 3_600_000;
    const form = await makeForm(a);
    expectStatus(
      await a.post(`/forms/${form.id}/notifications`, {
        subject: 'kept?',
        message: 'x',
        recipients: ['k@example.com'],
      }),
      201,
      'notification',
    );
    const mailOf = async (submissionId: number) =>
      (expectStatus(await a.get('/mail-log?pageSize=100'), 200, 'list').messages as { submissionId: number }[]).filter(
        (m) => m.submissionId === submissionId,
      );
    const written = async (what: string) => {
      const submission = expectStatus(await a.post(`/forms/${form.id}/submissions`, submissionBody(form)), 200, what);
      await waitFor(`the mail of the ${what} submission`, async () =>
        (await mailOf(submission.id)).length === 1 ? true : undefined,
      );
      return submission.id as number;
    };
    const older = await written('older');
    app.server.ctx.clock.advance((app.config.jobRetentionDays - 1) * DAY);
    const newer = await written('newer');
    const everyMessage = await app.server.ctx.db.selectFrom('mail_log').select('id').execute();

    const prune = async () =>
      pruneMailLogJob.handler(
        app.server.ctx,
        { id: 0, kind: pruneMailLogJob.name, payload: {}, progress: undefined, attempt: 1 },
        {
          signal: new AbortController().signal,
          checkpoint: async () => {},
          replacePayload: async () => {},
          atEnd: () => {},
        },
      );
    await prune();
    assert.equal((await mailOf(older)).length, 1, 'not yet JOB_RETENTION_DAYS old');
    assert.equal((await app.server.ctx.db.selectFrom('mail_log').select('id').execute()).length, everyMessage.length);

    app.server.ctx.clock.advance(2 * DAY);
    await prune();
    assert.deepEqual(await mailOf(older), [], 'older than JOB_RETENTION_DAYS: deleted');
    assert.equal((await mailOf(newer)).length, 1, 'the newer one stays');
    // Nothing older is left, whichever form or test wrote it.
    const left = await app.server.ctx.db.selectFrom('mail_log').select(['created_at']).execute();
    const cutoff = app.server.ctx.clock.now() - app.config.jobRetentionDays * DAY;
    assert.ok(left.length >= 1);
    for (const row of left) assert.ok(Number(row.created_at) >= cutoff);
  });
});
