/**
 * Personal access tokens: listing without values, making them with narrower scopes and an
 * expiry, revoking them (through the API, /oauth2/revoke and a password change) with effect
 * at once on every server, their last use written in batches; and failed authentications
 * throttled per client address, in memory and through Redis.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { ConfigError, loadConfig } from '../src/config.js';
import { hashToken } from '../src/crypto/secrets.js';
import { SCOPES } from '../src/http/access.js';
import { PAT_PREFIX } from '../src/modules/accounts/service.js';
import { writeLastUsed } from '../src/modules/tokens/repository.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { toWindowStart } from './support/quota.js';
import {
  authorize,
  basicOf,
  exchangeCode,
  pkce,
  registerClient,
  tokenRequest,
  userWithPassword,
  type Client,
} from './support/oauth-flow.js';

const REDIS_URL = process.env.FORMWORK_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
const DAY_MS = 86_400_000;
const email = () => `t-${randomBytes(5).toString('hex')}@example.com`;
const unknownToken = () => `${PAT_PREFIX}${randomBytes(32).toString('base64url')}`;

/** API calls with a given token. */
function as(app: TestApp, token: string) {
  const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
    app.request(method, `/api/v2025${path}`, { token, body, headers });
  return {
    get: (path: string) => call('GET', path),
    post: (path: string, body: unknown) => call('POST', path, body),
    put: (path: string, body: unknown) => call('PUT', path, body),
    delete: (path: string) => call('DELETE', path),
  };
}

