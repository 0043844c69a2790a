/**
 * The hosted page of an open form answered before Fastify routes it (src/http/early-routes.ts):
 * the same answer as the route's, with what the global hooks add, counted in the same metrics
 * and views; everything else left to Fastify.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EarlyRoutes } from '../src/http/early-routes.js';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { sample } from './support/prometheus.js';
import { awayFromMinuteEnd } from './support/quota.js';

/** The headers two answers of one page share: all but those that differ between any two answers. */
function lasting(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of headers) if (!['date', 'x-request-id'].includes(name)) out[name] = value;
  return out;
}

const withoutToken = (html: string) => html.replace(/name="_fw" value="[^"]*"/, 'name="_fw" value=""');

describe(`the hosted page answered before Fastify (${dialectName})`, () => {
  let app: TestApp;
  let owner: TestAccount;
  let form: { id: number; path: string };
  const answered = () => app.server.app.earlyRoutes.answered;

  before(async () => {
    app = await startTestApp({ PUBLIC_URL: 'https://forms.test' });
    owner = await app.account();
    const res = await owner.post('/forms', { name: 'Early', fields: [{ type: 'text', label: 'Name' }] });
    assert.equal(res.status, 200, res.text);
    form = { id: res.body.id, path: new URL(res.body.url).pathname };
  });
  after(() => app.close());

  let fetched = 0;
  /** A GET of the page; early says whether it was answered before Fastify. */
  async function view(headers: Record<string, string> = {}, query = '') {
    const before = answered();
    const res = await fetch(`${app.url}${form.path}${query}`, { headers });
    fetched++;
    return { res, html: await res.text(), early: answered() > before };
  }
  /**
   * A view answered early. Any write to SQLite (this process's heartbeat, the statistics'
   * flush) ends the trust in a kept page, and the next view goes to the route and keeps the
   * page again, so on a slow machine a view may need to be tried again.
   */
  async function earlyView(headers: Record<string, string> = {}) {
    for (let i = 0; i < 10; i++) {
      const got = await view(headers);
      if (got.early) return got;
    }
    assert.fail('no view of the page was answered early in 10 tries');
  }

  it('answers a page this process has read as the route does, headers and all', async () => {
    assert.equal((await view()).early, false, 'a page not yet read goes to the route');
    const early = await earlyView();
    // A query string leaves the request to Fastify: the route's own answer.
    const routed = await view({}, '?utm_source=newsletter');
    assert.equal(routed.early, false, 'answered by the route');
    assert.equal(early.res.status, 200);
    assert.equal(routed.res.status, 200);
    assert.deepEqual(lasting(early.res.headers), lasting(routed.res.headers));
    assert.equal(early.res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(early.res.headers.get('strict-transport-security'), 'max-age=31536000');
    assert.match(early.res.headers.get('content-security-policy')!, /frame-ancestors \*/);
    assert.match(early.res.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
    assert.match(early.html, /name="_fw" value="[^"]+"/, 'a page token of its own');
    assert.equal(withoutToken(early.html), withoutToken(routed.html));
  });

  it("keeps a sane x-request-id, counts the view, and the metrics count it under the route's pattern", async () => {
    const series = { method: 'GET', route: '/f/:viewKey', status: '200' };
    const count = async () =>
      sample((await app.request('GET', '/metrics')).text, 'formwork_http_requests_total', series) ?? 0;
    const views = async () => (await owner.get(`/forms/${form.id}/stats`)).body.totals.views as number;
    const [viewsBefore, countBefore, fetchedBefore] = [await views(), await count(), fetched];
    const sane = await earlyView({ 'x-request-id': 'balancer-42' });
    assert.equal(sane.res.status, 200);
    assert.equal(sane.res.headers.get('x-request-id'), 'balancer-42');
    const odd = await earlyView({ 'x-request-id': 'no spaces <allowed>' });
    assert.match(odd.res.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
    // Every view counted once, whichever way it went.
    assert.equal(await count(), countBefore + fetched - fetchedBefore);
    assert.equal(await views(), viewsBefore + fetched - fetchedBefore);
  });

  it('leaves HEAD, other paths, unknown and closed forms to Fastify', async () => {
    await (await fetch(`${app.url}${form.path}`)).text();
    const before = answered();
    assert.equal((await fetch(`${app.url}${form.path}`, { method: 'HEAD' })).status, 200);
    assert.equal((await app.request('GET', '/f/no-such-form')).status, 404);
    assert.equal((await app.request('GET', `${form.path}/`)).status, 200, 'a trailing slash, as the router takes it');
    assert.equal((await app.request('GET', `${form.path}/theme.css`)).status, 200);
    const inactive = await owner.post('/forms', {
      name: 'Shut',
      inactive: true,
      fields: [{ type: 'text', label: 'A' }],
    });
    const shut = new URL(inactive.body.url).pathname;
    for (let i = 0; i < 2; i++) assert.equal((await app.request('GET', shut)).status, 403);
    assert.equal(answered(), before);
  });

  it('is off when every request is logged (LOG_LEVEL info and below)', () => {
    const early = new EarlyRoutes(app.server.ctx.metrics, {
      publicUrl: 'http://x.test',
      logsRequests: true,
      bodyTimeoutMs: 1000,
    });
    early.add('/', () => ({ route: '/', headers: {}, body: Buffer.from('x') }));
    const req = { method: 'GET', url: '/', headers: {} } as never;
    assert.equal(early.handle(req, {} as never), false);
    assert.equal(early.answered, 0);
  });
});

describe(`a form read answered before Fastify (${dialectName})`, () => {
  let app: TestApp;
  let owner: TestAccount;
  let formId: number;
  const answered = () => app.server.app.earlyRoutes.answered;
  const series = { method: 'GET', route: '/api/v2025/forms/:formId', status: '200' };
  const count = async () =>
    sample((await app.request('GET', '/metrics')).text, 'formwork_http_requests_total', series) ?? 0;

  before(async () => {
    // A quota small enough to reach: the calls of every way must count against it once.
    app = await startTestApp({ RATE_LIMIT_PER_MINUTE: '1000', PUBLIC_URL: 'https://forms.test' });
    owner = await app.account();
    const res = await owner.post('/forms', { name: 'Read early', fields: [{ type: 'text', label: 'Name' }] });
    assert.equal(res.status, 200, res.text);
    formId = res.body.id;
  });
  after(() => app.close());

  /** A GET of the form; early says whether it was answered before Fastify. */
  async function read(query = '', headers: Record<string, string> = {}, token = owner.token) {
    const before = answered();
    const res = await fetch(`${app.url}/api/v2025/forms/${formId}${query}`, {
      headers: { authorization: `Bearer ${token}`, ...headers },
    });
    return { res, text: await res.text(), early: answered() > before };
  }
  /** A read answered early, on SQLite (see earlyView above for why it may take a few tries). */
  async function earlyRead(query = '') {
    for (let i = 0; i < 10; i++) {
      const got = await read(query);
      if (got.early) return got;
    }
    assert.fail('no read of the form was answered early in 10 tries');
  }
  const remaining = (res: Response) => Number(/"burst";r=(\d+)/.exec(res.headers.get('ratelimit') ?? '')?.[1]);

  it('answers on SQLite as the route does, headers and all; on PostgreSQL the route answers', async (t) => {
    for (const query of ['', '?withFields=true', '?withFields=false']) {
      const first = await read(query);
      // withFields=false is the answer of no query, made by then.
      if (query !== '?withFields=false') assert.equal(first.early, false, 'an answer not yet made goes to the route');
      // An If-None-Match that names another version leaves the read to the route: a 200 all the same.
      const routed = await read(query, { 'if-none-match': '"other"' });
      assert.equal(routed.early, false);
      if (dialectName === 'postgres') {
        for (let i = 0; i < 3; i++) assert.equal((await read(query)).early, false);
        continue;
      }
      const early = await earlyRead(query);
      assert.equal(early.res.status, 200);
      assert.equal(early.text, routed.text);
      const ignore = ['date', 'x-request-id', 'ratelimit'];
      const kept = (h: Headers) => [...h].filter(([name]) => !ignore.includes(name));
      assert.deepEqual(kept(early.res.headers), kept(routed.res.headers));
      assert.equal(early.res.headers.get('strict-transport-security'), 'max-age=31536000');
      assert.match(early.res.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
      assert.match(early.res.headers.get('ratelimit')!, /^"burst";r=\d+;t=\d+$/);
    }
    if (dialectName === 'postgres') t.diagnostic('PostgreSQL has no change epoch: every read goes to the route');
  });

  it('counts every read once against the quota and in the metrics, whichever way it went', async () => {
    const before = await count();
    // Seven reads compared by the quota's count: all in one of its windows.
    await awayFromMinuteEnd(5000);
    const first = await read();
    let last = remaining(first.res);
    let early = 0;
    for (let i = 0; i < 6; i++) {
      // Every other read goes to the route (the If-None-Match), the rest early where they can.
      const got = await read('', i % 2 === 0 ? { 'if-none-match': '"other"' } : {});
      assert.equal(got.res.status, 200);
      assert.equal(remaining(got.res), last - 1, `read ${i}: one call counted`);
      last = remaining(got.res);
      if (got.early) early++;
    }
    if (dialectName === 'sqlite') assert.ok(early > 0, 'some reads were answered early');
    // The /metrics calls in between are not in this series: the seven reads only.
    assert.equal(await count(), before + 7);
  });

  it('leaves to the route whatever it does not hold: another query, a member, a scope short, a revoked token, another account', async () => {
    if (dialectName === 'sqlite') await earlyRead('?withFields=true');
    const at = answered();
    assert.equal((await read('?withFields=1')).res.status, 400, 'refused by the route');
    assert.equal((await read('?withFields=true&x=1')).res.status, 400);
    assert.equal((await read('/')).res.status, 200, 'a trailing slash, as the router takes it');
    assert.equal((await fetch(`${app.url}/api/v2025/forms/${formId}`, { method: 'HEAD' })).status, 401);
    assert.equal((await read('', {}, 'fw_pat_nosuchtokenxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')).res.status, 401);

    const member = await owner.post('/users', { email: 'early-member@example.com', name: 'M', role: 'member' });
    assert.equal(member.status, 200, member.text);
    await owner.put(`/users/${member.body.id}/permissions/${formId}`, { level: 'view' });
    const memberToken = (await createPersonalToken(app.server.ctx, member.body.id)).token;
    const writer = await owner.post('/tokens', { name: 'writer', scopes: ['forms:write'] });
    const other = await app.account();
    for (let i = 0; i < 3; i++) {
      assert.equal((await read('', {}, memberToken)).res.status, 200, 'a member: the route reads the level');
      assert.equal((await read('', {}, writer.body.token)).res.status, 403);
      assert.equal((await read('', {}, other.token)).res.status, 404);
    }
    assert.equal(answered(), at, 'none of these was answered early');

    const made = await owner.post('/tokens', { name: 'short-lived' });
    for (let i = 0; i < 3; i++) await read('', {}, made.body.token);
    await owner.delete(`/tokens/${made.body.id}`);
    assert.equal((await read('', {}, made.body.token)).res.status, 401, 'revoked: refused at once');
  });
});
