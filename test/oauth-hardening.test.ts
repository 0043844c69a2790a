/**
 * Two findings of an audit, over HTTP: an OAuth access token, even one granted `admin`, makes
 * no personal access token (which would outlive its grant and its application); and an OAuth
 * client's redirect URIs are taken only in the canonical form the URL parser writes, without
 * control characters, whitespace or a user name and password.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import {
  authorize,
  authorizeUrl,
  basicOf,
  Browser,
  exchangeCode,
  pkce,
  registerClient,
  REDIRECT,
  tokenRequest,
  userWithPassword,
} from './support/oauth-flow.js';

let app: TestApp;
let owner: TestAccount;

before(async () => {
  app = await startTestApp();
  owner = await app.account();
});
after(() => app.close());

const call = (token: string, method: string, path: string, body?: unknown) =>
  app.request(method, path.startsWith('/api/') ? path : `/api/v2025${path}`, { token, body });

/** An OAuth access token of an admin of owner's account, granted these scopes, with its client. */
async function oauthToken(scope: string) {
  const client = await registerClient(owner);
  const user = await userWithPassword(owner, 'admin');
  const p = pkce();
  const back = await authorize(app, client, user, { scope, code_challenge: p.challenge });
  const grant = await exchangeCode(app, client, back.searchParams.get('code')!, p.verifier);
  assert.equal(grant.status, 200, JSON.stringify(grant.body));
  assert.match(grant.body.access_token, /^fw_at_/);
  assert.equal(grant.body.scope, scope);
  return { client, user, accessToken: grant.body.access_token as string, refreshToken: grant.body.refresh_token };
}

async function patCount(userId: number): Promise<number> {
  const res = await owner.get(`/users/${userId}/tokens`);
  assert.equal(res.status, 200, res.text);
  return res.body.tokens.length;
}

describe(`OAuth access tokens make no personal access tokens (${dialectName})`, () => {
  it('refuses POST /tokens and /users/{userId}/tokens with 403 insufficient_scope, even with admin', async () => {
    const { user, accessToken } = await oauthToken('admin forms:read');
    const member = await owner.post<{ id: number }>('/users', {
      email: `m-${Date.now()}@example.com`,
      name: 'Member',
      role: 'member',
    });
    assert.equal(member.status, 200, member.text);
    // The token holds admin: it reads the user's tokens.
    assert.equal((await call(accessToken, 'GET', '/tokens')).status, 200);

    for (const [path, body] of [
      ['/tokens', { name: 'x' }],
      ['/tokens', { name: 'x', scopes: ['forms:read'], expiresInDays: 1 }],
      ['/api/v2/tokens', { name: 'x' }],
      [`/users/${user.id}/tokens`, { name: 'x' }],
      [`/users/${member.body.id}/tokens`, { name: 'x' }],
    ] as const) {
      const res = await call(accessToken, 'POST', path, body);
      assert.equal(res.status, 403, `${path}: ${res.text}`);
      assert.equal(res.body.status, 'error');
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="formwork", error="insufficient_scope"');
      assert.equal(res.body.code, 'insufficient_scope');
      assert.match(res.body.error, /OAuth access token cannot make personal access tokens/);
      assert.ok(!res.text.includes('fw_pat_'), res.text);
    }
    assert.equal(await patCount(user.id), 0, 'nothing was made');
    assert.equal(await patCount(member.body.id), 0, 'nothing was made');

    // A personal access token of the same user still makes one.
    const pat = await owner.post(`/users/${user.id}/tokens`, { name: 'own' });
    assert.equal(pat.status, 200, pat.text);
    const made = await call(pat.body.token, 'POST', '/tokens', { name: 'made by a personal token' });
    assert.equal(made.status, 200, made.text);
    assert.match(made.body.token, /^fw_pat_/);
    assert.equal(await patCount(user.id), 2);
  });

  it('leaves nothing of the application working once its client is deleted', async () => {
    const { client, accessToken, refreshToken } = await oauthToken('admin');
    assert.equal((await call(accessToken, 'POST', '/tokens', { name: 'keep me' })).status, 403);
    assert.equal((await owner.delete(`/oauth-clients/${client.id}`)).status, 200);
    assert.equal((await call(accessToken, 'GET', '/tokens')).status, 401);
    const refreshed = await tokenRequest(
      app,
      { grant_type: 'refresh_token', refresh_token: refreshToken },
      basicOf(client),
    );
    assert.notEqual(refreshed.status, 200);
  });
});