async function ok<T = any>(res: Promise<{ status: number; body: T; text: string }>, what: string): Promise<T> {
  const r = await res;
  assert.equal(r.status, 200, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.body;
}

async function status(app: TestApp, token: string, path = '/forms'): Promise<number> {
  return (await app.request('GET', `/api/v2025${path}`, { token })).status;
}

/** The stored last use of a token, read from the database itself. */
async function storedLastUse(app: TestApp, tokenId: number): Promise<number | null> {
  const row = await app.server.db.kysely
    .selectFrom('access_tokens')
    .select('last_used_at')
    .where('id', '=', tokenId)
    .executeTakeFirstOrThrow();
  return row.last_used_at;
}

describe('token settings', () => {
  it('default to 100 failed authentications per address and a flush a minute, and name a bad one', () => {
    const c = loadConfig({});
    assert.equal(c.authFailureAttempts, 100);
    assert.equal(c.tokenUsageFlushSeconds, 60);
    const set = loadConfig({ AUTH_FAILURE_ATTEMPTS: '20', TOKEN_USAGE_FLUSH_SECONDS: '5' });
    assert.deepEqual([set.authFailureAttempts, set.tokenUsageFlushSeconds], [20, 5]);
    for (const [name, value] of [
      ['AUTH_FAILURE_ATTEMPTS', '0'],
      ['AUTH_FAILURE_ATTEMPTS', 'many'],
      ['TOKEN_USAGE_FLUSH_SECONDS', '0'],
      ['TOKEN_USAGE_FLUSH_SECONDS', '86401'],
    ] as const) {
      assert.throws(
        () => loadConfig({ [name]: value }),
        (e: unknown) => e instanceof ConfigError && e.setting === name,
        `${name}=${value}`,
      );
    }
  });
});

describe(`personal access tokens (${dialectName})`, () => {
  let app: TestApp;
  let owner: TestAccount;
  before(async () => {
    app = await startTestApp();
    owner = await app.account();
  });
  after(() => app.close());

  it('lists your tokens without their values, makes one shown once, and revokes it at once', async () => {
    const listed = await ok(owner.get('/tokens'), 'list');
    assert.equal(listed.tokens.length, 1);
    const initial = listed.tokens[0];
    assert.deepEqual(Object.keys(initial).sort(), [
      'created',
      'expiresAt',
      'id',
      'lastUsed',
      'name',
      'prefix',
      'scopes',
      'userId',
    ]);
    assert.equal(initial.name, 'initial');
    assert.equal(initial.userId, owner.userId);
    assert.equal(initial.prefix, owner.token.slice(0, 11));
    assert.deepEqual(initial.scopes, [...SCOPES]);
    assert.equal(initial.expiresAt, null);

    const made = await ok(owner.post('/tokens', { name: '  Deploy script ' }), 'create');
    assert.match(made.token, /^fw_pat_[A-Za-z0-9_-]{43}$/);
    assert.equal(made.name, 'Deploy script');
    assert.equal(made.prefix, made.token.slice(0, 11));
    assert.deepEqual(made.scopes, [...SCOPES]);
    assert.equal(made.lastUsed, null);
    assert.equal(await status(app, made.token), 200);

    const again = await ok(owner.get('/tokens'), 'list again');
    assert.deepEqual(
      again.tokens.map((t: any) => t.id),
      [initial.id, made.id],
    );
    // Neither the value nor its hash is ever listed.
    assert.ok(!JSON.stringify(again).includes(made.token.slice(11)));
    assert.ok(!JSON.stringify(again).includes(hashToken(made.token)));

    assert.deepEqual(await ok(owner.delete(`/tokens/${made.id}`), 'revoke'), { id: made.id, revoked: true });
    const refused = await app.request('GET', '/api/v2025/forms', { token: made.token });
    assert.equal(refused.status, 401);
    assert.equal(refused.body.code, 'token_invalid');
    assert.deepEqual(
      (await ok(owner.get('/tokens'), 'list after')).tokens.map((t: any) => t.id),
      [initial.id],
    );
    assert.equal((await owner.delete(`/tokens/${made.id}`)).status, 404);
    // The token that revokes may be the one it revokes.
    const self = await ok(owner.post('/tokens', { name: 'self' }), 'create');
    assert.equal((await as(app, self.token).delete(`/tokens/${self.id}`)).status, 200);
    assert.equal(await status(app, self.token), 401);
  });

  it('gives a token narrower scopes, and never more than the token that makes it', async () => {
    const narrow = await ok(owner.post('/tokens', { name: 'reader', scopes: ['admin', 'forms:read'] }), 'create');
    assert.deepEqual(narrow.scopes, ['forms:read', 'admin']);
    const api = as(app, narrow.token);
    assert.equal((await api.get('/forms')).status, 200);
    const write = await api.post('/forms', { name: 'Nope' });
    assert.equal(write.status, 403);
    assert.equal(write.body.code, 'insufficient_scope');
    assert.equal((await api.get('/submissions?search=x')).body.code, 'insufficient_scope');

    // A token it makes inherits its scopes, or fewer; more is refused.
    const child = await ok(api.post('/tokens', { name: 'child' }), 'inherit');
    assert.deepEqual(child.scopes, ['forms:read', 'admin']);
    assert.deepEqual((await ok(api.post('/tokens', { name: 'fewer', scopes: ['forms:read'] }), 'fewer')).scopes, [
      'forms:read',
    ]);
    const stronger = await api.post('/tokens', { name: 'stronger', scopes: ['forms:read', 'forms:write'] });
    assert.equal(stronger.status, 403);
    assert.equal(stronger.body.code, 'insufficient_scope');
    // Without the admin scope a token manages no tokens at all.
    const reader = await ok(owner.post('/tokens', { name: 'plain reader', scopes: ['forms:read'] }), 'create');
    for (const res of [
      await as(app, reader.token).get('/tokens'),
      await as(app, reader.token).post('/tokens', { name: 'x' }),
    ]) {
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'insufficient_scope');
    }
    for (const bad of [{ name: 'x', scopes: [] }, { name: 'x', scopes: ['everything'] }, { name: '   ' }]) {
      const res = await owner.post('/tokens', bad);
      assert.equal(res.status, 400, JSON.stringify(bad));
    }
  });

  it('lets admins manage the tokens of the users but the owner, and members only their own', async () => {
    const admin = await ok(owner.post('/users', { email: email(), name: 'Admin', role: 'admin' }), 'admin');
    const member = await ok(owner.post('/users', { email: email(), name: 'Member', role: 'member' }), 'member');
    const adminToken = (
      await ok(owner.post(`/users/${admin.id}/tokens`, { name: 'for the admin' }), 'owner makes admin token')
    ).token;
    const adminApi = as(app, adminToken);

    const made = await ok(
      adminApi.post(`/users/${member.id}/tokens`, { name: 'for the member', expiresInDays: 30 }),
      'admin makes member token',
    );
    assert.equal(made.userId, member.id);
    assert.equal(await status(app, made.token), 200);
    assert.deepEqual(
      (await ok(adminApi.get(`/users/${member.id}/tokens`), 'admin lists')).tokens.map((t: any) => t.id),
      [made.id],
    );

    // The member sees and revokes only their own, through /tokens.
    const memberApi = as(app, made.token);
    assert.deepEqual(
      (await ok(memberApi.get('/tokens'), 'member lists')).tokens.map((t: any) => t.id),
      [made.id],
    );
    const second = await ok(memberApi.post('/tokens', { name: 'second' }), 'member makes one');
    for (const res of [
      await memberApi.get(`/users/${member.id}/tokens`),
      await memberApi.delete(`/users/${admin.id}/tokens/1`),
    ]) {
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'admin_required');
    }
    // Another user's token id under /tokens, or under the wrong user, is not found.
    assert.equal(
      (await memberApi.delete(`/tokens/${(await ok(adminApi.get('/tokens'), 'admin own')).tokens[0].id}`)).status,
      404,
    );
    assert.equal((await adminApi.delete(`/users/${admin.id}/tokens/${second.id}`)).status, 404);
    assert.equal(await status(app, second.token), 200);

    assert.equal((await adminApi.delete(`/users/${member.id}/tokens/${second.id}`)).status, 200);
    assert.equal(await status(app, second.token), 401);

    // The owner's tokens are the owner's: an admin gets 403, the owner manages them either way.
    for (const res of [
      await adminApi.get(`/users/${owner.userId}/tokens`),
      await adminApi.post(`/users/${owner.userId}/tokens`, { name: 'takeover' }),
      await adminApi.delete(
        `/users/${owner.userId}/tokens/${(await ok(owner.get('/tokens'), 'owner own')).tokens[0].id}`,
      ),
    ]) {
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'owner_protected');
    }
    assert.equal(await status(app, owner.token), 200);
    assert.ok((await ok(owner.get(`/users/${owner.userId}/tokens`), 'owner lists own')).tokens.length >= 1);
    assert.equal((await owner.get(`/users/${admin.id}/tokens`)).status, 200);

    // Another account's user is not found.
    const other = await app.account();
    assert.equal((await other.get(`/users/${member.id}/tokens`)).status, 404);
    assert.equal((await other.delete(`/users/${member.id}/tokens/${made.id}`)).status, 404);
    assert.equal(await status(app, made.token), 200);
  });

  it('ends tokens of a user whose password changes, and their OAuth grants, but not the token that changed it', async () => {
    const client: Client = await registerClient(owner);
    const user = await userWithPassword(owner, 'admin');
    const own = await ok(owner.post(`/users/${user.id}/tokens`, { name: 'the one in use' }), 'token');
    const other = await ok(owner.post(`/users/${user.id}/tokens`, { name: 'another' }), 'token');
    const p = pkce();
    const back = await authorize(app, client, user, { code_challenge: p.challenge, code_challenge_method: 'S256' });
    const grant = (await exchangeCode(app, client, back.searchParams.get('code')!, p.verifier)).body;
    assert.equal(await status(app, grant.access_token), 200);

    await ok(as(app, own.token).put(`/users/${user.id}`, { password: 'a brand new password' }), 'change own password');
    assert.equal(await status(app, own.token), 200);
    assert.equal(await status(app, other.token), 401);
    assert.equal(await status(app, grant.access_token), 401);
    assert.equal(
      (await tokenRequest(app, { grant_type: 'refresh_token', refresh_token: grant.refresh_token }, basicOf(client)))
        .body.error,
      'invalid_grant',
    );
    assert.deepEqual(
      (await ok(owner.get(`/users/${user.id}/tokens`), 'list')).tokens.map((t: any) => t.id),
      [own.id],
    );

    // Changed by the owner, every token of the user ends.
    await ok(owner.put(`/users/${user.id}`, { password: 'and another one' }), 'owner changes it');
    assert.equal(await status(app, own.token), 401);

    // Setting a first password (a user who could not sign in) ends nothing.
    const fresh = await ok(owner.post('/users', { email: email(), name: 'No password yet', role: 'member' }), 'user');
    const kept = await ok(owner.post(`/users/${fresh.id}/tokens`, { name: 'kept' }), 'token');
    await ok(owner.put(`/users/${fresh.id}`, { password: 'first password' }), 'first password');
    assert.equal(await status(app, kept.token), 200);
    // A rename is no password change.
    await ok(owner.put(`/users/${fresh.id}`, { name: 'Renamed' }), 'rename');
    assert.equal(await status(app, kept.token), 200);
  });

  it('ends a personal access token at /oauth2/revoke for a client of its account, not of another', async () => {
    const client = await registerClient(owner);
    const pat = await ok(owner.post('/tokens', { name: 'leaked' }), 'token');
    const stranger = await app.account();
    const strangerClient = await registerClient(stranger);

    const foreign = await tokenRequest(app, { token: pat.token }, basicOf(strangerClient), '/oauth2/revoke');
    assert.equal(foreign.status, 200);
    assert.equal(await status(app, pat.token), 200);

    const res = await tokenRequest(
      app,
      { token: pat.token, token_type_hint: 'access_token' },
      basicOf(client),
      '/oauth2/revoke',
    );
    assert.equal(res.status, 200);
    assert.equal(await status(app, pat.token), 401);
    // Introspection still tells clients nothing about personal access tokens.
    assert.deepEqual((await tokenRequest(app, { token: owner.token }, basicOf(client), '/oauth2/introspect')).body, {
      active: false,
    });
  });

  it('validates expiry: days or a time in the future, not both', async () => {
    const at = new Date(Date.now() + 3 * DAY_MS).toISOString();
    const byTime = await ok(owner.post('/tokens', { name: 'until', expiresAt: at }), 'expiresAt');
    assert.equal(byTime.expiresAt, at);
    const byDays = await ok(owner.post('/tokens', { name: 'days', expiresInDays: 2 }), 'expiresInDays');
    const left = Date.parse(byDays.expiresAt) - Date.parse(byDays.created);
    assert.equal(left, 2 * DAY_MS);
    for (const [body, property] of [
      [{ name: 'x', expiresAt: new Date(Date.now() - 1000).toISOString() }, 'body.expiresAt'],
      [{ name: 'x', expiresAt: new Date(Date.now() + 3651 * DAY_MS).toISOString() }, 'body.expiresAt'],
      [{ name: 'x', expiresAt: at, expiresInDays: 2 }, 'body.expiresInDays'],
      [{ name: 'x', expiresInDays: 0 }, 'body.expiresInDays'],
      [{ name: 'x', expiresInDays: 3651 }, 'body.expiresInDays'],
      [{ name: 'x', expiresAt: 'next tuesday' }, 'body.expiresAt'],
    ] as const) {
      const res = await owner.post('/tokens', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.ok(
        res.body.details.some((d: any) => d.property === property),
        `${JSON.stringify(body)}: ${res.text}`,
      );
    }
  });
});

