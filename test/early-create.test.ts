/**
 * A submission's create answered before Fastify routes it (src/modules/submissions/early-create.ts):
 * the route's answer, headers and all, its refusals by the create included; everything it does
 * not decide given to the route with its body, counted once against the quota.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { sharedCountsOf } from '../src/db/coalescer.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { sample } from './support/prometheus.js';
import { awayFromMinuteEnd } from './support/quota.js';

/** Headers that any two answers of one kind share: all but those that differ between any two. */
function lasting(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of headers)
    if (!['date', 'x-request-id', 'ratelimit', 'content-length'].includes(name)) out[name] = value;
  return out;
}

/** A submission's answer without what differs between two submissions of the same values. */
function sameParts(body: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, timestamp: _t, updated: _u, ...rest } = body;
  return rest;
}

/** A body sent in chunks, without a Content-Length: a request that is never taken early. */
function chunked(text: string): { body: ReadableStream<Uint8Array>; duplex: 'half' } {
  return { body: new Blob([text]).stream(), duplex: 'half' };
}

/** The quota's remaining calls, from a RateLimit header (`"minute";r=999;t=42`). */
const remaining = (res: Response) => Number(/;r=(\d+);/.exec(res.headers.get('ratelimit') ?? '')?.[1]);

describe(`a submission's create answered before Fastify (${dialectName})`, () => {
  let app: TestApp;
  let owner: TestAccount;
  let formId: number;
  let emailField: number;
  let nameField: number;
  const answered = () => app.server.app.earlyRoutes.answered;

  before(async () => {
    app = await startTestApp({ PUBLIC_URL: 'https://forms.test', RATE_LIMIT_PER_MINUTE: '100000' });
    owner = await app.account();
    const res = await owner.post('/forms', {
      name: 'Early create',
      fields: [
        { type: 'text', label: 'Name', required: true },
        { type: 'email', label: 'Email', unique: true },
      ],
    });
    assert.equal(res.status, 200, res.text);
    formId = res.body.id;
    const fields = res.body.fields as { id: number }[];
    nameField = fields[0]!.id;
    emailField = fields[1]!.id;
  });
  after(() => app.close());

  /** A POST of body (text as it is) to path, with the owner's token unless another is given. */
  async function post(
    body: string,
    options: { path?: string; token?: string; headers?: Record<string, string>; chunked?: boolean } = {},
  ) {
    const before = answered();
    const res = await fetch(`${app.url}/api/v2025${options.path ?? `/forms/${formId}/submissions`}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${options.token ?? owner.token}`,
        'content-type': 'application/json',
        ...options.headers,
      },
      ...(options.chunked ? chunked(body) : { body }),
    } as RequestInit);
    const text = await res.text();
    return { res, text, json: JSON.parse(text) as Record<string, unknown>, early: answered() > before };
  }
  const values = (name: string, email?: string) =>
    JSON.stringify({
      fields: [{ id: nameField, value: name }, ...(email === undefined ? [] : [{ id: emailField, value: email }])],
    });
  /** The same request given to the route: a body in chunks is never taken early. */
  const routed = (body: string, options: Parameters<typeof post>[1] = {}) => post(body, { ...options, chunked: true });

  it('answers a plain create as the route does: status, headers and body', async () => {
    const early = await post(values('Ada', 'ada@example.com'), {
      headers: { 'x-request-id': 'early-create-1', 'user-agent': 'early-test/1' },
    });
    const route = await routed(values('Ada', 'ada2@example.com'), { headers: { 'user-agent': 'early-test/1' } });
    assert.equal(early.early, true, 'answered early');
    assert.equal(route.early, false, 'answered by the route');
    assert.equal(early.res.status, 200, early.text);
    assert.equal(route.res.status, 200, route.text);
    assert.equal(early.res.headers.get('x-request-id'), 'early-create-1');
    assert.equal(early.res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(early.res.headers.get('strict-transport-security'), 'max-age=31536000');
    assert.match(early.res.headers.get('ratelimit') ?? '', /;r=\d+;/);
    assert.deepEqual(lasting(early.res.headers), lasting(route.res.headers));
    const email = (b: Record<string, unknown>) =>
      (b.data as { field: number; value: unknown }[]).find((d) => d.field === emailField);
    assert.deepEqual(email(early.json)?.value, 'ada@example.com');
    // The form's first name or email field names a submission: the email here.
    const withoutEmail = (b: Record<string, unknown>) => ({
      ...sameParts(b),
      prettyName: undefined,
      data: (b.data as { field: number }[]).filter((d) => d.field !== emailField),
    });
    assert.deepEqual(withoutEmail(early.json), withoutEmail(route.json));
    assert.equal(early.json.userAgent, 'early-test/1');
    assert.equal(early.json.remoteAddr, route.json.remoteAddr);

    const stored = await owner.get(`/submissions/${early.json.id as number}`);
    assert.equal(stored.status, 200, stored.text);
    assert.deepEqual(sameParts(stored.body), sameParts(early.json), 'the answer is the stored submission');
    assert.equal((await owner.get(`/forms/${formId}/submissions/count`)).body.count, 2);
  });

  it("answers the create's refusals as the route does, counted in the metrics under the route", async () => {
    const series = { method: 'POST', route: '/api/v2025/forms/:formId/submissions', status: '404' };
    const count = async () =>
      sample((await app.request('GET', '/metrics')).text, 'formwork_http_requests_total', series) ?? 0;
    const countBefore = await count();
    const cases: { body: string; path?: string; status: number; code: string }[] = [
      { body: values('Bea', 'ada@example.com'), status: 400, code: 'not_unique' },
      { body: values('Bea', 'not an email'), status: 400, code: 'invalid_submission' },
      { body: JSON.stringify({ fields: [] }), status: 400, code: 'required_field_missing' },
      { body: values('Bea'), path: '/forms/2147483000/submissions', status: 404, code: 'form_not_found' },
    ];
    for (const c of cases) {
      const early = await post(c.body, { path: c.path });
      const route = await routed(c.body, { path: c.path });
      assert.equal(early.early, true, `${c.code}: answered early`);
      assert.equal(route.early, false);
      assert.equal(early.res.status, c.status, early.text);
      assert.equal(early.json.code, c.code, early.text);
      assert.equal(route.res.status, c.status, route.text);
      assert.deepEqual(early.json, route.json, `${c.code}: the same error body`);
      assert.deepEqual(lasting(early.res.headers), lasting(route.res.headers));
    }
    assert.equal(await count(), countBefore + 2, 'both 404s in the route series');
    assert.equal((await owner.get(`/forms/${formId}/submissions/count`)).body.count, 2, 'nothing written');
  });

  it('gives the route, with its body, what it does not decide, and the quota counts each call once', async () => {
    const member = await owner.post('/users', { email: 'early-create@example.com', name: 'M', role: 'member' });
    assert.equal(member.status, 200, member.text);
    await owner.put(`/users/${member.body.id}/permissions/${formId}`, { level: 'submissions' });
    const memberToken = (await createPersonalToken(app.server.ctx, member.body.id)).token;
    const reader = await owner.post('/tokens', { name: 'reader', scopes: ['submissions:read'] });
    const other = await app.account();
    const cases: { body: string; options?: Parameters<typeof post>[1]; status: number; code?: string }[] = [
      { body: '{"fields": [', status: 400, code: 'invalid_json' },
      { body: '{"fields": "none"}', status: 400, code: 'validation_failed' },
      {
        body: JSON.stringify({ fields: [{ id: nameField, value: 'a\u0000b' }] }),
        status: 400,
        code: 'invalid_characters',
      },
      { body: values('Cy'), options: { token: reader.body.token }, status: 403, code: 'insufficient_scope' },
      { body: values('Cy'), options: { token: other.token }, status: 404, code: 'form_not_found' },
      { body: values('Cy'), options: { token: memberToken }, status: 200 },
      { body: values('Cy'), options: { headers: { 'content-type': 'text/plain' } }, status: 415 },
      { body: values('Cy'), options: { path: `/forms/${formId}/submissions?x=1` }, status: 400 },
    ];
    for (const c of cases) {
      // Three calls compared by the quota's count: all in one of its windows.
      await awayFromMinuteEnd(3000);
      const first = await post(values('Quota'));
      const res = await post(c.body, c.options);
      const next = await post(values('Quota'));
      assert.equal(
        res.early,
        c.status === 404,
        `${c.code ?? c.status}: ${res.early ? 'answered early' : 'left to the route'}`,
      );
      assert.equal(res.res.status, c.status, res.text);
      if (c.code) assert.equal(res.json.code, c.code, res.text);
      assert.equal(first.early && next.early, true);
      if (!c.options?.token) assert.equal(remaining(first.res) - remaining(next.res), 2, `${c.code}: counted once`);
    }
    const bad = await post(values('Cy'), { token: 'fw_pat_nosuchtokenxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' });
    assert.equal(bad.res.status, 401);
    assert.equal(bad.json.code, 'token_invalid');
    const failures = sample((await app.request('GET', '/metrics')).text, 'formwork_http_requests_total', {
      method: 'POST',
      route: '/api/v2025/forms/:formId/submissions',
      status: '401',
    });
    assert.equal(failures, 1, 'the 401 answered once, by the route');
  });

  it('runs a create under an Idempotency-Key as the route does: the first answer replayed, another body refused', async () => {
    const body = values('Kay', 'kay@example.com');
    const first = await post(body, { headers: { 'idempotency-key': 'early-key' } });
    assert.equal(first.early, true);
    assert.equal(first.res.status, 200, first.text);
    assert.equal(first.res.headers.get('idempotent-replayed'), null);
    const early = await post(body, { headers: { 'idempotency-key': 'early-key' } });
    const route = await routed(body, { headers: { 'idempotency-key': 'early-key' } });
    assert.equal(early.early, true, 'the retry answered early');
    assert.equal(route.early, false);
    for (const retry of [early, route]) {
      assert.equal(retry.res.status, 200, retry.text);
      assert.equal(retry.res.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(retry.json, first.json, 'the first answer');
    }
    assert.deepEqual(lasting(early.res.headers), lasting(route.res.headers));
    const other = await post(values('Kay'), { headers: { 'idempotency-key': 'early-key' } });
    const otherRouted = await routed(values('Kay'), { headers: { 'idempotency-key': 'early-key' } });
    assert.equal(other.early, true);
    assert.equal(other.res.status, 422, other.text);
    assert.deepEqual(other.json, otherRouted.json);
    const bad = await post(body, { headers: { 'idempotency-key': 'not visible ascii' } });
    assert.equal(bad.res.status, 400, bad.text);
    assert.deepEqual(bad.json, (await routed(body, { headers: { 'idempotency-key': 'not visible ascii' } })).json);
    const kept = await owner.get(`/forms/${formId}/submissions?keyword=kay`);
    assert.equal(kept.status, 200, kept.text);
    assert.equal(kept.body.submissions.length, 1, 'one submission for the key, however it was retried');
  });

  it('drops a request whose body never comes whole, writing nothing, and goes on serving', async () => {
    const before = (await owner.get(`/forms/${formId}/submissions/count`)).body.count as number;
    const port = Number(new URL(app.url).port);
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          `POST /api/v2025/forms/${formId}/submissions HTTP/1.1\r\nHost: forms.test\r\n` +
            `Authorization: Bearer ${owner.token}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"fields":`,
        );
        setTimeout(() => socket.destroy(), 50);
      });
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    const after = await post(values('Dee'));
    assert.equal(after.res.status, 200, after.text);
    assert.equal((await owner.get(`/forms/${formId}/submissions/count`)).body.count, before + 1);
  });

  it("acts for a token as last read only while the create's statement finds it live, its role unchanged", async () => {
    const count = async () => (await owner.get(`/forms/${formId}/submissions/count`)).body.count as number;
    // On PostgreSQL, a create for a token this process has read makes no look-up of it.
    const lookUps = () => sharedCountsOf('token_look_up').calls;
    const withoutLookUp = async (res: Promise<Awaited<ReturnType<typeof post>>>) => {
      const at = lookUps();
      const answer = await res;
      if (dialectName === 'postgres') assert.equal(lookUps(), at, 'no look-up');
      return answer;
    };

    // Revoked: refused at once, though this process read the token live a moment before.
    const made = await owner.post('/tokens', { name: 'revoked while kept' });
    assert.equal(made.status, 200, made.text);
    const first = await post(values('Read'), { token: made.body.token });
    assert.equal(first.res.status, 200, first.text);
    const kept = await withoutLookUp(post(values('Kept'), { token: made.body.token }));
    assert.equal(kept.res.status, 200, kept.text);
    assert.equal(kept.early, true);
    let at = await count();
    assert.equal((await owner.delete(`/tokens/${made.body.id}`)).status, 200);
    const revoked = await post(values('After revocation'), { token: made.body.token });
    assert.equal(revoked.res.status, 401, revoked.text);
    assert.equal(revoked.json.code, 'token_invalid');
    assert.equal(await count(), at, 'nothing written for a revoked token');

    // A new role: an admin made a member (no level on the form) is refused as a member.
    const user = await owner.post('/users', { email: 'kept-admin@example.com', name: 'A', role: 'admin' });
    assert.equal(user.status, 200, user.text);
    const adminToken = (await createPersonalToken(app.server.ctx, user.body.id)).token;
    assert.equal((await post(values('By an admin'), { token: adminToken })).res.status, 200);
    assert.equal((await withoutLookUp(post(values('Kept'), { token: adminToken }))).res.status, 200);
    at = await count();
    const demoted = await owner.put(`/users/${user.body.id}`, { role: 'member' });
    assert.equal(demoted.status, 200, demoted.text);
    const asMember = await post(values('By a member'), { token: adminToken });
    assert.equal(asMember.res.status, 403, asMember.text);
    assert.equal(asMember.json.code, 'form_permission_required');
    assert.equal(await count(), at, 'nothing written for a role that no longer allows it');

    // Creates for live tokens that share a statement with one for a revoked token go in; it does not.
    const many = await owner.post('/tokens', { name: 'revoked among others' });
    assert.equal((await post(values('Read once'), { token: many.body.token })).res.status, 200);
    assert.equal((await withoutLookUp(post(values('Kept'), { token: many.body.token }))).res.status, 200);
    at = await count();
    await owner.delete(`/tokens/${many.body.id}`);
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        post(values(`Together ${i}`), i % 6 === 0 ? { token: many.body.token } : {}),
      ),
    );
    assert.deepEqual(
      answers.map((a) => a.res.status),
      Array.from({ length: 24 }, (_, i) => (i % 6 === 0 ? 401 : 200)),
    );
    assert.equal(await count(), at + 20);
  });
});

