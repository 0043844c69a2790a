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

  it('answers a page this process has read as the route does, headers and all', async () => {
    const before = answered();
    // Read once by the route (nothing is kept yet), then kept.
    const first = await fetch(`${app.url}${form.path}`);
    assert.equal(first.status, 200);
    await first.text();
    assert.equal(answered(), before, 'a page not yet read goes to the route');
    const early = await fetch(`${app.url}${form.path}`);
    assert.equal(answered(), before + 1, 'answered early');
    // A query string leaves the request to Fastify: the route's own answer.
    const routed = await fetch(`${app.url}${form.path}?utm_source=newsletter`);
    assert.equal(answered(), before + 1, 'answered by the route');
    assert.equal(early.status, 200);
    assert.equal(routed.status, 200);
    assert.deepEqual(lasting(early.headers), lasting(routed.headers));
    assert.equal(early.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(early.headers.get('strict-transport-security'), 'max-age=31536000');
    assert.match(early.headers.get('content-security-policy')!, /frame-ancestors \*/);
    assert.match(early.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
    const [earlyHtml, routedHtml] = [await early.text(), await routed.text()];
    assert.match(earlyHtml, /name="_fw" value="[^"]+"/, 'a page token of its own');
    assert.equal(withoutToken(earlyHtml), withoutToken(routedHtml));
  });

  it("keeps a sane x-request-id, counts the view, and the metrics count it under the route's pattern", async () => {
    const series = { method: 'GET', route: '/f/:viewKey', status: '200' };
    const count = async () =>
      sample((await app.request('GET', '/metrics')).text, 'formwork_http_requests_total', series);
    const views = async () => (await owner.get(`/forms/${form.id}/stats`)).body.totals.views as number;
    const viewsBefore = await views();
    // Reading the statistics wrote the counts: on SQLite any write ends the trust in a kept page.
    await (await fetch(`${app.url}${form.path}`)).text();
    const [countBefore, before] = [(await count()) ?? 0, answered()];
    const res = await fetch(`${app.url}${form.path}`, { headers: { 'x-request-id': 'balancer-42' } });
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(answered(), before + 1);
    assert.equal(res.headers.get('x-request-id'), 'balancer-42');
    const odd = await fetch(`${app.url}${form.path}`, { headers: { 'x-request-id': 'no spaces <allowed>' } });
    await odd.text();
    assert.match(odd.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
    assert.equal(await count(), countBefore + 2);
    assert.equal(await views(), viewsBefore + 3);
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