describe(`token expiry (${dialectName})`, () => {
  it('refuses a token once its expiry has passed, and lists it as expired', async () => {
    const app = await startTestApp();
    try {
      const owner = await app.account();
      const made = await ok(owner.post('/tokens', { name: 'a day', expiresInDays: 1 }), 'create');
      assert.equal(await status(app, made.token), 200);
      app.server.ctx.clock.advance(DAY_MS - 60_000);
      assert.equal(await status(app, made.token), 200);
      app.server.ctx.clock.advance(61_000);
      const refused = await app.request('GET', '/api/v2025/forms', { token: made.token });
      assert.equal(refused.status, 401);
      assert.equal(refused.body.code, 'token_invalid');
      const listed = (await ok(owner.get('/tokens'), 'list')).tokens.find((t: any) => t.id === made.id);
      assert.ok(Date.parse(listed.expiresAt) < app.server.ctx.clock.now());
    } finally {
      await app.close();
    }
  });
});

describe(`revocation across servers (${dialectName})`, () => {
  it('a token revoked through one server is refused by another at once', async () => {
    const first = await startTestApp();
    const second = await startTestApp({}, first);
    try {
      const owner = await first.account();
      const made = await ok(owner.post('/tokens', { name: 'shared' }), 'create');
      // Both servers accept it, the second several times (nothing may keep it alive there).
      assert.equal(await status(first, made.token), 200);
      for (let i = 0; i < 3; i++) assert.equal(await status(second, made.token), 200);
      await ok(as(second, owner.token).delete(`/tokens/${made.id}`), 'revoke through the second');
      assert.equal(await status(first, made.token), 401);
      assert.equal(await status(second, made.token), 401);

      // And the other way round, through the user route.
      const again = await ok(owner.post(`/users/${owner.userId}/tokens`, { name: 'shared 2' }), 'create');
      assert.equal(await status(second, again.token), 200);
      await ok(owner.delete(`/users/${owner.userId}/tokens/${again.id}`), 'revoke through the first');
      assert.equal(await status(second, again.token), 401);
    } finally {
      await second.close();
      await first.close();
    }
  });
});

