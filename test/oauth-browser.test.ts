/**
 * The OAuth 2.0 authorization code flow end to end in a real headless Chromium: the browser
 * signs in and consents on the server's own pages and is redirected to a client's callback
 * served by this test; the client side (code exchange, API calls, refresh, revocation,
 * introspection) runs here with fetch.
 *
 * Needs /usr/bin/chromium (Debian's package; playwright-core only drives it, it downloads
 * nothing). Without it the suite is skipped, unless FORMWORK_TEST_REQUIRE_BROWSER is set
 * (as .ci/run does), in which case a missing browser fails it.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page, Response } from 'playwright-core';
import { BROWSER_SUITE_MS, newBrowserPage, skipBrowser, startWithBrowser } from './support/browser.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import {
  apiStatus,
  basicOf,
  exchangeCode,
  pkce,
  registerClient,
  tokenRequest,
  userWithPassword,
  type Client,
  type TokenReply,
} from './support/oauth-flow.js';

const SCOPES = ['forms:read', 'forms:write', 'submissions:read'];
const APP_NAME = 'Acme Browser Sync';

/** A client application's redirect endpoint: records every query it receives, answers "done". */
class CallbackServer {
  readonly received: URLSearchParams[] = [];
  private readonly server: Server;
  private waiters: { state: string; resolve: (q: URLSearchParams) => void }[] = [];