describe(`the early create's body deadline (${dialectName})`, () => {
  let app: TestApp;
  after(() => app?.close());

  it('answers a body that trickles past REQUEST_TIMEOUT_MS with 408 and closes the connection, writing nothing', async () => {
    app = await startTestApp({ REQUEST_TIMEOUT_MS: '500' });
    const owner = await app.account();
    const form = await owner.post('/forms', { name: 'Slow', fields: [{ type: 'text', label: 'Name' }] });
    const port = Number(new URL(app.url).port);
    const started = Date.now();
    const { text, closed } = await new Promise<{ text: string; closed: boolean }>((resolve, reject) => {
      let text = '';
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          `POST /api/v2025/forms/${form.body.id}/submissions HTTP/1.1\r\nHost: forms.test\r\n` +
            `Authorization: Bearer ${owner.token}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{`,
        );
        const drip = setInterval(() => socket.writable && socket.write(' '), 100);
        socket.on('close', () => {
          clearInterval(drip);
          resolve({ text, closed: true });
        });
      });
      socket.on('data', (chunk) => (text += chunk.toString()));
      socket.on('error', reject);
      setTimeout(() => resolve({ text, closed: false }), 5000).unref();
    });
    assert.ok(closed, 'the connection is closed');
    assert.ok(Date.now() - started < 4000, 'within the deadline, not at the end of the drip');
    assert.match(text, /^HTTP\/1\.1 408 /, text);
    assert.match(text, /\r\nconnection: close\r\n/i);
    assert.deepEqual(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)), {
      status: 'error',
      error: 'The request body did not arrive within 500 ms',
      code: 'body_timeout',
    });
    assert.equal((await owner.get(`/forms/${form.body.id}/submissions/count`)).body.count, 0);
    assert.equal((await owner.post(`/forms/${form.body.id}/submissions`, { fields: [] })).status, 200);
  });
});