describe(`last use of tokens (${dialectName})`, () => {
  it('notes uses in memory and writes them in one batch, not once per request', async () => {
    // The helpers' flush interval is a day: within this test only closing writes.
    const first = await startTestApp();
    const second = await startTestApp({}, first);
    let secondOpen = true;
    try {
      const owner = await first.account();
      const a = await ok(owner.post('/tokens', { name: 'a' }), 'create');
      const b = await ok(owner.post('/tokens', { name: 'b' }), 'create');
      for (let i = 0; i < 5; i++) {
        assert.equal(await status(second, a.token), 200);
        assert.equal(await status(second, b.token), 200);
      }
      assert.equal(await storedLastUse(first, a.id), null, 'no write per request');
      const before = Date.now();
      secondOpen = false;
      await second.close();
      const listed = (await ok(owner.get('/tokens'), 'list')).tokens;
      for (const t of [a, b]) {
        const lastUsed = listed.find((x: any) => x.id === t.id).lastUsed;
        assert.ok(
          lastUsed !== null && Date.parse(lastUsed) <= before && Date.parse(lastUsed) >= Date.parse(t.created),
          `${t.name}: ${lastUsed}`,
        );
      }
    } finally {
      if (secondOpen) await second.close();
      await first.close();
    }
  });

  it('writes them every TOKEN_USAGE_FLUSH_SECONDS, and never moves a last use back', async () => {
    const app = await startTestApp({ TOKEN_USAGE_FLUSH_SECONDS: '1' });
    try {
      const owner = await app.account();
      const made = await ok(owner.post('/tokens', { name: 'polled' }), 'create');
      assert.equal(await status(app, made.token), 200);
      const deadline = Date.now() + 30_000;
      let lastUsed: string | null = null;
      while (lastUsed === null && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        lastUsed = (await ok(owner.get('/tokens'), 'list')).tokens.find((t: any) => t.id === made.id).lastUsed;
      }
      assert.ok(lastUsed !== null, 'the use was written within 30 s');

      // A later use written elsewhere is not overwritten by an older one.
      const later = Date.parse(lastUsed) + 3_600_000;
      await app.server.db.kysely
        .updateTable('access_tokens')
        .set({ last_used_at: later })
        .where('id', '=', made.id)
        .execute();
      await writeLastUsed(app.server.db.kysely, [[made.id, later - 1000]]);
      assert.equal(await storedLastUse(app, made.id), later);
    } finally {
      await app.close();
    }
  });
});

