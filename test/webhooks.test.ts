import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import type { AppContext } from '../src/context.js';
import { jobKinds } from '../src/job-kinds.js';
import { pruneJob } from '../src/jobs/prune.js';
import { createWorker, type Worker } from '../src/jobs/worker.js';
import { RETRY_SCHEDULE } from '../src/modules/webhooks/delivery.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { savePartialOf } from './support/partials.js';
import { startReceiver, type Received, type Receiver } from './support/receiver.js';
import { cliArgs } from './support/node-entry.js';

const SECOND = 1000;
const DAY = 24 * 60 * 60 * SECOND;
const ALL_EVENTS = ['submission.created', 'submission.updated', 'submission.deleted'];

async function ok<T = any>(promise: Promise<Reply<T>>, what: string): Promise<T> {
  const res = await promise;
  assert.equal(res.status, 200, `${what}: ${res.status} ${res.text.slice(0, 400)}`);
  return res.body;
}

interface TestForm {
  id: number;
  noteId: number;
  topicId: number;
}

async function makeForm(acc: TestAccount, extra: Record<string, unknown> = {}): Promise<TestForm> {
  const form = await ok(
    acc.post('/forms', {
      name: 'Hooked',
      fields: [
        { type: 'text', label: 'Note' },
        {
          type: 'select',
          label: 'Topic',
          options: [
            { label: 'Sales', value: 'sales' },
            { label: 'Support', value: 'support' },
          ],
        },
      ],
      ...extra,
    }),
    'create form',
  );
  return { id: form.id, noteId: form.fields[0].id, topicId: form.fields[1].id };
}

const submit = (acc: TestAccount, form: TestForm, note: string) =>
  ok(
    acc.post(`/forms/${form.id}/submissions`, {
      fields: [
        { id: form.noteId, value: note },
        { id: form.topicId, value: 'support' },
      ],
    }),
    'submit',
  );

/** The body of a delivery (parsed when JSON), after checking its Standard Webhooks signature with the standardwebhooks package. */
function verified(request: Received, signingSecret: string): any {
  const headers = Object.fromEntries(
    ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, String(request.headers[h])]),
  );
  const json = request.headers['content-type'] === 'application/json';
  return new StandardWebhook(signingSecret).verify(request.body, headers, { jsonParse: json });
}

/** The X-FS-Signature that the original service sends, computed here over the raw bytes received. */
const fsSignature = (secret: string, body: Buffer) =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

const deliveryLog = async (acc: TestAccount, webhookId: number, query = '') =>
  (await ok(acc.get(`/webhook/${webhookId}/deliveries${query}`), 'delivery log')).deliveries as any[];

