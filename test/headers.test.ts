/**
 * Security headers on every kind of answer, and the API page still working under its CSP in
 * a real headless Chromium (skipped without /usr/bin/chromium unless FORMWORK_TEST_REQUIRE_BROWSER).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { Browser } from 'playwright-core';
import { BROWSER_SUITE_MS, BROWSER_WAIT_MS, newBrowserPage, skipBrowser, startWithBrowser } from './support/browser.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';

function assertApiHeaders(res: Reply | Response, what: string, cacheControl = 'no-store'): void {
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff', what);
  assert.equal(res.headers.get('cache-control'), cacheControl, what);
}

describe(`security headers (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  before(async () => {
    app = await startTestApp({ BODY_LIMIT: '2048' });
    a = await app.account();
  });
  after(() => app.close());

  it('marks every API answer nosniff and no-store, errors and unknown routes included', async () => {
    const form = await a.post('/forms', { name: 'F' });
    assertApiHeaders(form, 'created');
    assertApiHeaders(await a.get('/forms'), 'list');
    assertApiHeaders(await app.request('GET', '/api/v2/forms.json', { token: a.token }), 'legacy path');
    assertApiHeaders(await app.request('GET', '/api/v2025/forms'), '401');
    assertApiHeaders(await a.get('/forms/999999'), '404');
    assertApiHeaders(await app.request('GET', '/nowhere'), 'unknown route');
    assertApiHeaders(
      await a.post('/forms', undefined, { raw: 'name=x', headers: { 'content-type': 'text/plain' } }),
      '415',
    );
    assertApiHeaders(await a.post('/forms', { name: 'x'.repeat(4000) }), '413');
    assertApiHeaders(await a.post('/forms', { name: '' }), '400');
    assertApiHeaders(await app.request('GET', '/healthz'), 'health');
    assertApiHeaders(
      await app.request('POST', '/oauth2/token', {
        raw: 'grant_type=password',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      'token endpoint',
    );
    const revoke = await app.request('POST', '/oauth2/revoke', {
      raw: 'token=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(revoke.status, 401);
    assertApiHeaders(revoke, 'revocation without a client');
    // A route that chose its own caching keeps it.
    assertApiHeaders(await a.get(`/forms/${form.body.id}`), 'form read', 'private, no-cache');
    assertApiHeaders(
      await app.request('GET', '/.well-known/oauth-authorization-server'),
      'metadata',
      'public, max-age=3600',
    );
    // No HSTS over a plain http PUBLIC_URL.
    assert.equal((await a.get('/forms')).headers.get('strict-transport-security'), null);
  });

  it('sends a CSP and frame protection with the API page and its files', async () => {
    for (const path of ['/docs', '/docs/', '/docs/static/swagger-ui-bundle.js', '/docs/json']) {
      const res = await fetch(`${app.url}${path}`);
      assert.equal(res.status, 200, path);
      const csp = res.headers.get('content-security-policy') ?? '';
      assert.match(csp, /frame-ancestors 'none'/, path);
      assert.match(csp, /script-src 'self'(;|$)/, `${path}: no inline or remote script`);
      assert.match(csp, /object-src 'none'/, path);
      assert.equal(res.headers.get('x-frame-options'), 'DENY', path);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
      await res.arrayBuffer();
    }
  });

  it('sends HSTS when PUBLIC_URL is https', async () => {
    const secure = await startTestApp({ PUBLIC_URL: 'https://forms.example.com' });
    try {
      const acc = await secure.account();
      for (const res of [
        await acc.get('/forms'),
        await secure.request('GET', '/nowhere'),
        await fetch(`${secure.url}/docs/`),
      ]) {
        assert.equal(res.headers.get('strict-transport-security'), 'max-age=31536000');
      }
    } finally {
      await secure.close();
    }
  });
});

describe(
  `the API page in Chromium under its CSP (${dialectName})`,
  { skip: skipBrowser, timeout: BROWSER_SUITE_MS },
  () => {
    let app: TestApp;
    let browser: Browser;
    before(async () => {
      ({ app, browser } = await startWithBrowser(startTestApp()));
    });
    after(async () => {
      await browser?.close();
      await app?.close();
    });

    it('renders the operations with no CSP violation, and refuses to be framed', async () => {
      const page = await newBrowserPage(browser);
      try {
        const violations: string[] = [];
        await page.exposeFunction('reportViolation', (v: string) => violations.push(v));
        // A string: this code runs in the page, where the DOM is (the test's own types have none).
        await page.addInitScript(
          "document.addEventListener('securitypolicyviolation', (e) => window.reportViolation(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`))",
        );
        const errors: string[] = [];
        page.on('pageerror', (e) => errors.push(e.message));
        await page.goto(`${app.url}/docs/`);
        await page.locator('.swagger-ui .info .title').filter({ hasText: 'Formwork API' }).waitFor();
        await page.locator('.opblock').first().waitFor();
        assert.ok((await page.locator('.opblock').count()) > 10, 'the operations are listed');
        // Opening an operation runs the UI's own code further (models, examples).
        await page.locator('.opblock-summary').first().click();
        await page.locator('.opblock-body').first().waitFor();
        assert.deepEqual(violations, [], 'nothing the page needs is blocked');
        assert.deepEqual(errors, []);

        // Framed by another page, it does not load.
        const framing = await newBrowserPage(browser);
        try {
          const framedResponse = framing.waitForEvent('response', (r) => r.url().startsWith(`${app.url}/docs`));
          await framing.setContent(`<iframe src="${app.url}/docs/" width="800" height="600"></iframe>`);
          await framedResponse;
          // Chromium puts its error page in the place of a page whose headers forbid the frame. The
          // frame is another origin's, so its outcome may commit in another renderer after the
          // response and the parent's load: wait for it to be either the error page or the page.
          const frameUrls = () => framing.frames().flatMap((f) => (f === framing.mainFrame() ? [] : [f.url()]));
          const settled = (urls: string[]) => urls.some((u) => /^chrome-error:|^https?:/.test(u));
          const deadline = Date.now() + BROWSER_WAIT_MS;
          while (!settled(frameUrls()) && Date.now() < deadline) await delay(50);
          const urls = frameUrls();
          assert.ok(urls.length > 0, 'the frame exists');
          assert.ok(
            urls.some((u) => u.startsWith('chrome-error:')) && !urls.some((u) => u.startsWith(app.url)),
            `the framed page was refused, frames at: ${urls.join(', ')}`,
          );
        } finally {
          await framing.close();
        }
      } finally {
        await page.close();
      }
    });
  },
);