/** Requests that authenticate wrongly, from `address` (the apps trust X-Forwarded-For). */
function failures(app: TestApp, address: string, client: Client) {
  const headers = { 'x-forwarded-for': address };
  const form = async (path: string, body: Record<string, string>, secret: string) => {
    const res = await fetch(`${app.url}${path}`, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${client.clientId}:${secret}`).toString('base64')}`,
      },
      body: new URLSearchParams(body).toString(),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text === '' ? {} : JSON.parse(text) };
  };
  return {
    bearer: (token = unknownToken()) => app.request('GET', '/api/v2025/forms', { token, headers }),
    token: (secret = 'fw_cs_wrong') =>
      form('/oauth2/token', { grant_type: 'refresh_token', refresh_token: 'fw_rt_unknown' }, secret),
    revoke: (secret = 'fw_cs_wrong') => form('/oauth2/revoke', { token: 'fw_at_unknown' }, secret),
    introspect: (secret = 'fw_cs_wrong') => form('/oauth2/introspect', { token: 'fw_at_unknown' }, secret),
  };
}

const address = () => `10.${randomBytes(3).join('.')}`;

function assertRetryAfter(headers: Headers): void {
  const retryAfter = Number(headers.get('retry-after'));
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 900,
    `Retry-After ${headers.get('retry-after')}`,
  );
}