describe(`the early create behind a proxy (${dialectName})`, () => {
  let app: TestApp;
  after(() => app?.close());

  it("keeps the client's address that TRUST_PROXY believes, as the route does", async () => {
    app = await startTestApp({ TRUST_PROXY: '1' });
    const owner = await app.account();
    const form = await owner.post('/forms', { name: 'Proxied', fields: [{ type: 'text', label: 'Name' }] });
    const field = form.body.fields[0].id as number;
    const body = JSON.stringify({ fields: [{ id: field, value: 'Eve' }] });
    const at = app.server.app.earlyRoutes.answered;
    const send = (inChunks: boolean) =>
      fetch(`${app.url}/api/v2025/forms/${form.body.id}/submissions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${owner.token}`,
          'content-type': 'application/json',
          'x-forwarded-for': '198.51.100.4, 203.0.113.9',
        },
        ...(inChunks ? chunked(body) : { body }),
      } as RequestInit).then(async (res) => (await res.json()) as { remoteAddr: string });
    const early = await send(false);
    assert.equal(app.server.app.earlyRoutes.answered, at + 1);
    const routed = await send(true);
    assert.equal(app.server.app.earlyRoutes.answered, at + 1, 'in chunks: answered by the route');
    assert.equal(early.remoteAddr, '203.0.113.9', 'one hop trusted: the address that proxy saw');
    assert.equal(routed.remoteAddr, early.remoteAddr);
  });
});
