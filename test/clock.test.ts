/**
 * Time from one clock: what the services write and judge follows the context's clock
 * (src/clock.ts), so that a test moves the clock instead of ageing rows, and the linter
 * keeps Date.now() and new Date() out of src/.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ESLint } from 'eslint';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { toWindowStart } from './support/quota.js';
import { authorizeUrl, Browser, readForm, registerClient, userWithPassword } from './support/oauth-flow.js';

const DAY_MS = 86_400_000;

async function ok<T = any>(res: Promise<{ status: number; body: T; text: string }>, what: string): Promise<T> {
  const r = await res;
  assert.equal(r.status, 200, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.body;
}

describe(`one clock (${dialectName})`, () => {
  let app: TestApp;
  let owner: TestAccount;

  before(async () => {
    app = await startTestApp();
    owner = await app.account();
  });
  after(() => app.close());

  it('stamps what every module writes with the context clock', async () => {
    const clock = app.server.ctx.clock;
    // A year on, so that a time read from the system clock cannot pass for one of this clock.
    clock.advance(365 * DAY_MS);
    const since = clock.now();
    const fromClock = (iso: string, what: string) => {
      const t = Date.parse(iso);
      assert.ok(
        t >= since && t <= clock.now(),
        `${what}: ${iso} is not by the clock (${new Date(since).toISOString()} on)`,
      );
    };

    const fresh = await app.account('Made a year on');
    fromClock((await ok(fresh.get(`/users/${fresh.userId}`), 'owner')).created, "a new account's owner");
    const folder = await ok(owner.post('/folders', { name: 'Later' }), 'folder');
    fromClock(folder.created, 'folder created');
    const renamed = await ok(owner.put(`/folders/${folder.id}`, { name: 'Later still' }), 'folder update');
    fromClock(renamed.updated, 'folder updated');

    const form = await ok(owner.post('/forms', { name: 'Later', fields: [{ type: 'text', label: 'T' }] }), 'form');
    fromClock(form.created, 'form created');
    fromClock(form.updated, 'form updated');
    await ok(owner.post(`/forms/${form.id}/fields`, { type: 'text', label: 'U' }), 'field');
    fromClock((await ok(owner.get(`/forms/${form.id}`), 'form')).updated, 'form touched by a new field');
    fromClock((await ok(owner.put(`/forms/${form.id}`, { name: 'Later 2' }), 'form update')).updated, 'form update');
    fromClock((await ok(owner.post(`/forms/${form.id}/copy`), 'copy')).created, 'form copy');
    const copy = await ok(owner.post(`/forms/${form.id}/copy`), 'copy');
    fromClock((await ok(owner.delete(`/forms/${copy.id}`), 'delete')).deleted, 'form deleted');
    fromClock((await ok(owner.post(`/forms/${copy.id}/restore`), 'restore')).updated, 'form restored');

    const submission = await ok(
      owner.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: 'x' }] }),
      'submission',
    );
    fromClock(submission.timestamp, 'submission');

    const member = await ok(
      owner.post('/users', { email: `m-${since}@example.com`, name: 'Member', role: 'member' }),
      'user',
    );
    fromClock(member.created, 'user');
    fromClock(
      (await ok(owner.put(`/users/${member.id}/permissions/${form.id}`, { level: 'view' }), 'permission')).updated,
      'permission',
    );
    fromClock(
      (await ok(owner.post('/oauth-clients', { name: 'Later app', redirectUris: ['http://127.0.0.1:9/cb'] }), 'client'))
        .created,
      'OAuth client',
    );
    fromClock((await ok(owner.post('/tokens', { name: 'later' }), 'token')).created, 'token');
  });

  it('ends a sign-in session when the clock passes its 12 hours', async () => {
    const client = await registerClient(owner);
    const user = await userWithPassword(owner);
    const browser = new Browser(app.url);
    const signIn = readForm((await browser.fetch(authorizeUrl(client))).text);
    assert.equal(signIn.action, '/oauth2/sign-in');
    assert.equal(
      (
        await browser.fetch(signIn.action, {
          method: 'POST',
          form: { ...signIn.fields, email: user.email, password: user.password },
        })
      ).status,
      303,
    );
    const pageAction = async () => readForm((await browser.fetch(authorizeUrl(client))).text).action;
    assert.equal(await pageAction(), '/oauth2/authorize', 'signed in: the consent page');
    app.server.ctx.clock.advance(12 * 3_600_000 - 60_000);
    assert.equal(await pageAction(), '/oauth2/authorize', 'still signed in a minute before the end');
    app.server.ctx.clock.advance(61_000);
    assert.equal(await pageAction(), '/oauth2/sign-in', 'the session has ended');
  });

  it("judges a card's expiry by the clock", async () => {
    const form = await ok(
      owner.post('/forms', { name: 'Cards', fields: [{ type: 'creditcard', label: 'Card' }] }),
      'form',
    );
    const clock = app.server.ctx.clock;
    const today = new Date(clock.now());
    const card = { number: '4111111111111111', expMonth: today.getUTCMonth() + 1, expYear: today.getUTCFullYear() };
    const send = () =>
      owner.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: card }] });
    await ok(send(), 'a card that runs to the end of this month');
    clock.advance(32 * DAY_MS);
    const refused = await send();
    assert.equal(refused.status, 400, refused.text);
    assert.match(refused.body.error, /the card has expired/);
  });
});

describe(`rate limit windows by the clock (${dialectName}, in memory)`, () => {
  it('opens a new minute window when the clock moves on a minute', async () => {
    const app = await startTestApp({ RATE_LIMIT_PER_MINUTE: '2', RATE_LIMIT_PER_DAY: '0' });
    try {
      const a = await app.account();
      const clock = app.server.ctx.clock;
      // To the start of a window, so that the calls below do not straddle two.
      toWindowStart(clock, 60_000);
      assert.equal((await a.get('/forms')).status, 200);
      assert.equal((await a.get('/forms')).status, 200);
      assert.equal((await a.get('/forms')).status, 429);
      clock.advance(60_000);
      assert.equal((await a.get('/forms')).status, 200);
    } finally {
      await app.close();
    }
  });
});

describe('the time lint rule', () => {
  const eslint = new ESLint();
  const problems = async (code: string, filePath: string) =>
    (await eslint.lintText(code, { filePath }))[0]!.messages
      .filter((m) => m.ruleId === 'no-restricted-properties' || m.ruleId === 'no-restricted-syntax')
      .map((m) => m.line);

  it('refuses Date.now() and new Date() without arguments in src/, but not in src/clock.ts', async () => {
    const code = [
      'export const a = Date.now();',
      'export const b = new Date();',
      'export const c = [1].map(Date.now);',
      'export const d = new Date(0);',
      'export const e = Date.UTC(2026, 0, 1);',
      '',
    ].join('\n');
    assert.deepEqual(await problems(code, 'src/modules/example/service.ts'), [1, 2, 3]);
    assert.deepEqual(await problems(code, 'src/clock.ts'), []);
  });
});
