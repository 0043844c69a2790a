/**
 * The authorization server over HTTP: the authorization endpoint's refusals, the token
 * endpoint's grants and the RFC 9700 attacks on them (PKCE downgrade, wrong verifier, code
 * reuse, redirect mismatch, refresh reuse, expired and revoked tokens), revocation,
 * introspection, metadata, and tokens kept only as hashes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { ACCESS_TOKEN_SECONDS, CODE_SECONDS, REFRESH_TOKEN_SECONDS } from '../src/modules/oauth/model.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { toWindowStart } from './support/quota.js';
import {
  apiStatus,
  authorize,
  authorizeUrl,
  basicOf,
  Browser,
  exchangeCode,
  pkce,
  readForm,
  REDIRECT,
  registerClient,
  tokenRequest,
  userWithPassword,
  type Client,
} from './support/oauth-flow.js';

let app: TestApp;
let owner: TestAccount;
let client: Client;
let other: Client;
/** Registered as not needing PKCE. */
let lax: Client;
let user: { id: number; email: string; password: string };

before(async () => {
  app = await startTestApp({ SIGN_IN_ATTEMPTS: '50' });
  owner = await app.account();
  client = await registerClient(owner);
  other = await registerClient(owner, [REDIRECT], 'Other app');
  lax = await registerClient(owner, [REDIRECT], 'Legacy app', false);
  user = await userWithPassword(owner);
});
after(() => app.close());

const db = () => app.server.db.kysely;

/** A code and its verifier, through sign-in and consent; without PKCE, for a client that does not require it. */
async function codeFor(
  params: Record<string, string | undefined> = {},
  withPkce = true,
  c: Client = client,
): Promise<{ code: string; verifier?: string; redirect: URL }> {
  const p = pkce();
  const redirect = await authorize(
    app,
    c,
    user,
    withPkce
      ? { code_challenge: p.challenge, code_challenge_method: 'S256', ...params }
      : { code_challenge: undefined, code_challenge_method: undefined, ...params },
  );
  const code = redirect.searchParams.get('code');
  assert.ok(code, `no code in ${redirect.toString()}`);
  return { code, verifier: withPkce ? p.verifier : undefined, redirect };
}

async function tokens(scope?: string) {
  const { code, verifier } = await codeFor(scope ? { scope } : {});
  const res = await exchangeCode(app, client, code, verifier);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as {
    access_token: string;
    refresh_token: string;
    scope: string;
    expires_in: number;
    token_type: string;
    user_id: number;
  };
}

const refresh = (token: string, c: Client = client) =>
  tokenRequest(app, { grant_type: 'refresh_token', refresh_token: token }, basicOf(c));