  constructor() {
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (url.pathname !== '/callback') {
        res.writeHead(404).end();
        return;
      }
      this.received.push(url.searchParams);
      for (const w of this.waiters.filter((w) => w.state === url.searchParams.get('state')))
        w.resolve(url.searchParams);
      this.waiters = this.waiters.filter((w) => w.state !== url.searchParams.get('state'));
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end('<!doctype html><title>Callback</title><p id="done">done</p>');
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/callback`;
  }

  /** Every query that came back with this state. */
  withState(state: string): URLSearchParams[] {
    return this.received.filter((q) => q.get('state') === state);
  }

  /** The query of the (next, or an already received) redirect with this state. */
  waitFor(state: string): Promise<URLSearchParams> {
    const got = this.withState(state)[0];
    if (got) return Promise.resolve(got);
    return new Promise((resolve) => this.waiters.push({ state, resolve }));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const pathOf = (r: Response) => new URL(r.url()).pathname;

describe(
  `OAuth authorization code flow in Chromium (${dialectName})`,
  { skip: skipBrowser, timeout: BROWSER_SUITE_MS },
  () => {
    let app: TestApp | undefined;
    let owner: TestAccount;
    let client: Client;
    let user: { id: number; email: string; password: string };
    let browser: Browser | undefined;
    let callback: CallbackServer | undefined;
    let states = 0;

    before(async () => {
      callback = new CallbackServer();
      await callback.listen();
      ({ app, browser } = await startWithBrowser(startTestApp()));
      owner = await app.account('Browser');
      client = await registerClient(owner, [callback.url], APP_NAME);
      user = await userWithPassword(owner);
    });

    after(async () => {
      await browser?.close();
      await callback?.close();
      await app?.close();
    });

    /** A page in a browser context of its own (its own cookies: a new visitor). */
    function newPage(): Promise<Page> {
      return newBrowserPage(browser!);
    }

    function authorizeUrl(state: string, challenge: string): string {
      const q = new URLSearchParams({
        client_id: client.clientId,
        redirect_uri: callback!.url,
        response_type: 'code',
        scope: SCOPES.join(' '),
        state,
        code_challenge: challenge,
        code_challenge_method: 'S256',
      });
      return `${app!.url}/oauth2/authorize?${q.toString()}`;
    }

    const newState = () => `st-${++states}-${Math.random().toString(36).slice(2)}`;

    function assertPageHeaders(res: Response | null, what: string): void {
      assert.ok(res, `no response for ${what}`);
      const h = res.headers();
      assert.equal(h['x-frame-options'], 'DENY', `${what}: x-frame-options`);
      assert.match(h['content-security-policy'] ?? '', /frame-ancestors 'none'/, `${what}: content-security-policy`);
      assert.equal(h['cache-control'], 'no-store', `${what}: cache-control`);
    }

    /** Opens the authorize URL on the page; it must show the sign-in form. */
    async function openSignIn(page: Page, state: string, challenge: string): Promise<void> {
      const res = await page.goto(authorizeUrl(state, challenge));
      assert.equal(res?.status(), 200);
      assertPageHeaders(res, 'sign-in page');
      await page.getByRole('heading', { name: `Sign in to continue to ${APP_NAME}` }).waitFor();
      assert.equal(await page.getByRole('button', { name: 'Allow' }).count(), 0, 'the sign-in page offers no consent');
    }

    /** Fills in the sign-in form and submits it; resolves with the response to the POST once its page has loaded. */
    async function signIn(page: Page, email: string, password: string): Promise<Response> {
      await page.getByLabel('Email').fill(email);
      await page.getByLabel('Password').fill(password);
      const posted = page.waitForResponse((r) => r.request().method() === 'POST' && pathOf(r) === '/oauth2/sign-in');
      await page.getByRole('button', { name: 'Sign in' }).click();
      const res = await posted;
      await page.waitForLoadState('load');
      return res;
    }

    /** Signs in with the user's password; the browser lands on the consent page, which is checked. */
    async function signInToConsent(page: Page, state: string, challenge: string): Promise<void> {
      await openSignIn(page, state, challenge);
      const consentLoaded = page.waitForResponse(
        (r) => r.request().method() === 'GET' && pathOf(r) === '/oauth2/authorize',
      );
      const posted = await signIn(page, user.email, user.password);
      assert.equal(posted.status(), 303, 'a good password redirects to the consent page');
      const consent = await consentLoaded;
      assert.equal(consent.status(), 200);
      assertPageHeaders(consent, 'consent page');
      await page.getByRole('heading', { name: `${APP_NAME} wants to access your Formwork account` }).waitFor();
      assert.match(
        await page.locator('main').innerText(),
        new RegExp(`Signed in as ${user.email.replace(/\./g, '\\.')}`),
      );
      assert.deepEqual(
        await page.locator('li code').allTextContents(),
        SCOPES,
        'the consent page lists the requested scopes',
      );
      const cookies = await page.context().cookies();
      const session = cookies.find((c) => c.name === 'fw_session');
      assert.ok(session, 'signing in starts a session');
      assert.equal(session.httpOnly, true);
      assert.equal(session.path, '/oauth2');
    }

    /** Clicks a consent button and waits for the browser to arrive at the callback; returns its query. */
    async function decide(page: Page, state: string, decision: 'Allow' | 'Deny'): Promise<URLSearchParams> {
      const cb = new URL(callback!.url);
      const arrived = page.waitForURL((u) => u.host === cb.host && u.pathname === '/callback');
      await page.getByRole('button', { name: decision }).click();
      await arrived;
      await page.locator('#done').waitFor();
      assert.equal(await page.locator('#done').innerText(), 'done');
      const query = await callback!.waitFor(state);
      assert.equal(callback!.withState(state).length, 1, 'one redirect per decision');
      return query;
    }

    /** A page whose browser signed in earlier (kept open by authorizeInBrowser). */
    let signedIn: Page | undefined;

    /**
     * The whole browser part, ending with Allow; returns the code, already checked. A fresh
     * visitor signs in first; with `again`, the browser that signed in before goes straight to
     * the consent page on its session.
     */
    async function authorizeInBrowser(again = false): Promise<{ code: string; verifier: string }> {
      const { verifier, challenge } = pkce();
      const state = newState();
      let page: Page;
      if (again && signedIn) {
        page = signedIn;
        const res = await page.goto(authorizeUrl(state, challenge));
        assert.equal(res?.status(), 200);
        assertPageHeaders(res, 'consent page on a session');
        await page.getByRole('heading', { name: `${APP_NAME} wants to access your Formwork account` }).waitFor();
        assert.equal(await page.getByLabel('Password').count(), 0, 'no password asked again');
      } else {
        page = await newPage();
        await signInToConsent(page, state, challenge);
        signedIn ??= page;
      }
      const query = await decide(page, state, 'Allow');
      assert.equal(query.get('state'), state);
      assert.equal(query.get('iss'), app!.config.publicUrl);
      assert.equal(query.get('error'), null);
      const code = query.get('code');
      assert.ok(code, `no code in ${query.toString()}`);
      return { code, verifier };
    }

    async function exchange(
      code: string,
      verifier: string,
    ): Promise<{ access: string; refresh: string; body: Record<string, any> }> {
      const res = await exchangeCode(app!, client, code, verifier, callback!.url);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.token_type, 'Bearer');
      assert.equal(res.body.scope, SCOPES.join(' '));
      assert.equal(typeof res.body.access_token, 'string');
      assert.equal(typeof res.body.refresh_token, 'string');
      return { access: res.body.access_token, refresh: res.body.refresh_token, body: res.body };
    }

    const refresh = (token: string): Promise<TokenReply> =>
      tokenRequest(app!, { grant_type: 'refresh_token', refresh_token: token }, basicOf(client));
    const introspect = (token: string): Promise<TokenReply> =>
      tokenRequest(app!, { token }, basicOf(client), '/oauth2/introspect');

    it('publishes the issuer the redirects carry', async () => {
      const res = await app!.request('GET', '/.well-known/oauth-authorization-server');
      assert.equal(res.status, 200);
      assert.equal(res.body.issuer, app!.config.publicUrl);
      assert.equal(res.body.authorization_response_iss_parameter_supported, true);
    });

    it('signs in, consents, exchanges the code with its PKCE verifier and calls the API; refresh rotates, and a replayed refresh token ends the grant', async () => {
      const { code, verifier } = await authorizeInBrowser();

      const first = await exchange(code, verifier);
      assert.equal(first.body.expires_in, 3600);
      assert.equal(first.body.user_id, user.id);

      const created = await app!.request('POST', '/api/v2025/forms', {
        token: first.access,
        body: { name: 'Made in the browser flow' },
      });
      assert.equal(created.status, 200, created.text);
      const listed = await app!.request('GET', '/api/v2025/forms', { token: first.access });
      assert.equal(listed.status, 200);
      assert.ok(
        listed.body.forms.some((f: any) => f.id === created.body.id),
        'GET /forms lists the form the token created',
      );
      // Only the scopes granted: no submissions:write, no admin.
      assert.equal(await apiStatus(app!, first.access, 'GET', '/users'), 403);

      const rotated = await refresh(first.refresh);
      assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
      const second = { access: rotated.body.access_token as string, refresh: rotated.body.refresh_token as string };
      assert.notEqual(second.access, first.access);
      assert.notEqual(second.refresh, first.refresh);
      assert.equal(rotated.body.scope, SCOPES.join(' '));
      assert.equal(await apiStatus(app!, second.access), 200);
      assert.equal((await introspect(second.refresh)).body.active, true);
      assert.equal(
        (await introspect(first.refresh)).body.active,
        false,
        'an exchanged refresh token is no longer active',
      );

      // The old refresh token comes back: refused, and the whole family ends with it.
      const replay = await refresh(first.refresh);
      assert.equal(replay.status, 400);
      assert.equal(replay.body.error, 'invalid_grant');
      assert.equal(await apiStatus(app!, second.access), 401, 'the newest access token dies with the replay');
      assert.equal(await apiStatus(app!, first.access), 401);
      const afterReplay = await refresh(second.refresh);
      assert.equal(afterReplay.status, 400, 'the newest refresh token dies with the replay');
      assert.equal((await introspect(second.access)).body.active, false);
      assert.equal((await introspect(second.refresh)).body.active, false);
    });

    it('revoking a refresh token (RFC 7009) ends its access token too', async () => {
      const { code, verifier } = await authorizeInBrowser(true);
      const pair = await exchange(code, verifier);
      assert.equal(await apiStatus(app!, pair.access), 200);
      const before = await introspect(pair.access);
      assert.equal(before.status, 200);
      assert.equal(before.body.active, true);
      assert.equal(before.body.token_type, 'access_token');
      assert.equal(before.body.username, user.email);
      assert.equal(before.body.iss, app!.config.publicUrl);

      const revoked = await tokenRequest(
        app!,
        { token: pair.refresh, token_type_hint: 'refresh_token' },
        basicOf(client),
        '/oauth2/revoke',
      );
      assert.equal(revoked.status, 200);

      assert.equal(await apiStatus(app!, pair.access), 401);
      for (const token of [pair.access, pair.refresh]) {
        const res = await introspect(token);
        assert.equal(res.status, 200);
        assert.deepEqual(res.body, { active: false });
      }
      assert.equal((await refresh(pair.refresh)).status, 400);
    });

    it('a code works once: its replay is refused and ends the tokens it issued', async () => {
      const { code, verifier } = await authorizeInBrowser(true);
      const pair = await exchange(code, verifier);
      assert.equal(await apiStatus(app!, pair.access), 200);
      const again = await exchangeCode(app!, client, code, verifier, callback!.url);
      assert.equal(again.status, 400);
      assert.equal(again.body.error, 'invalid_grant');
      assert.equal(await apiStatus(app!, pair.access), 401);
      assert.equal((await refresh(pair.refresh)).status, 400);
    });

    it('Deny sends the user back with error=access_denied and the state, and no code', async () => {
      const page = await newPage();
      const state = newState();
      await signInToConsent(page, state, pkce().challenge);
      const query = await decide(page, state, 'Deny');
      assert.equal(query.get('error'), 'access_denied');
      assert.equal(query.get('state'), state);
      assert.equal(query.get('iss'), app!.config.publicUrl);
      assert.equal(query.get('code'), null);
      await page.close();
    });

    it('a wrong password shows an error on the page: no redirect, no session', async () => {
      const page = await newPage();
      const state = newState();
      await openSignIn(page, state, pkce().challenge);
      const res = await signIn(page, user.email, `${user.password}-wrong`);
      assert.equal(res.status(), 401);
      assertPageHeaders(res, 'sign-in error page');
      assert.equal(new URL(page.url()).pathname, '/oauth2/sign-in', 'the browser stays on the sign-in page');
      assert.equal((await page.getByRole('alert').innerText()).trim(), 'Wrong email or password.');
      assert.equal(await page.getByLabel('Email').inputValue(), user.email, 'the email is kept');
      assert.equal(await page.getByLabel('Password').inputValue(), '', 'the password is not');
      assert.equal(await page.getByRole('button', { name: 'Allow' }).count(), 0);
      assert.equal(
        (await page.context().cookies()).find((c) => c.name === 'fw_session'),
        undefined,
        'no session cookie',
      );
      assert.equal(callback!.withState(state).length, 0, 'nothing reached the client');

      // Opening the request again still asks for a password.
      await openSignIn(page, state, pkce().challenge);
      await page.close();
    });

    it('the consent page and the decision need a signed-in user', async () => {
      const page = await newPage();
      const state = newState();
      await openSignIn(page, state, pkce().challenge);

      // A page that posts the consent form's decision with a valid CSRF token but no session
      // (the sign-in form, retargeted): the server answers with the sign-in page, nothing else.
      const posted = page.waitForResponse((r) => r.request().method() === 'POST' && pathOf(r) === '/oauth2/authorize');
      await page.getByLabel('Email').evaluate((input: { name: string; value: string }) => {
        input.name = 'decision';
        input.value = 'allow';
      });
      // form.submit() sends the form as it is, without the browser's required-field checks.
      await page.locator('form').evaluate((form: { action: string; submit(): void }) => {
        form.action = '/oauth2/authorize';
        form.submit();
      });
      const res = await posted;
      await page.waitForLoadState('load');
      const sent = new URLSearchParams(res.request().postData() ?? '');
      assert.equal(sent.get('decision'), 'allow');
      assert.ok(sent.get('csrf_token'), "the post carries the page's CSRF token");
      assert.equal(res.status(), 200);
      assertPageHeaders(res, 'decision without a session');
      assert.equal(new URL(page.url()).pathname, '/oauth2/authorize');
      await page.getByRole('heading', { name: `Sign in to continue to ${APP_NAME}` }).waitFor();
      assert.equal(await page.getByRole('button', { name: 'Allow' }).count(), 0);
      assert.equal(callback!.withState(state).length, 0, 'no code, no redirect');

      // Without the CSRF cookie (another site posting the form): refused outright.
      const forged = await fetch(`${app!.url}/oauth2/authorize`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          ...Object.fromEntries(new URL(authorizeUrl(state, pkce().challenge)).searchParams),
          decision: 'allow',
          csrf_token: 'x',
        }).toString(),
        redirect: 'manual',
      });
      assert.equal(forged.status, 403);
      assert.equal(forged.headers.get('location'), null);
      assert.equal(callback!.withState(state).length, 0);
      await page.close();
    });
  },
);
