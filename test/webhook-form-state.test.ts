import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { AppContext } from '../src/context.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker, type Worker } from '../src/jobs/worker.js';
import { conversionJob } from '../src/modules/encryption/convert.js';
import { deliverWebhookJob } from '../src/modules/webhooks/jobs.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { startReceiver, type Receiver } from './support/receiver.js';

/**
 * What a form's state when its events go out does to them: a form deleted since sends none of
 * its webhook deliveries or emails; a form encrypted since sends them, and keeps and
 * redelivers them, as an encrypted form's, without values.
 */

const DAY = 24 * 60 * 60 * 1000;
const PASSWORD = 'sealed after the fact';
const NOT_SENT = 'not sent: the form was deleted';

function ok(res: Reply, what: string): any {
  assert.equal(res.status, 200, `${what}: ${res.status} ${res.text.slice(0, 400)}`);
  return res.body;
}

describe(`deliveries and emails of a form deleted or encrypted since the event (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  let a: TestAccount;
  let receiver: Receiver;
  /** Every job kind. */
  let worker: Worker;
  /** Every kind but the conversion of encrypted forms: what runs before it gets its turn. */
  let beforeConversion: Worker;
  /** The conversion alone. */
  let conversion: Worker;
  /** Webhook deliveries alone. */
  let deliveries: Worker;

  before(async () => {
    // No SMTP_URL: an email sent is a row of the mail log.
    app = await startTestApp({ WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '3000' });
    ctx = app.server.ctx;
    a = await app.account();
    receiver = await startReceiver();
    worker = createWorker(ctx, { kinds: jobKinds });
    beforeConversion = createWorker(ctx, { kinds: jobKinds.filter((k) => k !== conversionJob) });
    conversion = createWorker(ctx, { kinds: [conversionJob] });
    deliveries = createWorker(ctx, { kinds: [deliverWebhookJob] });
  });
  after(async () => {
    await receiver.close();
    await app.close();
  });
  beforeEach(() => {
    receiver.received.length = 0;
    receiver.answer = () => ({ status: 200 });
  });

  /** A form with a webhook (json, every event) and a notification that shows every value. */
  async function hookedForm() {
    const form = ok(
      await a.post('/forms', {
        name: 'Watched',
        fields: [
          { type: 'text', label: 'Note' },
          { type: 'email', label: 'Email' },
        ],
      }),
      'form',
    );
    const webhook = ok(
      await a.post(`/form/${form.id}/webhook`, {
        url: `${receiver.url}/hook`,
        events: ['submission.created', 'submission.updated', 'submission.deleted'],
      }),
      'webhook',
    );
    const notification = await a.post(`/forms/${form.id}/notifications`, {
      subject: 'Entry {{ submission_id }}',
      message: 'Note: {{ fields["Note"] }}\n{{ all_fields }}',
      format: 'text',
      recipients: ['desk@example.com'],
    });
    assert.equal(notification.status, 201, notification.text);
    const [note, email] = form.fields.map((f: any) => f.id as number);
    const submit = async (secret: string) =>
      ok(
        await a.post(`/forms/${form.id}/submissions`, {
          fields: [
            { id: note, value: secret },
            { id: email, value: `${secret}@example.org` },
          ],
        }),
        'submit',
      );
    return { id: form.id as number, webhookId: webhook.id as number, submit };
  }

  /** The form's jobs of a kind, oldest first. */
  const jobsOf = async (kind: 'webhooks.deliver' | 'emails.send', formId: number) =>
    (
      await ctx.db
        .selectFrom('jobs')
        .select(['id', 'state', 'attempts', 'last_error', 'payload'])
        .where('kind', '=', kind)
        .orderBy('id')
        .execute()
    ).filter((j) => {
      const p = JSON.parse(j.payload);
      return (p.event?.formId ?? p.formId) === formId;
    });

  const mailOf = (formId: number) =>
    ctx.db.selectFrom('mail_log').select(['subject', 'text_body']).where('form_id', '=', formId).execute();

  describe('a form deleted since', () => {
    it('sends none of its queued deliveries and emails, says why, never retries them, and sends again once restored', async () => {
      const form = await hookedForm();
      await form.submit('before-the-delete');
      ok(await a.delete(`/forms/${form.id}`), 'delete the form');
      // The owner can no longer reach them to stop them.
      assert.equal((await a.get(`/webhook/${form.webhookId}/deliveries`)).status, 404);

      await worker.runDue();
      assert.equal(receiver.received.length, 0, 'no delivery went out');
      assert.deepEqual(await mailOf(form.id), [], 'no email went out');
      for (const kind of ['webhooks.deliver', 'emails.send'] as const) {
        const [job] = await jobsOf(kind, form.id);
        assert.equal(job!.state, 'failed', kind);
        assert.equal(job!.attempts, 1, kind);
        assert.equal(job!.last_error, NOT_SENT, kind);
      }
      // Not on the retry schedule either (a delivery's runs over about 28 hours).
      ctx.clock.advance(2 * DAY);
      await worker.runDue();
      assert.equal(receiver.received.length, 0);
      assert.deepEqual(await mailOf(form.id), []);

      ok(await a.post(`/forms/${form.id}/restore`), 'restore');
      // The webhook's log says what became of the event, and it can be sent now.
      const log = ok(await a.get(`/webhook/${form.webhookId}/deliveries`), 'log').deliveries;
      assert.equal(log.length, 1);
      assert.equal(log[0].outcome, 'failed');
      assert.equal(log[0].error, NOT_SENT);
      assert.equal(log[0].responseStatus, null);
      assert.equal(log[0].nextAttempt, null);
      assert.equal(ok(await a.get(`/webhook/${form.webhookId}`), 'webhook').state, 'active', 'not failing for it');

      const later = await form.submit('after-the-restore');
      await worker.runDue();
      assert.equal(receiver.received.length, 1);
      assert.equal(JSON.parse(receiver.received[0]!.body.toString()).submissionId, later.id);
      assert.deepEqual(
        (await mailOf(form.id)).map((m) => m.subject),
        [`Entry ${later.id}`],
      );
      ok(await a.post(`/webhook/${form.webhookId}/deliveries/${log[0].id}/redeliver`), 'redeliver');
      await worker.runDue();
      assert.equal(receiver.received.length, 2);
      assert.match(receiver.received[1]!.body.toString(), /before-the-delete/);
    });
  });

  describe('a form encrypted since', () => {
    /** Neither the secret, nor the pretty name made of it, in what was sent or is kept. */
    function noSecret(text: string, secret: string, what: string): void {
      assert.ok(!text.includes(secret), `${what} holds ${secret}: ${text.slice(0, 600)}`);
    }

    function sealedBody(body: Buffer, secret: string): any {
      noSecret(body.toString(), secret, 'the delivery');
      const json = JSON.parse(body.toString());
      assert.deepEqual(json.data.data, []);
      assert.equal(json.data.prettyName, null);
      return json;
    }

    const turnOn = async (formId: number) =>
      assert.equal(
        ok(await a.put(`/forms/${formId}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'turn on')
          .encryptionState,
        'encrypting',
      );

    it('rewrites, when its submissions are converted, the deliveries and emails queued before without their values, and the deliveries a redelivery sends', async () => {
      const form = await hookedForm();
      const first = await form.submit('delivered-in-clear');
      await worker.runDue();
      assert.equal(receiver.received.length, 1);
      const [delivered] = ok(await a.get(`/webhook/${form.webhookId}/deliveries`), 'log').deliveries;
      // The receiver is away: the next event's delivery waits for its retry (its email is still queued).
      receiver.answer = () => ({ status: 503 });
      const pending = await form.submit('pending-secret');
      await deliveries.runDue();
      receiver.received.length = 0;
      receiver.answer = () => ({ status: 200 });

      await turnOn(form.id);
      await conversion.runDue();
      assert.equal(ok(await a.get(`/forms/${form.id}`), 'form').encryptionState, null);
      // The mail log's message of the email sent before keeps its time and none of the values.
      const logged = await ctx.db.selectFrom('mail_log').selectAll().where('form_id', '=', form.id).execute();
      assert.equal(logged.length, 1);
      noSecret(JSON.stringify(logged[0]), 'delivered-in-clear', 'the mail log');
      assert.equal(logged[0]!.recipients, '[]');
      assert.match(logged[0]!.text_body, /encrypted/);
      for (const kind of ['webhooks.deliver', 'emails.send'] as const)
        for (const job of await jobsOf(kind, form.id)) {
          if (job.state === 'done' && kind === 'emails.send') continue; // sent before: see docs/encryption.md
          noSecret(job.payload, 'pending-secret', `${kind} job ${job.id}`);
          noSecret(job.payload, 'delivered-in-clear', `${kind} job ${job.id}`);
          assert.equal(JSON.parse(job.payload).event?.sealed ?? JSON.parse(job.payload).sealed, true);
        }

      // The waiting delivery goes on its retry, and the waiting email, without values.
      ctx.clock.advance(DAY);
      await worker.runDue();
      assert.equal(receiver.received.length, 1);
      assert.equal(sealedBody(receiver.received[0]!.body, 'pending-secret').submissionId, pending.id);
      const mail = (await mailOf(form.id)).find((m) => m.subject === `Entry ${pending.id}`);
      assert.ok(mail, 'the waiting email went');
      noSecret(mail.text_body, 'pending-secret', 'the email');
      assert.match(mail.text_body, /encrypted/);

      // A redelivery of the event delivered in the clear before carries no values now.
      ok(await a.post(`/webhook/${form.webhookId}/deliveries/${delivered.id}/redeliver`), 'redeliver');
      await worker.runDue();
      assert.equal(receiver.received.length, 2);
      assert.equal(sealedBody(receiver.received[1]!.body, 'delivered-in-clear').submissionId, first.id);
    });

    it('sends what was queued before without values even before the conversion has run, and redelivers the same way', async () => {
      const form = await hookedForm();
      await form.submit('delivered-before');
      await worker.runDue();
      const [delivered] = ok(await a.get(`/webhook/${form.webhookId}/deliveries`), 'log').deliveries;
      const pending = await form.submit('still-queued');
      receiver.received.length = 0;

      await turnOn(form.id);
      // The conversion waits its turn (a backlog, a busy worker): the queued event goes first.
      await beforeConversion.runDue();
      assert.equal(receiver.received.length, 1);
      assert.equal(sealedBody(receiver.received[0]!.body, 'still-queued').submissionId, pending.id);
      const mail = (await mailOf(form.id)).find((m) => m.subject === `Entry ${pending.id}`);
      assert.ok(mail, 'the queued email went');
      noSecret(mail.text_body, 'still-queued', 'the email');
      // Nor do their jobs keep the values.
      for (const kind of ['webhooks.deliver', 'emails.send'] as const) {
        const job = (await jobsOf(kind, form.id)).at(-1)!;
        noSecret(job.payload, 'still-queued', `${kind} job`);
      }

      ok(await a.post(`/webhook/${form.webhookId}/deliveries/${delivered.id}/redeliver`), 'redeliver');
      await beforeConversion.runDue();
      assert.equal(receiver.received.length, 2);
      sealedBody(receiver.received[1]!.body, 'delivered-before');
      const redelivery = (await jobsOf('webhooks.deliver', form.id)).at(-1)!;
      noSecret(redelivery.payload, 'delivered-before', 'the redelivery job');
      await conversion.runDue();
    });
  });
});