describe(`webhooks (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  let receiver: Receiver;
  let worker: Worker;
  let a: TestAccount;
  let b: TestAccount;

  before(async () => {
    app = await startTestApp({ WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '3000' });
    ctx = app.server.ctx;
    receiver = await startReceiver();
    worker = createWorker(ctx, { kinds: jobKinds });
    a = await app.account('A');
    b = await app.account('B');
  });
  after(async () => {
    await receiver.close();
    await app.close();
  });
  beforeEach(async () => {
    receiver.received.length = 0;
    receiver.answer = () => ({ status: 200 });
    await ctx.db.deleteFrom('jobs').execute();
  });

  describe('routes', () => {
    it('creates a webhook, shows its signing secret once and never its other secrets', async () => {
      const form = await makeForm(a);
      const created = await ok(
        a.post(`/form/${form.id}/webhook`, {
          url: `${receiver.url}/hook`,
          contentType: 'urlencoded',
          hmacSecret: 'hmac-s3cret-value',
          handshakeKey: 'handshake-k3y-value',
          includeFieldType: true,
          events: ['submission.created', 'submission.deleted'],
        }),
        'create',
      );
      assert.match(created.signingSecret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.equal(created.formId, form.id);
      assert.equal(created.contentType, 'urlencoded');
      assert.deepEqual(created.events, ['submission.created', 'submission.deleted']);
      assert.equal(created.includeFieldType, true);
      assert.equal(created.hmacSecretSet, true);
      assert.equal(created.handshakeKeySet, true);
      assert.equal(created.state, 'active');
      assert.equal(created.failureReason, null);

      const reads = [
        await a.get(`/webhook/${created.id}`),
        await a.get(`/form/${form.id}/webhook`),
        await a.put(`/webhook/${created.id}`, { url: `${receiver.url}/other` }),
        await a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/second` }),
      ];
      for (const res of reads) {
        assert.equal(res.status, 200, res.text);
        for (const secret of ['hmac-s3cret-value', 'handshake-k3y-value', created.signingSecret])
          assert.ok(!res.text.includes(secret), res.text);
      }
      assert.equal(reads[0]!.body.signingSecret, undefined);
      assert.deepEqual(
        reads[1]!.body.webhooks.map((w: any) => w.id),
        [created.id],
      );
      assert.equal(reads[2]!.body.url, `${receiver.url}/other`);
      assert.notEqual(reads[3]!.body.signingSecret, created.signingSecret, 'each webhook has its own secret');

      // Stored sealed: the database alone does not give them away.
      const row = await ctx.db
        .selectFrom('webhooks')
        .selectAll()
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      const stored = JSON.stringify(row);
      for (const secret of ['hmac-s3cret-value', 'handshake-k3y-value', created.signingSecret.slice(6)])
        assert.ok(!stored.includes(secret), stored);
    });

    it('defaults to JSON and submission.created, and refuses a URL that is not http or https, naming it', async () => {
      const form = await makeForm(a);
      const plain = await ok(a.post(`/form/${form.id}/webhook`, { url: 'https://example.com/x' }), 'create');
      assert.equal(plain.contentType, 'json');
      assert.deepEqual(plain.events, ['submission.created']);
      assert.equal(plain.hmacSecretSet, false);
      for (const url of ['ftp://example.com/x', 'not a url', 'javascript:alert(1)', 'mailto:a@example.com', '']) {
        const res = await a.post(`/form/${form.id}/webhook`, { url });
        assert.equal(res.status, 400, `${url}: ${res.text}`);
        assert.ok(
          res.body.details.some((d: any) => d.property === 'body.url'),
          `${url}: ${JSON.stringify(res.body)}`,
        );
      }
      const missing = await a.post(`/form/${form.id}/webhook`, {});
      assert.equal(missing.status, 400);
      assert.match(JSON.stringify(missing.body.details), /url/);
      for (const body of [
        { url: 'https://example.com', contentType: 'xml' },
        { url: 'https://example.com', events: ['form.deleted'] },
        { url: 'https://example.com', events: [] },
        { url: 'https://example.com', hmacSecret: '' },
        { url: 'https://example.com', surprise: true },
      ]) {
        const res = await a.post(`/form/${form.id}/webhook`, body);
        assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
        assert.equal(res.body.code, 'validation_failed');
      }
      const put = await a.put(`/webhook/${plain.id}`, { url: 'gopher://example.com' });
      assert.equal(put.status, 400);
      assert.deepEqual(
        put.body.details.map((d: any) => d.property),
        ['body.url'],
      );
      assert.equal((await a.put(`/webhook/${plain.id}`, {})).status, 400, 'an empty update');
    });

    it('holds at most 20 webhooks a form, counted at once as they are made', async () => {
      const form = await makeForm(a);
      const made = await Promise.all(
        Array.from({ length: 21 }, (_, i) => a.post(`/form/${form.id}/webhook`, { url: `https://example.com/${i}` })),
      );
      assert.deepEqual(
        made.map((r) => r.status).sort(),
        [...Array.from({ length: 20 }, () => 200), 400],
        made.map((r) => r.body.code ?? r.status).join(' '),
      );
      const refused = made.find((r) => r.status === 400)!;
      assert.equal(refused.body.code, 'too_many_webhooks');
      assert.equal((await a.get(`/form/${form.id}/webhook`)).body.webhooks.length, 20);
      const other = await makeForm(a);
      assert.equal((await a.post(`/form/${other.id}/webhook`, { url: 'https://example.com/o' })).status, 200);
    });

    it('acts on webhooks and emails added, changed or removed after the form took submissions', async () => {
      // Submission writes keep a form's webhooks and emails with its cached definition: each
      // change to them must move the form's revision, or the next submission would miss it.
      const form = await makeForm(a);
      const jobsOfNext = async (note: string) => {
        await ctx.db.deleteFrom('jobs').execute();
        await submit(a, form, note);
        const rows = await ctx.db
          .selectFrom('jobs')
          .select('kind')
          .where('kind', 'in', ['webhooks.deliver', 'emails.send'])
          .execute();
        return rows.map((r) => r.kind).sort();
      };
      assert.deepEqual(await jobsOfNext('first'), []);
      const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/hook` }), 'create webhook');
      assert.deepEqual(await jobsOfNext('second'), ['webhooks.deliver']);
      const created = await a.post(`/forms/${form.id}/notifications`, {
        recipients: ['team@example.com'],
        subject: 'New',
        message: 'New submission',
      });
      assert.equal(created.status, 201, created.text);
      const mail = created.body;
      assert.deepEqual(await jobsOfNext('third'), ['emails.send', 'webhooks.deliver']);
      await ok(a.put(`/webhook/${hook.id}`, { events: ['submission.deleted'] }), 'other events');
      assert.deepEqual(await jobsOfNext('fourth'), ['emails.send']);
      await ok(a.put(`/webhook/${hook.id}`, { events: ['submission.created'] }), 'created again');
      const onlySales = {
        action: 'show',
        conditional: 'all',
        checks: [{ field: form.topicId, condition: 'equals', option: 'sales' }],
      };
      await ok(a.put(`/notifications/${mail.id}`, { logic: onlySales }), 'only for sales');
      assert.deepEqual(await jobsOfNext('fifth'), ['webhooks.deliver'], 'the submissions are about support');
      await ok(a.put(`/notifications/${mail.id}`, { logic: null }), 'always');
      await ok(a.put(`/webhook/${hook.id}`, { active: false }), 'turn off');
      assert.deepEqual(await jobsOfNext('sixth'), ['emails.send']);
      await ok(a.put(`/webhook/${hook.id}`, { active: true }), 'turn on');
      await ok(a.delete(`/notifications/${mail.id}`), 'delete notification');
      assert.deepEqual(await jobsOfNext('seventh'), ['webhooks.deliver']);
      await ok(a.delete(`/webhook/${hook.id}`), 'delete webhook');
      assert.deepEqual(await jobsOfNext('eighth'), []);
    });

    it('changes, turns off and on, and deletes a webhook', async () => {
      const form = await makeForm(a);
      const hook = await ok(
        a.post(`/form/${form.id}/webhook`, { url: 'https://example.com/a', hmacSecret: 'x', handshakeKey: 'y' }),
        'create',
      );
      const changed = await ok(
        a.put(`/webhook/${hook.id}`, {
          contentType: 'urlencoded',
          hmacSecret: null,
          events: ALL_EVENTS,
          includeFieldType: true,
        }),
        'update',
      );
      assert.equal(changed.contentType, 'urlencoded');
      assert.equal(changed.hmacSecretSet, false);
      assert.equal(changed.handshakeKeySet, true);
      assert.deepEqual(changed.events, ALL_EVENTS);
      assert.equal(changed.url, 'https://example.com/a');
      const off = await ok(a.put(`/webhook/${hook.id}`, { active: false }), 'turn off');
      assert.equal(off.state, 'disabled');
      assert.match(off.failureReason, /Turned off/);
      const on = await ok(a.put(`/webhook/${hook.id}`, { active: true }), 'turn on');
      assert.equal(on.state, 'active');
      assert.equal(on.failureReason, null);

      assert.deepEqual(await ok(a.delete(`/webhook/${hook.id}`), 'delete'), { id: hook.id, deleted: true });
      for (const res of [
        await a.get(`/webhook/${hook.id}`),
        await a.put(`/webhook/${hook.id}`, { url: 'https://example.com/b' }),
        await a.delete(`/webhook/${hook.id}`),
        await a.get(`/webhook/${hook.id}/deliveries`),
      ]) {
        assert.equal(res.status, 404, res.text);
        assert.equal(res.body.code, 'webhook_not_found');
      }
      assert.deepEqual((await ok(a.get(`/form/${form.id}/webhook`), 'list')).webhooks, []);
    });

    it("answers 404 for another account's form or webhook, and for a deleted form's", async () => {
      const form = await makeForm(a);
      const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: 'https://example.com/a' }), 'create');
      for (const res of [
        await b.get(`/form/${form.id}/webhook`),
        await b.post(`/form/${form.id}/webhook`, { url: 'https://example.com/b' }),
      ])
        assert.deepEqual([res.status, res.body.code], [404, 'form_not_found']);
      for (const res of [
        await b.get(`/webhook/${hook.id}`),
        await b.put(`/webhook/${hook.id}`, { url: 'https://example.com/b' }),
        await b.delete(`/webhook/${hook.id}`),
        await b.get(`/webhook/${hook.id}/deliveries`),
        await b.post(`/webhook/${hook.id}/deliveries/1/redeliver`),
      ])
        assert.deepEqual([res.status, res.body.code], [404, 'webhook_not_found']);
      assert.equal((await ok(a.get(`/webhook/${hook.id}`), 'still there')).url, 'https://example.com/a');

      await ok(a.delete(`/forms/${form.id}`), 'delete form');
      assert.equal((await a.get(`/webhook/${hook.id}`)).status, 404);
      assert.equal((await a.get(`/form/${form.id}/webhook`)).status, 404);
      await ok(a.post(`/forms/${form.id}/restore`), 'restore form');
      assert.equal((await ok(a.get(`/webhook/${hook.id}`), 'back with its form')).id, hook.id);
    });

    it('answers under /api/v2 with .json too, in v2 shapes (docs/v2.md)', async () => {
      const form = await makeForm(a);
      const created = await app.request('POST', `/api/v2/form/${form.id}/webhook.json`, {
        token: a.token,
        body: { url: 'https://example.com/legacy' },
      });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.body.form, String(form.id));
      const read = await app.request('GET', `/api/v2/webhook/${created.body.id}.json`, { token: a.token });
      assert.equal(read.status, 200, read.text);
      assert.equal(read.body.url, 'https://example.com/legacy');
      const gone = await app.request('DELETE', `/api/v2/webhook/${created.body.id}.json`, { token: a.token });
      assert.deepEqual(gone.body, { success: '1', id: created.body.id });
    });

    it('needs the edit level on the form for a member, even to read', async () => {
      const form = await makeForm(a);
      const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: 'https://example.com/a' }), 'create');
      const member = await ok(
        a.post('/users', { email: `m-${Date.now()}@example.com`, name: 'M', role: 'member' }),
        'member',
      );
      const token = (await ok(a.post(`/users/${member.id}/tokens`, { name: 't' }), 'token')).token as string;
      const asMember = (method: string, path: string, body?: unknown) =>
        app.request(method, `/api/v2025${path}`, { token, body });
      await ok(a.put(`/users/${member.id}/permissions/${form.id}`, { level: 'view' }), 'view level');
      for (const res of [
        await asMember('GET', `/webhook/${hook.id}`),
        await asMember('GET', `/form/${form.id}/webhook`),
      ])
        assert.deepEqual([res.status, res.body.code], [403, 'form_permission_required']);
      await ok(a.put(`/users/${member.id}/permissions/${form.id}`, { level: 'edit' }), 'edit level');
      await ok(asMember('GET', `/webhook/${hook.id}`), 'member reads');
      await ok(asMember('PUT', `/webhook/${hook.id}`, { url: 'https://example.com/m' }), 'member changes');
    });
  });

  describe('deliveries', () => {
    it('delivers created, updated and deleted events, each with the values of its own change, signed both ways', async () => {
      const form = await makeForm(a);
      const hook = await ok(
        a.post(`/form/${form.id}/webhook`, {
          url: `${receiver.url}/hook?x=1`,
          hmacSecret: 'the hmac secret',
          handshakeKey: 'the handshake',
          events: ALL_EVENTS,
        }),
        'create',
      );
      const only = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/created-only` }), 'create');
      const submission = await submit(a, form, 'first');
      // Two updates before any delivery: each event carries what its own change left.
      await ok(a.put(`/submissions/${submission.id}`, { fields: [{ id: form.noteId, value: 'second' }] }), 'update');
      await ok(a.put(`/submissions/${submission.id}`, { fields: [{ id: form.noteId, value: 'third' }] }), 'update');
      await ok(a.delete(`/submissions/${submission.id}`), 'delete');
      await worker.runDue();

      const toHook = receiver.received.filter((r) => r.path === '/hook?x=1');
      const toOnly = receiver.received.filter((r) => r.path === '/created-only');
      assert.equal(toHook.length, 4);
      assert.equal(toOnly.length, 1, 'a webhook gets only the events it asks for');
      assert.equal(JSON.parse(toOnly[0]!.body.toString()).type, 'submission.created');
      assert.equal(toOnly[0]!.headers['x-fs-signature'], undefined, 'no hmacSecret, no X-FS-Signature');
      verified(toOnly[0]!, only.signingSecret);

      const events = toHook.map((r) => {
        assert.equal(r.method, 'POST');
        assert.equal(r.headers['content-type'], 'application/json');
        assert.equal(r.headers['x-fs-signature'], fsSignature('the hmac secret', r.body));
        assert.throws(() => verified(r, only.signingSecret), /signature/i, "another webhook's secret does not verify");
        const body = verified(r, hook.signingSecret);
        assert.equal(r.headers['x-formwork-event'], body.type);
        assert.equal(body.formId, form.id);
        assert.equal(body.submissionId, submission.id);
        assert.equal(body.HandshakeKey, 'the handshake');
        assert.ok(!Number.isNaN(Date.parse(body.timestamp)));
        return body;
      });
      const note = (body: any) => body.data?.data.find((d: any) => d.field === form.noteId)?.value;
      const byType = (type: string) => events.filter((e) => e.type === type);
      assert.deepEqual(byType('submission.created').map(note), ['first']);
      assert.deepEqual(byType('submission.updated').map(note).sort(), ['second', 'third']);
      assert.deepEqual(
        byType('submission.deleted').map((e) => e.data),
        [null],
      );
      const created = byType('submission.created')[0];
      assert.equal(created.data.id, submission.id);
      assert.deepEqual(
        created.data.data.map((d: any) => [d.field, d.type, d.displayValue]),
        [
          [form.noteId, 'text', 'first'],
          [form.topicId, 'select', 'Support'],
        ],
      );
      assert.equal(new Set(toHook.map((r) => r.headers['webhook-id'])).size, 4, 'one webhook-id per event');

      const log = await deliveryLog(a, hook.id);
      assert.equal(log.length, 4);
      for (const entry of log) {
        assert.equal(entry.outcome, 'delivered');
        assert.equal(entry.responseStatus, 200);
        assert.equal(entry.attempt, 1);
        assert.equal(entry.error, null);
        assert.equal(entry.nextAttempt, null);
        assert.ok(entry.durationMs >= 0);
        assert.ok(toHook.some((r) => r.headers['webhook-id'] === entry.messageId));
      }
      assert.deepEqual(log.map((e) => e.event).sort(), [...ALL_EVENTS, 'submission.updated'].sort());
    });

    it('rotates the signing secret: deliveries are signed with the new one only', async () => {
      const form = await makeForm(a);
      const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/rotated` }), 'create');
      const rotated = await ok(a.post(`/webhook/${hook.id}/secret`), 'rotate');
      assert.match(rotated.signingSecret, /^whsec_/);
      assert.notEqual(rotated.signingSecret, hook.signingSecret);
      assert.equal(rotated.id, hook.id);
      assert.equal((await ok(a.get(`/webhook/${hook.id}`), 'read')).signingSecret, undefined);
      assert.equal((await b.post(`/webhook/${hook.id}/secret`)).status, 404);
      await submit(a, form, 'after rotation');
      await worker.runDue();
      const [delivery] = receiver.received.filter((r) => r.path === '/rotated');
      assert.ok(delivery);
      verified(delivery, rotated.signingSecret);
      assert.throws(() => verified(delivery, hook.signingSecret), /signature/i);
    });

    it('copies webhooks with their form when asked, each with a new signing secret, at the edit level', async () => {
      const form = await makeForm(a);
      const hook = await ok(
        a.post(`/form/${form.id}/webhook`, {
          url: `${receiver.url}/copied`,
          hmacSecret: 'copied hmac',
          events: ALL_EVENTS,
        }),
        'create',
      );
      const plain = await ok(a.post(`/forms/${form.id}/copy`), 'copy without');
      assert.deepEqual((await ok(a.get(`/form/${plain.id}/webhook`), 'list')).webhooks, []);

      const copy = await ok(a.post(`/forms/${form.id}/copy?includeIntegrations=true`), 'copy with');
      const [copied, more] = (await ok(a.get(`/form/${copy.id}/webhook`), 'list')).webhooks;
      assert.equal(more, undefined);
      assert.notEqual(copied.id, hook.id);
      assert.deepEqual(
        [copied.formId, copied.url, copied.events, copied.hmacSecretSet, copied.state],
        [copy.id, hook.url, ALL_EVENTS, true, 'active'],
      );
      // The copy's secret is its own: the original's does not verify its deliveries, the rotated one does.
      const secret = (await ok(a.post(`/webhook/${copied.id}/secret`), 'rotate')).signingSecret;
      const fields = copy.fields as { id: number }[];
      await ok(
        a.post(`/forms/${copy.id}/submissions`, { fields: [{ id: fields[0]!.id, value: 'to the copy' }] }),
        'submit to the copy',
      );
      await worker.runDue();
      const [delivery] = receiver.received.filter((r) => r.path === '/copied');
      assert.ok(delivery);
      assert.equal(verified(delivery, secret).formId, copy.id);
      assert.throws(() => verified(delivery, hook.signingSecret), /signature/i);
      assert.equal(delivery.headers['x-fs-signature'], fsSignature('copied hmac', delivery.body));

      // A member who may only view the form may copy it, but not its webhooks.
      const member = await ok(
        a.post('/users', { email: `copier-${Date.now()}@example.com`, name: 'C', role: 'member' }),
        'member',
      );
      const token = (await ok(a.post(`/users/${member.id}/tokens`, { name: 't' }), 'token')).token as string;
      await ok(a.put(`/users/${member.id}/permissions/${form.id}`, { level: 'view' }), 'view level');
      const asMember = (path: string) => app.request('POST', `/api/v2025${path}`, { token });
      assert.equal((await asMember(`/forms/${form.id}/copy`)).status, 200);
      const refused = await asMember(`/forms/${form.id}/copy?includeIntegrations=true`);
      assert.deepEqual([refused.status, refused.body.code], [403, 'form_permission_required']);
    });

    it("posts the original service's form keys with urlencoded, with field types when asked", async () => {
      const form = await makeForm(a);
      const plain = await ok(
        a.post(`/form/${form.id}/webhook`, {
          url: `${receiver.url}/plain`,
          contentType: 'urlencoded',
          handshakeKey: 'hs',
          hmacSecret: 'secret for the form post',
        }),
        'create',
      );
      await ok(
        a.post(`/form/${form.id}/webhook`, {
          url: `${receiver.url}/typed`,
          contentType: 'urlencoded',
          includeFieldType: true,
        }),
        'create',
      );
      const submission = await submit(a, form, 'a & b = c');
      await worker.runDue();
      const plainPost = receiver.received.find((r) => r.path === '/plain')!;
      const typedPost = receiver.received.find((r) => r.path === '/typed')!;
      assert.equal(plainPost.headers['content-type'], 'application/x-www-form-urlencoded');
      assert.equal(plainPost.headers['x-fs-signature'], fsSignature('secret for the form post', plainPost.body));
      verified(plainPost, plain.signingSecret);
      assert.deepEqual(
        [...new URLSearchParams(plainPost.body.toString())],
        [
          ['FormID', String(form.id)],
          ['UniqueID', String(submission.id)],
          ['HandshakeKey', 'hs'],
          [String(form.noteId), 'a & b = c'],
          [String(form.topicId), 'Support'],
        ],
      );
      const typed = new URLSearchParams(typedPost.body.toString());
      assert.equal(typed.get('HandshakeKey'), null);
      assert.deepEqual(JSON.parse(typed.get(String(form.noteId))!), { value: 'a & b = c', type: 'text' });
      assert.deepEqual(JSON.parse(typed.get(String(form.topicId))!), { value: ['support'], type: 'select' });
    });

    it('sends ids and no values for an encrypted form', async () => {
      const form = await makeForm(a, { isEncrypted: true, encryptionPassword: 'correct horse battery staple' });
      await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/json`, events: ALL_EVENTS }), 'create');
      await ok(
        a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/form`, contentType: 'urlencoded' }),
        'create',
      );
      const submission = await submit(a, form, 'sealed words nobody sees');
      await worker.runDue();
      assert.equal(receiver.received.length, 2);
      for (const r of receiver.received) assert.ok(!r.body.toString().includes('sealed words'), r.body.toString());
      const json = JSON.parse(receiver.received.find((r) => r.path === '/json')!.body.toString());
      assert.equal(json.submissionId, submission.id);
      assert.equal(json.formId, form.id);
      assert.deepEqual(json.data.data, []);
      assert.equal(json.data.prettyName, null);
      assert.deepEqual(
        [...new URLSearchParams(receiver.received.find((r) => r.path === '/form')!.body.toString()).keys()],
        ['FormID', 'UniqueID'],
      );
    });

    it('delivers partial.saved to the webhooks that ask for it, with the partial as the API shows it and no resume token', async () => {
      const form = await makeForm(a);
      const hook = await ok(
        a.post(`/form/${form.id}/webhook`, {
          url: `${receiver.url}/partials`,
          hmacSecret: 'partial hmac',
          events: ['partial.saved', 'submission.created'],
        }),
        'create',
      );
      const form2 = await ok(
        a.post(`/form/${form.id}/webhook`, {
          url: `${receiver.url}/partials-form`,
          contentType: 'urlencoded',
          events: ['partial.saved'],
        }),
        'create',
      );
      await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/created-only` }), 'create');
      await ok(
        a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/all-submission-events`, events: ALL_EVENTS }),
        'create',
      );

      const saved = await savePartialOf(app, a, form.id, [{ id: form.noteId, value: 'half way' }]);
      const path = new URL((await ok(a.get(`/forms/${form.id}`), 'form')).url).pathname;
      // Saved again from the resumed page: the same partial, a second event with the new values.
      const again = await app.request('POST', `${path}/partial`, {
        body: {
          fields: [
            { id: form.noteId, value: 'nearly there' },
            { id: form.topicId, value: 'sales' },
          ],
          website: '',
          _resume: saved.resumeToken,
        },
      });
      assert.equal(again.status, 200, again.text);
      await worker.runDue();

      assert.equal(receiver.received.filter((r) => r.path === '/created-only').length, 0, 'not subscribed: nothing');
      assert.equal(receiver.received.filter((r) => r.path === '/all-submission-events').length, 0);
      const toHook = receiver.received.filter((r) => r.path === '/partials');
      assert.equal(toHook.length, 2);
      for (const r of [...toHook, ...receiver.received.filter((x) => x.path === '/partials-form')]) {
        assert.ok(!r.body.toString().includes(saved.resumeToken), 'the resume token is never sent');
        assert.ok(!JSON.stringify(r.headers).includes(saved.resumeToken));
      }
      const bodies = toHook.map((r) => {
        // Signed exactly as submission events are: Standard Webhooks and X-FS-Signature over the raw bytes.
        assert.equal(r.headers['x-fs-signature'], fsSignature('partial hmac', r.body));
        assert.equal(r.headers['x-formwork-event'], 'partial.saved');
        const body = verified(r, hook.signingSecret);
        assert.equal(body.type, 'partial.saved');
        assert.equal(body.formId, form.id);
        assert.equal(body.partialSubmissionId, saved.id);
        assert.equal(body.submissionId, undefined);
        assert.ok(!Number.isNaN(Date.parse(body.timestamp)));
        return body;
      });
      assert.equal(new Set(toHook.map((r) => r.headers['webhook-id'])).size, 2, 'one webhook-id per save');
      const notes = bodies.map((b) => b.data.data.find((d: any) => d.field === form.noteId).value).sort();
      assert.deepEqual(notes, ['half way', 'nearly there']);
      const latest = bodies.find((b) => b.data.data.length === 2);
      const shown = await ok(a.get(`/partialsubmission/${saved.id}`), 'partial');
      assert.deepEqual(latest.data, shown, 'the same shape and values as GET /partialsubmission/{id}');

      const posted = receiver.received.filter((r) => r.path === '/partials-form');
      assert.equal(posted.length, 2);
      verified(posted[0]!, form2.signingSecret);
      const fields = new URLSearchParams(posted.find((r) => r.body.toString().includes('Sales'))!.body.toString());
      assert.deepEqual(
        [...fields.entries()],
        [
          ['FormID', String(form.id)],
          ['PartialSubmissionID', String(saved.id)],
          [String(form.noteId), 'nearly there'],
          [String(form.topicId), 'Sales'],
        ],
      );

      const log = await deliveryLog(a, hook.id);
      assert.deepEqual(
        log.map((e) => [e.event, e.outcome]),
        [
          ['partial.saved', 'delivered'],
          ['partial.saved', 'delivered'],
        ],
      );
    });

    it('sends ids and no values of a partial of an encrypted form', async () => {
      const form = await makeForm(a, { isEncrypted: true, encryptionPassword: 'correct horse battery staple' });
      const hook = await ok(
        a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/sealed-partial`, events: ['partial.saved'] }),
        'create',
      );
      const saved = await savePartialOf(app, a, form.id, [{ id: form.noteId, value: 'sealed partial words' }]);
      await worker.runDue();
      assert.equal(receiver.received.length, 1);
      const r = receiver.received[0]!;
      assert.ok(!r.body.toString().includes('sealed partial words'), r.body.toString());
      assert.ok(!r.body.toString().includes(saved.resumeToken));
      const body = verified(r, hook.signingSecret);
      assert.equal(body.type, 'partial.saved');
      assert.equal(body.partialSubmissionId, saved.id);
      assert.equal(body.data.id, saved.id);
      assert.deepEqual(body.data.data, []);
      assert.equal(body.data.prettyName, null);
    });

    it('does not follow a redirect, and gives up on a receiver that does not answer in time', async () => {
      const form = await makeForm(a);
      const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/moved` }), 'create');
      receiver.answer = (r) =>
        r.path === '/moved' ? { status: 302, headers: { location: `${receiver.url}/elsewhere` } } : { status: 200 };
      await submit(a, form, 'redirected');
      await worker.runDue();
      assert.deepEqual(
        receiver.received.map((r) => r.path),
        ['/moved'],
      );
      const [moved] = await deliveryLog(a, hook.id);
      assert.equal(moved.outcome, 'failed');
      assert.equal(moved.responseStatus, 302);
      assert.match(moved.error, /302.*redirects are not followed/);
      assert.ok(moved.nextAttempt !== null);

      await ok(a.put(`/webhook/${hook.id}`, { url: `${receiver.url}/slow` }), 'point elsewhere');
      receiver.answer = () => 'hang';
      await ctx.db.deleteFrom('jobs').execute();
      await submit(a, form, 'slow');
      try {
        await worker.runDue();
      } finally {
        receiver.dropHanging();
      }
      const [slow] = await deliveryLog(a, hook.id);
      assert.equal(slow.outcome, 'failed');
      assert.equal(slow.responseStatus, null);
      assert.match(slow.error, /no complete response within 3000 ms/);
    });

    it('redelivers a logged event with the same webhook-id and body, and pages the log', async () => {
      const form = await makeForm(a);
      const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/again` }), 'create');
      for (const note of ['one', 'two', 'three']) await submit(a, form, note);
      await worker.runDue();
      assert.equal(receiver.received.length, 3);

      const page1 = await ok(a.get(`/webhook/${hook.id}/deliveries?pageSize=2`), 'page 1');
      const page2 = await ok(a.get(`/webhook/${hook.id}/deliveries?pageSize=2&pageNumber=2`), 'page 2');
      assert.deepEqual([page1.total, page1.pages, page1.deliveries.length, page2.deliveries.length], [3, 2, 2, 1]);
      const oldest = page2.deliveries[0];
      assert.ok(oldest.id < page1.deliveries[1].id, 'newest first');

      const again = await ok(a.post(`/webhook/${hook.id}/deliveries/${oldest.id}/redeliver`), 'redeliver');
      assert.deepEqual(again, {
        webhookId: hook.id,
        messageId: oldest.messageId,
        event: 'submission.created',
        queued: true,
      });
      await worker.runDue();
      assert.equal(receiver.received.length, 4);
      const first = receiver.received.find((r) => r.headers['webhook-id'] === oldest.messageId)!;
      const repeat = receiver.received[3]!;
      assert.equal(repeat.headers['webhook-id'], oldest.messageId);
      assert.deepEqual(repeat.body, first.body);
      verified(repeat, hook.signingSecret);
      const log = await deliveryLog(a, hook.id);
      assert.deepEqual(
        log.filter((e) => e.messageId === oldest.messageId).map((e) => e.outcome),
        ['delivered', 'delivered'],
      );

      for (const missing of [999_999, page1.deliveries[0].id + 1000]) {
        const res = await a.post(`/webhook/${hook.id}/deliveries/${missing}/redeliver`);
        assert.deepEqual([res.status, res.body.code], [404, 'webhook_delivery_not_found']);
      }
      const other = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/other` }), 'create');
      const crossed = await a.post(`/webhook/${other.id}/deliveries/${oldest.id}/redeliver`);
      assert.deepEqual([crossed.status, crossed.body.code], [404, 'webhook_delivery_not_found']);
      await ok(a.put(`/webhook/${hook.id}`, { active: false }), 'turn off');
      const off = await a.post(`/webhook/${hook.id}/deliveries/${oldest.id}/redeliver`);
      assert.deepEqual([off.status, off.body.code], [409, 'webhook_disabled']);
    });

    it('sends nothing for a webhook deleted or turned off before its delivery, and deletes its log with it', async () => {
      const form = await makeForm(a);
      const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/doomed` }), 'create');
      const off = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/off` }), 'create');
      await submit(a, form, 'logged');
      await worker.runDue();
      assert.equal(receiver.received.length, 2);
      await submit(a, form, 'queued');
      await ok(a.put(`/webhook/${off.id}`, { active: false }), 'turn off');
      await ok(a.delete(`/webhook/${hook.id}`), 'delete');
      await worker.runDue();
      assert.equal(receiver.received.length, 2, 'nothing more was sent');
      const rows = await ctx.db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('webhook_id', '=', hook.id)
        .execute();
      assert.deepEqual(rows, []);
      assert.equal((await deliveryLog(a, off.id)).length, 1);
      // A form without live webhooks: its submissions enqueue no delivery.
      await submit(a, form, 'unheard');
      const queued = await ctx.db
        .selectFrom('jobs')
        .select('id')
        .where('kind', '=', 'webhooks.deliver')
        .where('state', '=', 'queued')
        .execute();
      assert.deepEqual(queued, []);
    });
  });
});

describe(`webhook retries (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  let receiver: Receiver;
  let worker: Worker;
  let a: TestAccount;

  before(async () => {
    app = await startTestApp({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    ctx = app.server.ctx;
    receiver = await startReceiver();
    worker = createWorker(ctx, { kinds: jobKinds });
    a = await app.account('A');
  });
  after(async () => {
    await receiver.close();
    await app.close();
  });
  beforeEach(async () => {
    receiver.received.length = 0;
    receiver.answer = () => ({ status: 200 });
    await ctx.db.deleteFrom('jobs').execute();
  });

  /** The newest log row of the webhook, with times in ms. */
  const lastAttempt = async (webhookId: number) => {
    const [entry] = await deliveryLog(a, webhookId, '?pageSize=1');
    return {
      ...entry,
      at: Date.parse(entry.time),
      next: entry.nextAttempt === null ? null : Date.parse(entry.nextAttempt),
    };
  };

  it('retries on the schedule with jitter, with one webhook-id, then marks the webhook failing with why', async () => {
    const form = await makeForm(a);
    const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/down` }), 'create');
    receiver.answer = () => ({ status: 500 });
    await submit(a, form, 'persistent');
    const attempts = RETRY_SCHEDULE.delaysMs.length + 1;
    assert.equal(attempts, 8);
    for (let n = 1; n <= attempts; n++) {
      await worker.runDue();
      assert.equal(receiver.received.length, n, `attempt ${n} was made`);
      const entry = await lastAttempt(hook.id);
      assert.deepEqual(
        [entry.attempt, entry.outcome, entry.responseStatus, entry.error],
        [n, 'failed', 500, 'HTTP 500'],
      );
      if (n === attempts) {
        assert.equal(entry.next, null);
        break;
      }
      const delay = RETRY_SCHEDULE.delaysMs[n - 1]!;
      // The delay counts from the attempt's end (its time plus its duration): on a loaded
      // machine an attempt can take long enough to push the next past 1.1 times the delay
      // from its start.
      const waited = entry.next! - (entry.at + entry.durationMs);
      assert.ok(
        waited >= delay * 0.9 && waited <= delay * 1.1,
        `attempt ${n}: the next comes ${waited} ms after it ended (${entry.durationMs} ms), not about ${delay}`,
      );
      assert.equal((await ok(a.get(`/webhook/${hook.id}`), 'read')).state, 'active', 'not failing while retrying');
      // Halfway there nothing runs (the margin is wide, as the clock also moves with real
      // time while the worker looks); at the time, the next attempt does.
      ctx.clock.advance(entry.at + delay / 2 - ctx.clock.now());
      await worker.runDue();
      assert.equal(receiver.received.length, n, `attempt ${n + 1} waits for its time`);
      ctx.clock.advance(Math.max(0, entry.next! - ctx.clock.now()));
    }
    assert.equal(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size, 1);
    const failing = await ok(a.get(`/webhook/${hook.id}`), 'read');
    assert.equal(failing.state, 'failing');
    assert.match(failing.failureReason, /not delivered in 8 attempts; the last: HTTP 500/);
    assert.match(failing.failureReason, new RegExp(String(receiver.received[0]!.headers['webhook-id'])));
    assert.ok(failing.failed !== null);
    const job = await ctx.db
      .selectFrom('jobs')
      .select(['state', 'attempts'])
      .where('kind', '=', 'webhooks.deliver')
      .executeTakeFirstOrThrow();
    assert.deepEqual(job, { state: 'failed', attempts: 8 });
    ctx.clock.advance(DAY);
    await worker.runDue();
    assert.equal(receiver.received.length, 8, 'no attempt after the last');

    // Failing is not off: the next event goes, and a delivery clears it.
    receiver.answer = () => ({ status: 204 });
    await submit(a, form, 'recovered');
    await worker.runDue();
    assert.equal(receiver.received.length, 9);
    const recovered = await ok(a.get(`/webhook/${hook.id}`), 'read');
    assert.deepEqual([recovered.state, recovered.failureReason, recovered.failed], ['active', null, null]);
  });

  it('honours Retry-After on 429 and 503, in seconds or as a date, and not on other statuses', async () => {
    const form = await makeForm(a);
    const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/busy` }), 'create');
    await submit(a, form, 'later');

    receiver.answer = () => ({ status: 429, headers: { 'retry-after': '7200' } });
    await worker.runDue();
    let entry = await lastAttempt(hook.id);
    assert.equal(entry.responseStatus, 429);
    // Counted from the response, which came durationMs after the attempt started.
    assert.equal(entry.next! - entry.at, 7200 * SECOND + entry.durationMs);
    ctx.clock.advance(entry.next! - ctx.clock.now() - 60 * SECOND);
    await worker.runDue();
    assert.equal(receiver.received.length, 1, 'not before Retry-After');
    ctx.clock.advance(Math.max(0, entry.next! - ctx.clock.now()));

    // An HTTP date is a time of the receiver's world (the system clock), an hour from now there.
    const date = new Date(ctx.clock.toSystem(ctx.clock.now()) + 3600 * SECOND).toUTCString();
    receiver.answer = () => ({ status: 503, headers: { 'retry-after': date } });
    await worker.runDue();
    entry = await lastAttempt(hook.id);
    assert.equal(entry.responseStatus, 503);
    assert.equal(entry.next, ctx.clock.fromSystem(Date.parse(date)));

    ctx.clock.advance(Math.max(0, entry.next! - ctx.clock.now()));
    receiver.answer = () => ({ status: 500, headers: { 'retry-after': '7200' } });
    await worker.runDue();
    entry = await lastAttempt(hook.id);
    assert.equal(entry.attempt, 3);
    const delay = RETRY_SCHEDULE.delaysMs[2]!;
    assert.ok(entry.next! - entry.at <= delay * 1.1, 'a 500 follows the schedule, whatever Retry-After says');
  });

  it('never retries sooner than the schedule for a Retry-After of 0 or a date past', async () => {
    const form = await makeForm(a);
    const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/eager` }), 'create');
    await submit(a, form, 'eager');
    for (const [attempt, retryAfter] of [
      [1, '0'],
      [2, 'Wed, 21 Oct 2015 07:28:00 GMT'],
    ] as const) {
      receiver.answer = () => ({ status: 429, headers: { 'retry-after': retryAfter } });
      await worker.runDue();
      const entry = await lastAttempt(hook.id);
      assert.equal(entry.attempt, attempt);
      const delay = RETRY_SCHEDULE.delaysMs[attempt - 1]!;
      assert.ok(entry.next! - entry.at >= delay * 0.9, `Retry-After ${retryAfter}: ${entry.next! - entry.at} ms`);
      const before = receiver.received.length;
      await worker.runDue();
      assert.equal(receiver.received.length, before, 'nothing more at once');
      ctx.clock.advance(Math.max(0, entry.next! - ctx.clock.now()));
    }
  });

  it('disables the webhook on 410 Gone, sends it nothing more until it is turned on again', async () => {
    const form = await makeForm(a);
    const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/gone` }), 'create');
    receiver.answer = () => ({ status: 410 });
    await submit(a, form, 'gone');
    await worker.runDue();
    const entry = await lastAttempt(hook.id);
    assert.deepEqual([entry.responseStatus, entry.outcome, entry.next], [410, 'failed', null]);
    const disabled = await ok(a.get(`/webhook/${hook.id}`), 'read');
    assert.equal(disabled.state, 'disabled');
    assert.match(disabled.failureReason, /410 Gone/);
    const job = await ctx.db
      .selectFrom('jobs')
      .select('state')
      .where('kind', '=', 'webhooks.deliver')
      .executeTakeFirstOrThrow();
    assert.equal(job.state, 'done', 'no retry after a 410');

    await submit(a, form, 'unsent');
    ctx.clock.advance(DAY);
    await worker.runDue();
    assert.equal(receiver.received.length, 1);

    receiver.answer = () => ({ status: 200 });
    await ok(a.put(`/webhook/${hook.id}`, { active: true }), 'turn on');
    await submit(a, form, 'heard again');
    await worker.runDue();
    assert.equal(receiver.received.length, 2);
    assert.equal((await ok(a.get(`/webhook/${hook.id}`), 'read')).state, 'active');
  });

  it('keeps the delivery log as long as JOB_RETENTION_DAYS, like the jobs it belongs to', async () => {
    const form = await makeForm(a);
    const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/kept` }), 'create');
    await submit(a, form, 'old');
    await worker.runDue();
    ctx.clock.advance((app.config.jobRetentionDays - 1) * DAY);
    await submit(a, form, 'newer');
    await worker.runDue();
    assert.equal((await deliveryLog(a, hook.id)).length, 2);
    ctx.clock.advance(2 * DAY);
    const tools = {
      signal: new AbortController().signal,
      checkpoint: async () => {},
      replacePayload: async () => {},
      atEnd: () => {},
    };
    await pruneJob.handler(ctx, { id: 0, kind: pruneJob.name, payload: {}, progress: undefined, attempt: 1 }, tools);
    const log = await deliveryLog(a, hook.id);
    assert.equal(log.length, 1, 'the older attempt went with its job');
    assert.equal(
      JSON.parse(receiver.received.find((r) => r.headers['webhook-id'] === log[0].messageId)!.body.toString()).data
        .data[0].value,
      'newer',
    );
  });
});

describe(`webhook addresses (${dialectName})`, () => {
  let app: TestApp;
  let receiver: Receiver;
  let a: TestAccount;

  before(async () => {
    // WEBHOOK_ALLOW_PRIVATE is off, as it is by default.
    app = await startTestApp();
    receiver = await startReceiver();
    a = await app.account('A');
  });
  after(async () => {
    await receiver.close();
    await app.close();
  });

  it('refuses loopback, private, link-local, CGNAT, metadata and other internal addresses when connecting, after DNS', async () => {
    assert.equal(app.config.webhookAllowPrivate, false);
    const port = receiver.port;
    const targets: [string, RegExp][] = [
      // A name: judged on what it resolves to.
      [`http://localhost:${port}/`, /localhost: it resolves to (127\.0\.0\.1|::1), a loopback address/],
      [`http://127.0.0.1:${port}/`, /127\.0\.0\.1, a loopback address/],
      [`http://[::1]:${port}/`, /::1, a loopback address/],
      [`http://[::ffff:127.0.0.1]:${port}/`, /::ffff:7f00:1, a loopback address/],
      [`http://0.0.0.0:${port}/`, /0\.0\.0\.0, a unspecified address/],
      ['http://169.254.169.254/latest/meta-data/', /169\.254\.169\.254, a linkLocal address/],
      ['http://[fd00:ec2::254]/', /fd00:ec2::254, a uniqueLocal address/],
      ['http://10.1.2.3/', /10\.1\.2\.3, a private address/],
      ['http://192.168.0.1/', /a private address/],
      ['http://172.16.0.1/', /a private address/],
      ['http://100.100.100.200/', /a carrierGradeNat address/],
      ['http://224.0.0.1/', /a multicast address/],
      ['http://[fe80::1]/', /a linkLocal address/],
    ];
    const form = await makeForm(a);
    const hooks: number[] = [];
    for (const [url] of targets) hooks.push((await ok(a.post(`/form/${form.id}/webhook`, { url }), url)).id);
    await submit(a, form, 'to nowhere');
    const worker = createWorker(app.server.ctx, { kinds: jobKinds });
    await worker.runDue();
    assert.equal(receiver.received.length, 0, 'nothing reached the receiver');
    for (const [i, [url, reason]] of targets.entries()) {
      const log = await deliveryLog(a, hooks[i]!);
      assert.equal(log.length, 1, url);
      assert.equal(log[0].outcome, 'failed', url);
      assert.equal(log[0].responseStatus, null, url);
      assert.match(log[0].error, /^refused to connect to /, url);
      assert.match(log[0].error, reason, url);
      assert.match(log[0].error, /WEBHOOK_ALLOW_PRIVATE/, url);
      assert.ok(log[0].nextAttempt !== null, `${url}: a refusal is a failed attempt like any other`);
    }
  });
});