describe(`OAuth client redirect URIs (${dialectName})`, () => {
  const refused: [string, RegExp][] = [
    ['https://app.example.com/cb\r\nSet-Cookie: x=1', /control characters or whitespace \(U\+000D/],
    ['https://app.example.com/cb\nx', /control characters or whitespace \(U\+000A/],
    ['https://app.example.com/c\tb', /control characters or whitespace \(U\+0009/],
    ['https://app.example.com/c b', /control characters or whitespace \(U\+0020/],
    ['https://app.example.com/cb\u0000', /./],
    ['https://app.example.com/cb\u0085', /control characters or whitespace \(U\+0085/],
    ['https://user:pw@app.example.com/cb', /user name or password/],
    ['https://user@app.example.com/cb', /user name or password/],
    ['https:app.example.com/cb', /write it as https:\/\/app\.example\.com\/cb$/],
    ['https:/app.example.com/cb', /write it as https:\/\/app\.example\.com\/cb$/],
    ['https://@app.example.com/cb', /write it as https:\/\/app\.example\.com\/cb$/],
    ['https://app.example.com', /write it as https:\/\/app\.example\.com\/$/],
    ['HTTPS://App.Example.com/cb', /write it as https:\/\/app\.example\.com\/cb$/],
    ['https://app.example.com:443/cb', /write it as https:\/\/app\.example\.com\/cb$/],
    ['https://app.example.com/a/../cb', /write it as https:\/\/app\.example\.com\/cb$/],
    ['https://app.example.com\\cb', /write it as https:\/\/app\.example\.com\/cb$/],
    ['https://app.example.com/café', /write it as https:\/\/app\.example\.com\/caf%C3%A9$/],
    // The rules that were there before.
    ['http://app.example.com/cb', /must use https/],
    ['https://app.example.com/cb#frag', /fragment/],
    ['not-a-url', /absolute URL/],
  ];

  it('refuses, on create and on update, URIs the service would not redirect to as written', async () => {
    const existing = await registerClient(owner, ['https://app.example.com/cb']);
    const before = (await owner.get('/oauth-clients')).body.clients.length;
    for (const [uri, why] of refused) {
      for (const res of [
        await owner.post('/oauth-clients', { name: 'Bad', redirectUris: ['https://app.example.com/ok', uri] }),
        await owner.put(`/oauth-clients/${existing.id}`, { redirectUris: ['https://app.example.com/ok', uri] }),
      ]) {
        // NUL is refused before the service sees it (invalid_characters).
        if (uri.includes('\u0000')) {
          assert.equal(res.status, 400, JSON.stringify(uri));
          continue;
        }
        assert.equal(res.status, 400, `${JSON.stringify(uri)}: ${res.text}`);
        assert.equal(res.body.code, 'invalid_request');
        assert.equal(res.body.details[0].property, 'body.redirectUris[1]');
        assert.match(res.body.details[0].message, why, JSON.stringify(uri));
      }
    }
    assert.equal((await owner.get('/oauth-clients')).body.clients.length, before, 'nothing was created');
    assert.deepEqual((await owner.get(`/oauth-clients/${existing.id}`)).body.redirectUris, [
      'https://app.example.com/cb',
    ]);
  });

  it('takes canonical URIs as sent, loopback http and queries included', async () => {
    const uris = [
      'http://localhost:3000/callback',
      'http://127.0.0.1:9/callback',
      'http://[::1]:8000/cb',
      'https://app.example.com/',
      'https://app.example.com/cb?x=1&y=%20',
      'https://xn--bcher-kva.example/caf%C3%A9',
    ];
    const res = await owner.post('/oauth-clients', { name: 'Good', redirectUris: uris });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.redirectUris, uris);
    const updated = await owner.put(`/oauth-clients/${res.body.id}`, { redirectUris: [...uris].reverse() });
    assert.equal(updated.status, 200, updated.text);
    assert.deepEqual(updated.body.redirectUris, [...uris].reverse());
  });

  it('leaves a URI stored before the rule as it is, and compares it as stored', async () => {
    const client = await registerClient(owner);
    const old = `${REDIRECT.replace('http:', 'HTTP:')}`;
    await app.server.db.kysely
      .updateTable('oauth_clients')
      .set({ redirect_uris: JSON.stringify([old]) })
      .where('id', '=', client.id)
      .execute();
    const renamed = await owner.put(`/oauth-clients/${client.id}`, { name: 'Renamed' });
    assert.equal(renamed.status, 200, renamed.text);
    assert.deepEqual(renamed.body.redirectUris, [old]);
    const page = async (uri: string) => new Browser(app.url).fetch(authorizeUrl(client, { redirect_uri: uri }));
    const asStored = await page(old);
    assert.equal(asStored.status, 200, asStored.text.slice(0, 500));
    assert.match(asStored.text, /Sign in/);
    assert.equal((await page(REDIRECT)).status, 400, 'compared as stored, not as parsed');
  });
});

describe(`the token endpoint's parameters (${dialectName})`, () => {
  it('refuses a parameter given more than once with 400 invalid_request, on both token paths', async () => {
    const client = await registerClient(owner);
    const id = encodeURIComponent(client.clientId);
    const secret = encodeURIComponent(client.clientSecret);
    const bodies = [
      `grant_type=refresh_token&refresh_token=x&refresh_token=y&client_id=${id}&client_secret=${secret}`,
      `grant_type=refresh_token&refresh_token=abc&client_id=${id}&client_id=other&client_secret=${secret}`,
      `grant_type=authorization_code&code=a&code=b&redirect_uri=x&client_id=${id}&client_secret=${secret}`,
      `grant_type=refresh_token&refresh_token=abc&client_id=${id}&client_secret=${secret}&client_secret=x`,
    ];
    for (const path of ['/oauth2/token', '/api/v2/oauth2/token'])
      for (const body of bodies) {
        const res = await fetch(`${app.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body,
        });
        const answer = (await res.json()) as { error: string; error_description: string };
        assert.equal(res.status, 400, `${path} ${body}: ${JSON.stringify(answer)}`);
        assert.equal(answer.error, 'invalid_request');
        assert.match(answer.error_description, /^Parameters given more than once: /);
      }
  });
});