describe(`failed authentications per address (${dialectName}, in memory)`, () => {
  let app: TestApp;
  let owner: TestAccount;
  let client: Client;
  before(async () => {
    app = await startTestApp({ AUTH_FAILURE_ATTEMPTS: '4', TRUST_PROXY: 'true' });
    owner = await app.account();
    client = await registerClient(owner);
  });
  after(() => app.close());

  // The failures count in windows of a quarter hour on the clock (rate-limit.ts): each test starts one.
  it('refuses bad bearer tokens past the limit with 429, while valid tokens and other addresses pass', async () => {
    toWindowStart(app.server.ctx.clock, 900_000);
    const from = failures(app, address(), client);
    for (let i = 0; i < 4; i++) {
      const res = await from.bearer();
      assert.equal(res.status, 401);
      assert.equal(res.body.code, 'token_invalid');
    }
    for (let i = 0; i < 3; i++) {
      const refused = await from.bearer();
      assert.equal(refused.status, 429);
      assert.deepEqual(Object.keys(refused.body).sort(), ['code', 'error', 'status']);
      assert.equal(refused.body.status, 'error');
      assert.equal(refused.body.code, 'rate_limited');
      assertRetryAfter(refused.headers);
    }
    // A revoked token is a failure like an unknown one.
    const revoked = await ok(owner.post('/tokens', { name: 'revoked' }), 'create');
    await ok(owner.delete(`/tokens/${revoked.id}`), 'revoke');
    assert.equal((await from.bearer(revoked.token)).status, 429);
    // A valid token from the same address still works; another address still gets 401.
    assert.equal((await from.bearer(owner.token)).status, 200);
    assert.equal((await failures(app, address(), client).bearer()).status, 401);
    // Missing and malformed headers are not attempts: still 401.
    assert.equal(
      (
        await app.request('GET', '/api/v2025/forms', {
          headers: { 'x-forwarded-for': '10.0.0.1', authorization: 'Bearer nope' },
        })
      ).status,
      401,
    );
  });

  it('counts wrong client secrets at the token, revocation and introspection endpoints, in the same count', async () => {
    toWindowStart(app.server.ctx.clock, 900_000);
    const where = address();
    const from = failures(app, where, client);
    assert.equal((await from.bearer()).status, 401);
    const token = await from.token();
    assert.equal(token.body.error, 'invalid_client');
    assert.equal((await from.revoke()).status, 401);
    assert.equal((await from.introspect()).status, 401);
    for (const res of [await from.token(), await from.revoke(), await from.introspect()]) {
      assert.equal(res.status, 429);
      assert.equal(res.body.error, 'invalid_client');
      assert.match(res.body.error_description, /try again in \d+ s/);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assertRetryAfter(res.headers);
    }
    assert.equal((await from.bearer()).status, 429);
    // The right secret from the same address passes.
    const right = await from.introspect(client.clientSecret);
    assert.equal(right.status, 200);
    assert.deepEqual(right.body, { active: false });
    assert.equal((await from.revoke(client.clientSecret)).status, 200);
  });
});

// Without FORMWORK_TEST_REDIS_URL a machine without Redis skips this; with it, Redis is required.
async function redisSkip(): Promise<string | undefined> {
  const redis = new Redis(REDIS_URL, {
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    if (process.env.FORMWORK_TEST_REDIS_URL) throw error;
    return `no Redis at ${REDIS_URL}`;
  } finally {
    redis.disconnect();
  }
}

describe(
  `failed authentications counted through Redis by two servers (${dialectName})`,
  { skip: await redisSkip() },
  () => {
    it('refuses on either server once the failures on both reach the limit', async () => {
      const env = { AUTH_FAILURE_ATTEMPTS: '3', TRUST_PROXY: 'true', REDIS_URL };
      const first = await startTestApp(env);
      const second = await startTestApp(env, first);
      const where = address();
      try {
        // Both to the start of one quarter hour of failures, counted in Redis by each one's clock.
        toWindowStart(first.server.ctx.clock, 900_000, second.server.ctx.clock);
        const owner = await first.account();
        const client = await registerClient(owner);
        assert.equal((await failures(first, where, client).bearer()).status, 401);
        assert.equal((await failures(second, where, client).token()).body.error, 'invalid_client');
        assert.equal((await failures(first, where, client).revoke()).status, 401);
        assert.equal((await failures(second, where, client).bearer()).status, 429);
        assert.equal((await failures(first, where, client).introspect()).status, 429);
        assert.equal((await failures(second, where, client).bearer(owner.token)).status, 200);
      } finally {
        await second.close();
        await first.close();
        const redis = new Redis(REDIS_URL);
        const keys = await redis.keys(`fw:rl:authfail:ip:${where}:*`);
        if (keys.length) await redis.del(...keys);
        await redis.quit();
      }
    });
  },
);