describe(`webhook deliveries across a worker crash (${dialectName})`, () => {
  const SECRET_KEY = 'a secret key that the API and the worker processes share';
  let app: TestApp;
  let receiver: Receiver;
  let a: TestAccount;

  before(async () => {
    app = await startTestApp({ SECRET_KEY, WEBHOOK_ALLOW_PRIVATE: 'true' });
    receiver = await startReceiver();
    a = await app.account('A');
  });
  after(async () => {
    await receiver.close();
    await app.close();
  });

  /** `formwork worker`, the production command, on the test app's database. */
  function startWorkerProcess() {
    const child = spawn(process.execPath, cliArgs('worker'), {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: app.config.dataDir,
        LOG_LEVEL: 'silent',
        SECRET_KEY,
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WORKER_POLL_MS: '50',
        WORKER_CONCURRENCY: '4',
        // The lease of a killed worker's jobs runs out this soon (real time: it is another process),
        // and a delivery's timeout must be shorter than the lease.
        JOB_LEASE_SECONDS: '5',
        WEBHOOK_TIMEOUT_MS: '4000',
        ...(app.config.databaseUrl ? { DATABASE_URL: app.config.databaseUrl } : {}),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.once('exit', (code, signal) => resolve(signal ?? code)),
    );
    return { child, exited, stderr: () => stderr };
  }

  it('delivers every event after a worker is killed with deliveries in flight, repeating them with the same webhook-id', async () => {
    const form = await makeForm(a);
    const hook = await ok(a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/crash` }), 'create');
    const total = 10;
    const submissions: number[] = [];
    for (let i = 0; i < total; i++) submissions.push((await submit(a, form, `event ${i}`)).id);

    // The first worker's deliveries reach the receiver, which never answers them.
    receiver.answer = () => 'hang';
    const first = startWorkerProcess();
    try {
      await receiver.waitFor(4);
    } finally {
      first.child.kill('SIGKILL');
    }
    assert.equal(await first.exited, 'SIGKILL', first.stderr());
    receiver.dropHanging();
    const inFlight = receiver.received.map((r) => ({
      id: String(r.headers['webhook-id']),
      body: r.body,
    }));
    assert.ok(inFlight.length >= 4);

    const answered = new Map<number, string[]>();
    receiver.answer = (r) => {
      const body = JSON.parse(r.body.toString());
      answered.set(body.submissionId, [...(answered.get(body.submissionId) ?? []), String(r.headers['webhook-id'])]);
      return { status: 200 };
    };
    const second = startWorkerProcess();
    try {
      const deadline = Date.now() + 60_000;
      while (answered.size < total) {
        assert.ok(Date.now() < deadline, `only ${answered.size} of ${total} events delivered: ${second.stderr()}`);
        await sleep(50);
      }
    } finally {
      second.child.kill('SIGTERM');
    }
    assert.equal(await second.exited, 0, second.stderr());

    assert.deepEqual(
      [...answered.keys()].sort((x, y) => x - y),
      submissions,
    );
    // Each event kept its webhook-id through the crash: the receiver can tell a repeat.
    const idsByEvent = new Map<number, Set<string>>();
    for (const r of receiver.received) {
      const body = JSON.parse(r.body.toString());
      idsByEvent.set(
        body.submissionId,
        (idsByEvent.get(body.submissionId) ?? new Set()).add(String(r.headers['webhook-id'])),
      );
    }
    for (const [submissionId, ids] of idsByEvent) assert.equal(ids.size, 1, `submission ${submissionId}`);
    for (const held of inFlight) {
      const repeat = receiver.received.filter((r) => r.headers['webhook-id'] === held.id);
      assert.ok(repeat.length >= 2, `${held.id} was sent again`);
      assert.ok(repeat.every((r) => r.body.equals(held.body)));
    }
    const log = await deliveryLog(a, hook.id, '?pageSize=100');
    const delivered = log.filter((e) => e.outcome === 'delivered');
    assert.equal(new Set(delivered.map((e) => e.messageId)).size, total);
    assert.ok(
      delivered.filter((e) => inFlight.some((h) => h.id === e.messageId)).every((e) => e.attempt === 2),
      'the attempt that died counts',
    );
  });
});
