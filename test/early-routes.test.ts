/**
 * The hosted page of an open form answered before Fastify routes it (src/http/early-routes.ts):
 * the same answer as the route's, with what the global hooks add, counted in the same metrics
 * and views; everything else left to Fastify.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EarlyRoutes } from '../src/http/early-routes.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { sample } from './support/prometheus.js';

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
    const early = new EarlyRoutes(app.server.ctx.metrics, { publicUrl: 'http://x.test', logsRequests: true });
    early.add('/', () => ({ route: '/', headers: {}, body: Buffer.from('x') }));
    const req = { method: 'GET', url: '/', headers: {} } as never;
    assert.equal(early.handle(req, {} as never), false);
    assert.equal(early.answered, 0);
  });
});