describe('metadata', () => {
  it('describes the server as RFC 8414 asks', async () => {
    const res = await app.request('GET', '/.well-known/oauth-authorization-server');
    assert.equal(res.status, 200);
    assert.equal(res.body.issuer, 'http://forms.test');
    assert.equal(res.body.authorization_endpoint, 'http://forms.test/oauth2/authorize');
    assert.equal(res.body.token_endpoint, 'http://forms.test/oauth2/token');
    assert.equal(res.body.revocation_endpoint, 'http://forms.test/oauth2/revoke');
    assert.equal(res.body.introspection_endpoint, 'http://forms.test/oauth2/introspect');
    assert.deepEqual(res.body.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(res.body.response_types_supported, ['code']);
    assert.deepEqual(res.body.scopes_supported, [
      'forms:read',
      'forms:write',
      'submissions:read',
      'submissions:write',
      'admin',
    ]);
  });

  it("says where PKCE is documented as required: the service documentation's OAuth description", async () => {
    const meta = await app.request('GET', '/.well-known/oauth-authorization-server');
    assert.equal(meta.body.service_documentation, 'http://forms.test/docs');
    const doc = await app.request('GET', '/api/v2025/openapi.json');
    const description: string = doc.body.components.securitySchemes.oauth2.description;
    assert.match(
      description,
      /must carry code_challenge and code_challenge_method=S256 unless the application is registered with requirePkce: false/,
    );
  });
});

describe('PKCE requirement', () => {
  it('registers applications as needing PKCE unless told otherwise, and changes that with PUT', async () => {
    const made = await owner.post('/oauth-clients', { name: 'Strict', redirectUris: [REDIRECT] });
    assert.equal(made.status, 200, made.text);
    assert.equal(made.body.requirePkce, true);
    assert.equal((await owner.get(`/oauth-clients/${made.body.id}`)).body.requirePkce, true);
    assert.equal((await owner.get(`/oauth-clients/${lax.id}`)).body.requirePkce, false);

    const relaxed = await owner.put(`/oauth-clients/${made.body.id}`, { requirePkce: false });
    assert.equal(relaxed.status, 200, relaxed.text);
    assert.deepEqual(
      { ...relaxed.body, created: undefined },
      {
        id: made.body.id,
        clientId: made.body.clientId,
        name: 'Strict',
        redirectUris: [REDIRECT],
        requirePkce: false,
        created: undefined,
      },
    );
    assert.ok(!relaxed.text.includes(made.body.clientSecret));
    const renamed = await owner.put(`/oauth-clients/${made.body.id}`, {
      name: ' Renamed ',
      redirectUris: ['https://app.example.com/cb', 'https://app.example.com/cb'],
    });
    assert.deepEqual(
      [renamed.body.name, renamed.body.redirectUris, renamed.body.requirePkce],
      ['Renamed', ['https://app.example.com/cb'], false],
    );

    assert.equal((await owner.put(`/oauth-clients/${made.body.id}`, {})).status, 400);
    assert.equal((await owner.put(`/oauth-clients/${made.body.id}`, { requirePkce: 'no' })).status, 400);
    assert.equal(
      (await owner.put(`/oauth-clients/${made.body.id}`, { redirectUris: ['http://example.com/cb'] })).status,
      400,
    );
    assert.equal((await owner.put(`/oauth-clients/${made.body.id}`, { name: '  ' })).status, 400);
    assert.equal((await owner.put(`/oauth-clients/${made.body.id}`, { clientSecret: 'mine' })).status, 400);
    assert.equal((await owner.put('/oauth-clients/2147483647', { requirePkce: true })).status, 404);
    const elsewhere = await app.account();
    assert.equal((await elsewhere.put(`/oauth-clients/${made.body.id}`, { requirePkce: true })).status, 404);
    assert.equal(
      (await owner.get(`/oauth-clients/${made.body.id}`)).body.requirePkce,
      false,
      'the refused changes wrote nothing',
    );
  });

  it('sends invalid_request back to an application that must use PKCE and sent no challenge, before any sign-in', async () => {
    const res = await new Browser(app.url).fetch(
      authorizeUrl(client, { code_challenge: undefined, code_challenge_method: undefined }),
    );
    assert.equal(res.status, 303);
    const to = new URL(res.location!);
    assert.equal(`${to.origin}${to.pathname}`, REDIRECT);
    assert.equal(to.searchParams.get('error'), 'invalid_request');
    assert.match(to.searchParams.get('error_description') ?? '', /PKCE/);
    assert.equal(to.searchParams.get('state'), 'st-1');
    assert.equal(to.searchParams.get('iss'), 'http://forms.test');
  });

  it('lets an application registered without PKCE go without it', async () => {
    const { code } = await codeFor({}, false, lax);
    const res = await exchangeCode(app, lax, code);
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  it('the token endpoint refuses a code issued without PKCE once its application requires PKCE', async () => {
    const c = await registerClient(owner, [REDIRECT], 'Turning strict', false);
    const { code } = await codeFor({}, false, c);
    assert.equal((await owner.put(`/oauth-clients/${c.id}`, { requirePkce: true })).status, 200);
    const res = await exchangeCode(app, c, code);
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'invalid_grant');
    assert.match(res.body.error_description, /PKCE/);
  });
});

describe('authorization endpoint', () => {
  const page = async (path: string) => new Browser(app.url).fetch(path);

  it('shows an error page and never redirects for an unknown client', async () => {
    const res = await page(authorizeUrl({ ...client, clientId: 'fwc_nope' }));
    assert.equal(res.status, 400);
    assert.equal(res.location, null);
    assert.match(res.text, /No application is registered/);
    assert.match(res.headers.get('content-type') ?? '', /text\/html/);
  });

  for (const [name, uri] of [
    ['another host', 'http://127.0.0.1:9/other'],
    ['an added query', `${REDIRECT}?x=1`],
    ['a trailing slash', `${REDIRECT}/`],
    ['a different case', REDIRECT.toUpperCase()],
    ['none at all', undefined],
  ] as const) {
    it(`shows an error page and never redirects for a redirect URI with ${name}`, async () => {
      const res = await page(authorizeUrl(client, { redirect_uri: uri }));
      assert.equal(res.status, 400);
      assert.equal(res.location, null);
    });
  }

  it('refuses a client_id given twice without redirecting', async () => {
    const res = await page(`${authorizeUrl(client)}&client_id=${client.clientId}`);
    assert.equal(res.status, 400);
    assert.equal(res.location, null);
  });

  for (const [name, params, error] of [
    ['response_type=token', { response_type: 'token' }, 'unsupported_response_type'],
    ['an unknown scope', { scope: 'forms:read everything' }, 'invalid_scope'],
    ['the plain PKCE method', { code_challenge: 'a'.repeat(43), code_challenge_method: 'plain' }, 'invalid_request'],
    [
      'a challenge without a method',
      { code_challenge: 'a'.repeat(43), code_challenge_method: undefined },
      'invalid_request',
    ],
    ['a method without a challenge', { code_challenge: undefined, code_challenge_method: 'S256' }, 'invalid_request'],
    [
      'no PKCE challenge from a client that must use PKCE',
      { code_challenge: undefined, code_challenge_method: undefined },
      'invalid_request',
    ],
    ['a short challenge', { code_challenge: 'abc', code_challenge_method: 'S256' }, 'invalid_request'],
  ] as const) {
    it(`sends ${error} back to the client for ${name}, with the state`, async () => {
      const res = await page(authorizeUrl(client, params));
      assert.equal(res.status, 303);
      const to = new URL(res.location!);
      assert.equal(`${to.origin}${to.pathname}`, REDIRECT);
      assert.equal(to.searchParams.get('error'), error);
      assert.equal(to.searchParams.get('state'), 'st-1');
      assert.equal(to.searchParams.get('code'), null);
    });
  }

  it('asks to sign in, with a CSRF-protected form, and frames nowhere', async () => {
    const res = await page(authorizeUrl(client));
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
    assert.match(res.text, /Sign in to continue to Acme Sync/);
    assert.ok(readForm(res.text).fields.csrf_token);
  });

  it('refuses a sign-in without the CSRF token, and a wrong password, without a session', async () => {
    const browser = new Browser(app.url);
    const form = readForm((await browser.fetch(authorizeUrl(client))).text);
    const noCsrf = await browser.fetch('/oauth2/sign-in', {
      method: 'POST',
      form: { ...form.fields, csrf_token: 'forged', email: user.email, password: user.password },
    });
    assert.equal(noCsrf.status, 403);
    const wrong = await browser.fetch('/oauth2/sign-in', {
      method: 'POST',
      form: { ...form.fields, email: user.email, password: 'wrong password' },
    });
    assert.equal(wrong.status, 401);
    assert.match(wrong.text, /Wrong email or password/);
    assert.ok(!wrong.headers.getSetCookie().some((c) => c.startsWith('fw_session=')));
    const unknown = await browser.fetch('/oauth2/sign-in', {
      method: 'POST',
      form: { ...form.fields, email: 'nobody@example.com', password: 'whatever1' },
    });
    assert.equal(unknown.status, 401);
    // Still not signed in: the authorize page asks again.
    assert.match((await browser.fetch(authorizeUrl(client))).text, /Sign in/);
  });

  it('refuses a consent without the CSRF token', async () => {
    const browser = new Browser(app.url);
    const form = readForm((await browser.fetch(authorizeUrl(client))).text);
    const signedIn = await browser.fetch('/oauth2/sign-in', {
      method: 'POST',
      form: { ...form.fields, email: user.email, password: user.password },
    });
    const consent = readForm((await browser.fetch(signedIn.location!)).text);
    const res = await browser.fetch('/oauth2/authorize', {
      method: 'POST',
      form: { ...consent.fields, csrf_token: 'forged', decision: 'allow' },
    });
    assert.equal(res.status, 403);
    assert.equal(res.location, null);
  });

  it('sends access_denied with the state when the user declines', async () => {
    const back = await authorize(app, client, user, {}, 'deny');
    assert.equal(back.searchParams.get('error'), 'access_denied');
    assert.equal(back.searchParams.get('state'), 'st-1');
    assert.equal(back.searchParams.get('code'), null);
  });

  it('throttles sign-in attempts per email', async () => {
    const small = await startTestApp({ SIGN_IN_ATTEMPTS: '3' });
    try {
      // To the start of a 15-minute throttle window, so that the attempts below do not straddle two
      // (a slow run on CI once found the fourth attempt in a new, empty window).
      toWindowStart(small.server.ctx.clock, 900_000);
      const o = await small.account();
      const c = await registerClient(o);
      const u = await userWithPassword(o);
      const browser = new Browser(small.url);
      const form = readForm((await browser.fetch(authorizeUrl(c))).text);
      const statuses = [];
      for (let i = 0; i < 4; i++) {
        const res = await browser.fetch('/oauth2/sign-in', {
          method: 'POST',
          form: { ...form.fields, email: u.email, password: 'wrong password' },
        });
        statuses.push(res.status);
        if (res.status === 429) assert.ok(Number(res.headers.get('retry-after')) > 0);
      }
      assert.deepEqual(statuses, [401, 401, 401, 429]);
      // The right password is refused too while throttled.
      const right = await browser.fetch('/oauth2/sign-in', {
        method: 'POST',
        form: { ...form.fields, email: u.email, password: u.password },
      });
      assert.equal(right.status, 429);
    } finally {
      await small.close();
    }
  });
});

describe('an email in several accounts', () => {
  /** A user with this email and password in a new account of this name. */
  async function userIn(accountName: string, email: string, password: string) {
    const acc = await app.account(accountName);
    const res = await acc.post('/users', { email, name: 'Pat', role: 'member', password });
    assert.equal(res.status, 200, res.text);
    return { accountId: acc.accountId, userId: res.body.id as number };
  }

  /** Signs in on the page; answers the page the sign-in leads to. */
  async function signIn(browser: Browser, email: string, password: string, challenge = pkce().challenge) {
    const form = readForm((await browser.fetch(authorizeUrl(client, { code_challenge: challenge }))).text);
    return browser.fetch(form.action, { method: 'POST', form: { ...form.fields, email, password } });
  }

  it('signs in to the account whose user the password is for, or lets the person choose when it fits several', async () => {
    const email = `multi-${Date.now()}@example.com`;
    await userIn('Alpha Ltd', email, 'password one');
    const b = await userIn('Beta Ltd', email, 'password two');
    const c = await userIn('Gamma Ltd', email, 'password one');

    // Every hash of the email shares one salt: a sign-in derives one key however many accounts have it.
    const hashes = await db().selectFrom('users').select('password_hash').where('email', '=', email).execute();
    assert.equal(hashes.length, 3);
    assert.equal(new Set(hashes.map((h) => h.password_hash!.split('$')[4])).size, 1);

    // The password of exactly one of them: that user, named with its account on the consent page.
    const browserB = new Browser(app.url);
    const signedB = await signIn(browserB, email, 'password two');
    assert.equal(signedB.status, 303, signedB.text);
    const consentB = await browserB.fetch(signedB.location!);
    assert.match(consentB.text, /Signed in as <strong>multi-[^<]+<\/strong> \(account <strong>Beta Ltd<\/strong>\)/);

    // The password of two of them: a chooser naming only those two accounts.
    const browser = new Browser(app.url);
    const p = pkce();
    const chooser = await signIn(browser, email, 'password one', p.challenge);
    assert.equal(chooser.status, 200, chooser.text);
    assert.match(chooser.text, /Alpha Ltd/);
    assert.match(chooser.text, /Gamma Ltd/);
    assert.doesNotMatch(chooser.text, /Beta Ltd/);
    assert.doesNotMatch(chooser.text, /password one/);
    assert.ok(
      !chooser.headers.getSetCookie().some((line) => line.startsWith('fw_session=')),
      'no session before the choice',
    );
    const choice = readForm(chooser.text);
    assert.equal(choice.action, '/oauth2/sign-in');

    // A user the password was not proven for, or a forged proof, is refused.
    const forgeries: Record<string, string>[] = [
      { user: String(b.userId) },
      { user: String(c.userId), choice: `${c.userId}:x.${Date.now() + 60_000}.forged` },
    ];
    for (const forged of forgeries) {
      const res = await browser.fetch(choice.action, { method: 'POST', form: { ...choice.fields, ...forged } });
      assert.equal(res.status, 403, res.text);
      assert.ok(!res.headers.getSetCookie().some((line) => line.startsWith('fw_session=')));
    }

    const chosen = await browser.fetch(choice.action, {
      method: 'POST',
      form: { ...choice.fields, user: String(c.userId) },
    });
    assert.equal(chosen.status, 303, chosen.text);
    const consent = await browser.fetch(chosen.location!);
    assert.match(consent.text, /\(account <strong>Gamma Ltd<\/strong>\)/);
    const consentForm = readForm(consent.text);
    const done = await browser.fetch(consentForm.action, {
      method: 'POST',
      form: { ...consentForm.fields, decision: 'allow' },
    });
    const code = new URL(done.location!).searchParams.get('code');
    assert.ok(code, done.location ?? done.text);
    const token = await exchangeCode(app, client, code, p.verifier);
    assert.equal(token.status, 200, JSON.stringify(token.body));
    assert.equal(token.body.user_id, c.userId, "the token acts for the chosen account's user");
    const issued = await db()
      .selectFrom('oauth_grants')
      .select('account_id')
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    assert.equal(issued.account_id, c.accountId);

    // A wrong password is wrong for all of them.
    const wrong = await signIn(new Browser(app.url), email, 'password three');
    assert.equal(wrong.status, 401);
    assert.match(wrong.text, /Wrong email or password/);
  });
});

describe('token endpoint', () => {
  it('exchanges a code for a bearer token of an hour, a refresh token, the scope and the user id', async () => {
    const { code, verifier, redirect } = await codeFor();
    assert.equal(redirect.searchParams.get('state'), 'st-1');
    assert.equal(redirect.searchParams.get('iss'), 'http://forms.test');
    const res = await exchangeCode(app, client, code, verifier);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.token_type, 'Bearer');
    assert.equal(res.body.expires_in, 3600);
    assert.equal(res.body.scope, 'forms:read forms:write submissions:read');
    assert.equal(res.body.user_id, user.id);
    assert.match(res.body.access_token, /^fw_at_/);
    assert.match(res.body.refresh_token, /^fw_rt_/);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(await apiStatus(app, res.body.access_token), 200);
  });

  it('takes the client credentials in the body too', async () => {
    const { code, verifier } = await codeFor();
    const res = await tokenRequest(app, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier!,
      client_id: client.clientId,
      client_secret: client.clientSecret,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  it('refuses a wrong client secret, and a missing one even with PKCE', async () => {
    const { code, verifier } = await codeFor();
    const wrong = await exchangeCode(app, { ...client, clientSecret: 'fw_cs_wrong' }, code, verifier);
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error, 'invalid_client');
    assert.match(wrong.headers.get('www-authenticate') ?? '', /^Basic/);
    const none = await tokenRequest(app, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier!,
      client_id: client.clientId,
    });
    assert.equal(none.body.error, 'invalid_client');
    // Neither consumed the code.
    assert.equal((await exchangeCode(app, client, code, verifier)).status, 200);
  });

  it('refuses a form that is not form-encoded, and an unknown grant type', async () => {
    const json = await fetch(`${app.url}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"grant_type":"authorization_code"}',
    });
    assert.equal(json.status, 400);
    assert.equal(((await json.json()) as { error: string }).error, 'invalid_request');
    const grant = await tokenRequest(
      app,
      { grant_type: 'password', username: user.email, password: user.password },
      basicOf(client),
    );
    assert.equal(grant.body.error, 'unsupported_grant_type');
  });

  it('narrows scopes: a forms:read token cannot write, and cannot reach submissions', async () => {
    const t = await tokens('forms:read');
    assert.equal(await apiStatus(app, t.access_token, 'GET', '/forms'), 200);
    const write = await app.request('POST', '/api/v2025/forms', { token: t.access_token, body: { name: 'x' } });
    assert.equal(write.status, 403);
    assert.equal(write.body.code, 'insufficient_scope');
    assert.equal(await apiStatus(app, t.access_token, 'GET', '/submissions?search=x'), 403);
    assert.equal(await apiStatus(app, t.access_token, 'GET', '/users'), 403);
  });

  it('grants forms:read and submissions:read when the request names no scope', async () => {
    const { code, verifier } = await codeFor({ scope: undefined });
    const res = await exchangeCode(app, client, code, verifier);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.scope, 'forms:read submissions:read');
  });
});

describe('RFC 9700 attacks', () => {
  it('PKCE downgrade: a verifier for a code issued without a challenge is refused', async () => {
    const { code } = await codeFor({}, false, lax);
    const res = await exchangeCode(app, lax, code, pkce().verifier);
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'invalid_grant');
  });

  it('a code issued with a challenge needs its verifier', async () => {
    const { code } = await codeFor();
    const res = await exchangeCode(app, client, code);
    assert.equal(res.body.error, 'invalid_grant');
  });

  it('a wrong verifier is refused and uses the code up', async () => {
    const { code, verifier } = await codeFor();
    const wrong = await exchangeCode(app, client, code, pkce().verifier);
    assert.equal(wrong.status, 400);
    assert.equal(wrong.body.error, 'invalid_grant');
    const right = await exchangeCode(app, client, code, verifier);
    assert.equal(right.body.error, 'invalid_grant');
  });

  it('a reused code is refused and revokes the tokens the first exchange issued', async () => {
    const { code, verifier } = await codeFor();
    const first = await exchangeCode(app, client, code, verifier);
    assert.equal(first.status, 200);
    const second = await exchangeCode(app, client, code, verifier);
    assert.equal(second.status, 400);
    assert.equal(second.body.error, 'invalid_grant');
    assert.equal(await apiStatus(app, first.body.access_token), 401);
    assert.equal((await refresh(first.body.refresh_token)).body.error, 'invalid_grant');
  });

  it('a code is bound to its redirect URI', async () => {
    const { code, verifier } = await codeFor();
    const res = await exchangeCode(app, client, code, verifier, 'http://127.0.0.1:9/elsewhere');
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'invalid_grant');
  });

  it('a code is bound to its client', async () => {
    const { code, verifier } = await codeFor();
    const res = await exchangeCode(app, other, code, verifier);
    assert.equal(res.body.error, 'invalid_grant');
    // The rightful client can still use it: another client's attempt does not burn it.
    assert.equal((await exchangeCode(app, client, code, verifier)).status, 200);
  });

  it('an expired code is refused', async () => {
    const { code, verifier } = await codeFor();
    app.server.ctx.clock.advance(CODE_SECONDS * 1000 + 1000);
    const res = await exchangeCode(app, client, code, verifier);
    assert.equal(res.body.error, 'invalid_grant');
    assert.match(res.body.error_description, /expired/);
  });

  it('refresh rotates: a new pair each time, and the old refresh token is refused', async () => {
    const t = await tokens();
    const r1 = await refresh(t.refresh_token);
    assert.equal(r1.status, 200, JSON.stringify(r1.body));
    assert.notEqual(r1.body.refresh_token, t.refresh_token);
    assert.equal(r1.body.scope, t.scope);
    assert.equal(r1.body.user_id, user.id);
    assert.equal(await apiStatus(app, r1.body.access_token), 200);
    const r2 = await refresh(r1.body.refresh_token);
    assert.equal(r2.status, 200);
  });

  it('a reused refresh token revokes the whole family', async () => {
    const t = await tokens();
    const r1 = await refresh(t.refresh_token);
    assert.equal(r1.status, 200);
    const replay = await refresh(t.refresh_token);
    assert.equal(replay.status, 400);
    assert.equal(replay.body.error, 'invalid_grant');
    assert.equal(await apiStatus(app, r1.body.access_token), 401);
    assert.equal(await apiStatus(app, t.access_token), 401);
    assert.equal((await refresh(r1.body.refresh_token)).body.error, 'invalid_grant');
  });

  it('a refresh token works only for its client, and may narrow but not widen the scope', async () => {
    const t = await tokens('forms:read submissions:read');
    assert.equal((await refresh(t.refresh_token, other)).body.error, 'invalid_grant');
    const wider = await tokenRequest(
      app,
      { grant_type: 'refresh_token', refresh_token: t.refresh_token, scope: 'forms:read forms:write' },
      basicOf(client),
    );
    assert.equal(wider.body.error, 'invalid_scope');
    const narrower = await tokenRequest(
      app,
      { grant_type: 'refresh_token', refresh_token: t.refresh_token, scope: 'forms:read' },
      basicOf(client),
    );
    assert.equal(narrower.status, 200, JSON.stringify(narrower.body));
    assert.equal(narrower.body.scope, 'forms:read');
  });

  it('expired access and refresh tokens are refused', async () => {
    const t = await tokens();
    app.server.ctx.clock.advance(ACCESS_TOKEN_SECONDS * 1000 + 1000);
    assert.equal(await apiStatus(app, t.access_token), 401);
    app.server.ctx.clock.advance(REFRESH_TOKEN_SECONDS * 1000);
    const res = await refresh(t.refresh_token);
    assert.equal(res.body.error, 'invalid_grant');
    assert.match(res.body.error_description, /expired/);
  });
});

describe('revocation and introspection', () => {
  const introspect = (token: string, c: Client = client) =>
    tokenRequest(app, { token }, basicOf(c), '/oauth2/introspect');
  const revoke = (token: string, c: Client = client) => tokenRequest(app, { token }, basicOf(c), '/oauth2/revoke');

  it('introspects a live access token and a refresh token for their client', async () => {
    const t = await tokens();
    const a = await introspect(t.access_token);
    assert.equal(a.status, 200);
    assert.equal(a.body.active, true);
    assert.equal(a.body.client_id, client.clientId);
    assert.equal(a.body.scope, t.scope);
    assert.equal(a.body.username, user.email);
    assert.equal(a.body.sub, String(user.id));
    assert.equal(a.body.token_type, 'access_token');
    assert.ok(a.body.exp - a.body.iat === 3600);
    const r = await introspect(t.refresh_token);
    assert.equal(r.body.active, true);
    assert.equal(r.body.token_type, 'refresh_token');
  });

  it('says inactive to another client, for unknown tokens and for personal access tokens', async () => {
    const t = await tokens();
    assert.deepEqual((await introspect(t.access_token, other)).body, { active: false });
    assert.deepEqual((await introspect('fw_at_unknown')).body, { active: false });
    assert.deepEqual((await introspect(owner.token)).body, { active: false });
  });

  it('needs client authentication and a token', async () => {
    const t = await tokens();
    const res = await introspect(t.access_token, { ...client, clientSecret: 'fw_cs_wrong' });
    assert.equal(res.status, 401);
    assert.equal(res.body.error, 'invalid_client');
    assert.equal((await tokenRequest(app, {}, basicOf(client), '/oauth2/introspect')).body.error, 'invalid_request');
    assert.equal((await tokenRequest(app, {}, basicOf(client), '/oauth2/revoke')).body.error, 'invalid_request');
  });

  it('revoking an access token ends it alone', async () => {
    const t = await tokens();
    const res = await revoke(t.access_token);
    assert.equal(res.status, 200);
    assert.equal(await apiStatus(app, t.access_token), 401);
    assert.equal((await introspect(t.access_token)).body.active, false);
    assert.equal((await refresh(t.refresh_token)).status, 200);
  });

  it('revoking a refresh token ends its grant, access tokens included', async () => {
    const t = await tokens();
    assert.equal((await revoke(t.refresh_token)).status, 200);
    assert.equal(await apiStatus(app, t.access_token), 401);
    assert.equal((await refresh(t.refresh_token)).body.error, 'invalid_grant');
    assert.equal((await introspect(t.refresh_token)).body.active, false);
  });

  it('another client cannot revoke a token, and an unknown token is answered 200', async () => {
    const t = await tokens();
    assert.equal((await revoke(t.access_token, other)).status, 200);
    assert.equal(await apiStatus(app, t.access_token), 200);
    assert.equal((await revoke('fw_at_unknown')).status, 200);
  });

  it('deleting the client ends every token issued to it', async () => {
    const c = await registerClient(owner, [REDIRECT], 'Short-lived app');
    const p = pkce();
    const back = await authorize(app, c, user, { code_challenge: p.challenge, code_challenge_method: 'S256' });
    const t = await exchangeCode(app, c, back.searchParams.get('code')!, p.verifier);
    assert.equal(await apiStatus(app, t.body.access_token), 200);
    assert.equal((await owner.delete(`/oauth-clients/${c.id}`)).status, 200);
    assert.equal(await apiStatus(app, t.body.access_token), 401);
    assert.equal((await refresh(t.body.refresh_token, c)).body.error, 'invalid_client');
  });
});

describe('storage', () => {
  it('keeps codes, access and refresh tokens and client secrets only as hashes', async () => {
    const { code, verifier } = await codeFor();
    const t = (await exchangeCode(app, client, code, verifier)).body;
    const secrets = [code, t.access_token, t.refresh_token, client.clientSecret];
    if (dialectName === 'sqlite') {
      await sql`PRAGMA wal_checkpoint(TRUNCATE)`.execute(db());
      const file = readFileSync(join(app.config.dataDir, 'formwork.db')).toString('latin1');
      for (const s of secrets) assert.ok(!file.includes(s), `${s.slice(0, 8)}… is in the database file`);
    } else {
      const tables = ['oauth_codes', 'oauth_refresh_tokens', 'access_tokens', 'oauth_clients'] as const;
      for (const table of tables) {
        const rows = await sql<Record<string, unknown>>`SELECT * FROM ${sql.table(table)}`.execute(db());
        const text = JSON.stringify(rows.rows);
        for (const s of secrets) assert.ok(!text.includes(s), `${s.slice(0, 8)}… is in ${table}`);
      }
    }
  });
});
