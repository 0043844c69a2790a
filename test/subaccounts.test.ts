import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { runCommand } from '../src/cli/commands.js';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';

function expectError(res: Reply, status: number, code: string): void {
  assert.equal(res.status, status, res.text.slice(0, 500));
  assert.equal(res.body.status, 'error');
  assert.equal(res.body.code, code, res.text.slice(0, 500));
}

const email = (what: string) => `${what}-${randomBytes(5).toString('hex')}@example.com`;

describe(`subaccounts (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;
  /** A's subaccount, with a client acting as its owner (a token made as an operator would). */
  let sub: any;
  let subOwner: TestAccount['get'];

  before(async () => {
    app = await startTestApp();
    a = await app.account('Parent A');
    b = await app.account('Other B');
    const res = await a.post('/subaccount', {
      name: 'Branch',
      email: email('branch'),
      password: 'long enough password',
    });
    assert.equal(res.status, 201, res.text);
    sub = res.body;
    const token = (await createPersonalToken(app.server.ctx, sub.owner.id)).token;
    subOwner = (path, options) => app.request('GET', `/api/v2025${path}`, { token, ...options });
  });
  after(() => app.close());

  /** A subaccount's default theme, as the parent sees it. */
  async function subDefault(subaccountId: number): Promise<any> {
    const list = await a.get(`/subaccount/${subaccountId}/themes`);
    assert.equal(list.status, 200, list.text);
    return list.body.themes.find((t: any) => t.isDefault);
  }

  it('creates a subaccount (201) with its owner and a default theme, and lists it', async () => {
    assert.equal(sub.name, 'Branch');
    assert.match(sub.owner.email, /^branch-/);
    assert.equal(sub.formsCount, 0);
    assert.equal(JSON.stringify(sub).includes('password'), false);
    const list = await a.get('/subaccount');
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.subaccounts.map((s: any) => s.id),
      [sub.id],
    );
    assert.equal(list.body.total, 1);
    assert.equal(list.body.pageNumber, 1);
    // Its own account: its owner sees its own data, and no subaccounts of its own.
    const own = await subOwner('/forms');
    assert.equal(own.status, 200, own.text);
    assert.equal(own.body.total, 0);
    assert.equal((await subOwner('/subaccount')).body.total, 0);
    assert.ok(await subDefault(sub.id));
    // Bad input and paging.
    expectError(await a.post('/subaccount', { name: 'X', email: 'not an email' }), 400, 'validation_failed');
    const blank = await a.post('/subaccount', { name: '   ', email: email('blank') });
    expectError(blank, 400, 'invalid_request');
    assert.equal(blank.body.details[0].property, 'body.name', 'named as the request names it');
    expectError(await a.get('/subaccount?pageNumber=0'), 400, 'validation_failed');
    const second = await a.post('/subaccount', { name: 'Second', email: email('second') });
    assert.equal(second.status, 201);
    const paged = await a.get('/subaccount?pageSize=1&pageNumber=2');
    assert.deepEqual(
      paged.body.subaccounts.map((s: any) => s.id),
      [second.body.id],
    );
    assert.equal(paged.body.pages, 2);
  });

  it('copies a form into a subaccount (201), with its webhooks when asked', async () => {
    const list = (await a.post('/smartlists', { name: 'Colours' })).body;
    await a.post(`/smartlists/${list.id}/bulkoptions`, {
      options: [
        { label: 'Red', value: 'red' },
        { label: 'Blue', value: 'blue' },
      ],
    });
    const form = (
      await a.post('/forms', {
        name: 'Survey',
        settings: { description: 'About you' },
        fields: [
          { type: 'text', label: 'Name' },
          { type: 'select', label: 'Colour', smartList: list.id },
        ],
      })
    ).body;
    const hook = await a.post(`/form/${form.id}/webhook`, {
      url: 'https://example.com/hook',
      hmacSecret: 'shh secret',
      handshakeKey: 'hand',
    });
    assert.equal(hook.status, 200, hook.text);

    const plain = await a.post(`/subaccount/${sub.id}/form/${form.id}/copy`);
    assert.equal(plain.status, 201, plain.text);
    assert.equal(plain.body.name, 'Survey (copy)');
    assert.equal(plain.body.folder, null);
    assert.equal(plain.body.settings.description, 'About you');
    assert.equal(plain.body.themeId, (await subDefault(sub.id)).id);
    assert.deepEqual(
      plain.body.fields.map((f: any) => f.label),
      ['Name', 'Colour'],
    );
    const colour = plain.body.fields[1];
    assert.equal(colour.smartList, null, "the parent's list stays with the parent");
    assert.deepEqual(
      colour.options.map((o: any) => o.value),
      ['red', 'blue'],
    );
    // The copy is the subaccount's: its owner reads it, the parent does not (outside these routes).
    const read = await subOwner(`/forms/${plain.body.id}?withFields=true`);
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.fields[1].options.length, 2);
    expectError(await a.get(`/forms/${plain.body.id}`), 404, 'form_not_found');
    assert.equal((await subOwner(`/form/${plain.body.id}/webhook`)).body.webhooks.length, 0);

    const withHooks = await a.post(`/subaccount/${sub.id}/form/${form.id}/copy?withIntegrations=true`);
    assert.equal(withHooks.status, 201, withHooks.text);
    const hooks = (await subOwner(`/form/${withHooks.body.id}/webhook`)).body.webhooks;
    assert.equal(hooks.length, 1);
    assert.equal(hooks[0].url, 'https://example.com/hook');
    assert.equal(hooks[0].hmacSecretSet, true);
    // The copy takes submissions in the subaccount.
    const made = await app.request('POST', `/api/v2025/forms/${withHooks.body.id}/submissions`, {
      token: (await createPersonalToken(app.server.ctx, sub.owner.id)).token,
      body: { fields: [{ id: withHooks.body.fields[1].id, value: 'blue' }] },
    });
    assert.equal(made.status, 200, made.text);

    expectError(await a.post(`/subaccount/${sub.id}/form/2147483647/copy`), 404, 'form_not_found');
    expectError(await a.post(`/subaccount/2147483647/form/${form.id}/copy`), 404, 'subaccount_not_found');
    expectError(
      await a.post(`/subaccount/${sub.id}/form/${form.id}/copy?withIntegrations=maybe`),
      400,
      'validation_failed',
    );
    assert.equal((await a.get('/subaccount')).body.subaccounts.find((s: any) => s.id === sub.id).formsCount, 2);
  });

  it('copies a theme into a subaccount (201, a new string id), lists its themes and assigns one to its form', async () => {
    const theme = (
      await a.post('/themes', { name: 'House', colors: { primary: '#123456' }, customCss: '.fw-title{color:red}' })
    ).body;
    const copied = await a.post(`/subaccount/${sub.id}/theme/${theme.id}/copy`);
    assert.equal(copied.status, 201, copied.text);
    assert.match(copied.body.themeId, /^th_[A-Za-z0-9_-]{16}$/);
    assert.notEqual(copied.body.themeId, theme.id);
    assert.deepEqual(Object.keys(copied.body), ['themeId']);

    const themes = await a.get(`/subaccount/${sub.id}/themes?pageNumber=1&pageSize=10`);
    assert.equal(themes.status, 200);
    assert.equal(themes.body.pageNumber, 1);
    const copy = themes.body.themes.find((t: any) => t.id === copied.body.themeId);
    assert.equal(copy.name, 'House');
    assert.equal(copy.colors.primary, '#123456');
    assert.equal(copy.customCss, '.fw-title{color:red}');
    assert.equal(copy.isDefault, false);
    // 1-based paging: page 1 of size 1 is the default, page 2 the copy, page 3 nothing.
    assert.ok((await a.get(`/subaccount/${sub.id}/themes?pageSize=1&pageNumber=1`)).body.themes[0].isDefault);
    assert.equal((await a.get(`/subaccount/${sub.id}/themes?pageSize=1&pageNumber=3`)).body.themes.length, 0);
    expectError(await a.get(`/subaccount/${sub.id}/themes?pageNumber=0`), 400, 'validation_failed');
    // The copy is not the parent's theme.
    expectError(await a.get(`/themes/${copied.body.themeId}`), 404, 'theme_not_found');

    const form = (await subOwner('/forms')).body.forms[0];
    const assigned = await a.put(`/subaccount/${sub.id}/forms/${form.id}/theme`, { themeId: copied.body.themeId });
    assert.equal(assigned.status, 200, assigned.text);
    assert.deepEqual(assigned.body, { formId: form.id, themeId: copied.body.themeId });
    assert.equal((await subOwner(`/forms/${form.id}`)).body.themeId, copied.body.themeId);
    // The form's hosted page shows it.
    const page = await app.request('GET', `/f/${form.viewKey}`);
    const cssUrl = /href="(\/f\/[^"]+\/theme\.css\?v=[0-9a-f]+)"/.exec(page.text)![1]!;
    assert.match((await app.request('GET', cssUrl)).text, /--fw-accent: #123456;[\s\S]*\.fw-title\{color:red\}/);

    const using = await a.get(`/subaccount/${sub.id}/themes/${copied.body.themeId}/forms?pageNumber=1`);
    assert.equal(using.status, 200);
    assert.deepEqual(
      using.body.forms.map((f: any) => f.id),
      [form.id],
    );
    assert.equal(using.body.total, 1);
    assert.equal(using.body.forms[0].themeId, copied.body.themeId);

    // 400: a theme that is not the subaccount's (the parent's own, or none); a deleted form.
    for (const themeId of [theme.id, 'th_AAAAAAAAAAAAAAAA']) {
      const res = await a.put(`/subaccount/${sub.id}/forms/${form.id}/theme`, { themeId });
      expectError(res, 400, 'invalid_theme');
      assert.equal(res.body.details[0].property, 'body.themeId');
    }
    expectError(
      await a.put(`/subaccount/${sub.id}/forms/${form.id}/theme`, { themeId: 'x' }),
      400,
      'validation_failed',
    );
    expectError(await a.put(`/subaccount/${sub.id}/forms/${form.id}/theme`, {}), 400, 'validation_failed');
    const doomed = await app.request('POST', `/api/v2025/subaccount/${sub.id}/form/${form.id}/copy`, {
      token: a.token,
    });
    assert.equal(doomed.status, 404, 'a form of the subaccount is not a form of the parent');
    const parentForm = (await a.post('/forms', { name: 'To delete' })).body;
    const copyToDelete = (await a.post(`/subaccount/${sub.id}/form/${parentForm.id}/copy`)).body;
    const subToken = (await createPersonalToken(app.server.ctx, sub.owner.id)).token;
    await app.request('DELETE', `/api/v2025/forms/${copyToDelete.id}`, { token: subToken });
    expectError(
      await a.put(`/subaccount/${sub.id}/forms/${copyToDelete.id}/theme`, { themeId: copied.body.themeId }),
      400,
      'invalid_form',
    );
    // 404: a form of the parent, not of the subaccount; an unknown theme in the path.
    expectError(
      await a.put(`/subaccount/${sub.id}/forms/${parentForm.id}/theme`, { themeId: copied.body.themeId }),
      404,
      'form_not_found',
    );
    expectError(await a.post(`/subaccount/${sub.id}/theme/th_AAAAAAAAAAAAAAAA/copy`), 404, 'theme_not_found');
    expectError(await a.get(`/subaccount/${sub.id}/themes/th_AAAAAAAAAAAAAAAA/forms`), 404, 'theme_not_found');
  });

  it("deletes a subaccount's theme: its forms switch to the default; the default is 400; a locked theme in use 409", async () => {
    const def = await subDefault(sub.id);
    expectError(await a.delete(`/subaccount/${sub.id}/themes/${def.id}`), 400, 'default_theme');

    const source = (await a.post('/themes', { name: 'Locked', lockedInUse: true })).body;
    const locked = (await a.post(`/subaccount/${sub.id}/theme/${source.id}/copy`)).body.themeId;
    const loose = (
      await a.post(`/subaccount/${sub.id}/theme/${(await a.post('/themes', { name: 'Loose' })).body.id}/copy`)
    ).body.themeId;
    const forms = (await subOwner('/forms?pageSize=100')).body.forms;
    assert.ok(forms.length >= 2);
    await a.put(`/subaccount/${sub.id}/forms/${forms[0].id}/theme`, { themeId: locked });
    await a.put(`/subaccount/${sub.id}/forms/${forms[1].id}/theme`, { themeId: loose });

    const refused = await a.delete(`/subaccount/${sub.id}/themes/${locked}`);
    expectError(refused, 409, 'theme_in_use');
    assert.equal((await subOwner(`/forms/${forms[0].id}`)).body.themeId, locked);

    const etag = (await subOwner(`/forms/${forms[1].id}`)).headers.get('etag')!;
    const gone = await a.delete(`/subaccount/${sub.id}/themes/${loose}`);
    assert.equal(gone.status, 200, gone.text);
    assert.deepEqual(gone.body, { themeId: loose, defaultThemeId: def.id, switchedForms: 1 });
    const read = await subOwner(`/forms/${forms[1].id}`, { headers: { 'if-none-match': etag } });
    assert.equal(read.status, 200, 'the switch gives the form a new version');
    assert.equal(read.body.themeId, def.id);
    const onDefault = await a.get(`/subaccount/${sub.id}/themes/${def.id}/forms?pageSize=100`);
    assert.ok(onDefault.body.forms.some((f: any) => f.id === forms[1].id));
    expectError(await a.delete(`/subaccount/${sub.id}/themes/${loose}`), 404, 'theme_not_found');
    expectError(await a.get(`/subaccount/${sub.id}/themes/${loose}/forms`), 404, 'theme_not_found');
  });

  it("answers 404 for a subaccount that is not the caller's, whatever else the request names", async () => {
    const theme = (await b.post('/themes', { name: 'B theme' })).body;
    const bForm = (await b.post('/forms', { name: 'B form' })).body;
    const subTheme = (await subDefault(sub.id)).id;
    const subForm = (await subOwner('/forms')).body.forms[0];
    const attempts: [string, string, unknown?][] = [
      ['GET', `/subaccount/${sub.id}/themes`],
      ['GET', `/subaccount/${sub.id}/themes/${subTheme}/forms`],
      ['DELETE', `/subaccount/${sub.id}/themes/${subTheme}`],
      ['POST', `/subaccount/${sub.id}/theme/${theme.id}/copy`],
      ['POST', `/subaccount/${sub.id}/form/${bForm.id}/copy`],
      ['PUT', `/subaccount/${sub.id}/forms/${subForm.id}/theme`, { themeId: subTheme }],
    ];
    for (const [method, path, body] of attempts) {
      const res = await app.request(method, `/api/v2025${path}`, { token: b.token, body });
      expectError(res, 404, 'subaccount_not_found');
      assert.ok(!res.text.includes('Branch'));
    }
    assert.equal((await b.get('/subaccount')).body.total, 0);
    // The subaccount cannot reach its parent either, nor a sibling: it owns none.
    const subToken = (await createPersonalToken(app.server.ctx, sub.owner.id)).token;
    const res = await app.request('GET', `/api/v2025/subaccount/${a.accountId}/themes`, { token: subToken });
    expectError(res, 404, 'subaccount_not_found');
    // A's own theme copied into B's subaccount id: 404 too (A does not own it).
    const bSub = (await b.post('/subaccount', { name: 'B branch', email: email('bb') })).body;
    const own = (await a.post('/themes', { name: 'A theme' })).body;
    expectError(await a.post(`/subaccount/${bSub.id}/theme/${own.id}/copy`), 404, 'subaccount_not_found');
  });

  it("lets only the parent's owner and admins in: members get 403", async () => {
    const admin = (await a.post('/users', { email: email('admin'), name: 'Admin', role: 'admin' })).body;
    const member = (await a.post('/users', { email: email('member'), name: 'Member', role: 'member' })).body;
    const adminToken = (await createPersonalToken(app.server.ctx, admin.id)).token;
    const memberToken = (await createPersonalToken(app.server.ctx, member.id)).token;
    const theme = (await a.post('/themes', { name: 'Shared' })).body;
    const form = (await a.post('/forms', { name: 'Shared form' })).body;
    await a.put(`/users/${member.id}/permissions/${form.id}`, { level: 'full' });
    const subTheme = (await subDefault(sub.id)).id;
    const subForm = (await subOwner('/forms')).body.forms[0];
    const calls: [string, string, unknown?][] = [
      ['GET', '/subaccount'],
      ['POST', '/subaccount', { name: 'By staff', email: email('staff') }],
      ['POST', `/subaccount/${sub.id}/form/${form.id}/copy`],
      ['POST', `/subaccount/${sub.id}/theme/${theme.id}/copy`],
      ['GET', `/subaccount/${sub.id}/themes`],
      ['GET', `/subaccount/${sub.id}/themes/${subTheme}/forms`],
      ['PUT', `/subaccount/${sub.id}/forms/${subForm.id}/theme`, { themeId: subTheme }],
    ];
    for (const [method, path, body] of calls) {
      const denied = await app.request(method, `/api/v2025${path}`, { token: memberToken, body });
      expectError(denied, 403, 'admin_required');
      const allowed = await app.request(method, `/api/v2025${path}`, { token: adminToken, body });
      assert.ok([200, 201].includes(allowed.status), `${method} ${path} by an admin: ${allowed.text}`);
    }
  });

  it('serves the routes under /api/v2 with .json', async () => {
    const old = await app.request('GET', `/api/v2/subaccount/${sub.id}/themes.json`, { token: a.token });
    assert.equal(old.status, 200, old.text);
    assert.deepEqual(old.body, (await a.get(`/subaccount/${sub.id}/themes`)).body);
    assert.equal((await app.request('GET', '/api/v2/subaccount.json', { token: a.token })).status, 200);
  });

  it('makes a subaccount with `formwork admin create-subaccount`', async () => {
    const env = {
      DATA_DIR: app.config.dataDir,
      LOG_LEVEL: 'silent',
      ...(app.config.databaseUrl ? { DATABASE_URL: app.config.databaseUrl } : {}),
    };
    let stdout = '';
    let stderr = '';
    const out = {
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
    };
    const code = await runCommand(
      [
        'admin',
        'create-subaccount',
        '--account',
        String(a.accountId),
        '--name',
        'From the CLI',
        '--email',
        email('cli'),
        '--json',
      ],
      env,
      out,
    );
    assert.equal(code, 0, stderr);
    const made = JSON.parse(stdout);
    assert.equal(made.parentAccountId, a.accountId);
    assert.match(made.token, /^fw_pat_/);
    const listed = (await a.get('/subaccount?pageSize=100')).body.subaccounts;
    assert.ok(listed.some((s: any) => s.id === made.accountId && s.name === 'From the CLI'));
    // Its token acts as the subaccount, which has its default theme.
    const themes = await app.request('GET', '/api/v2025/themes', { token: made.token });
    assert.equal(themes.status, 200);
    assert.equal(themes.body.themes.length, 1);
    assert.ok(themes.body.themes[0].isDefault);

    stderr = '';
    assert.equal(
      await runCommand(
        ['admin', 'create-subaccount', '--account', '2147483647', '--name', 'X', '--email', email('x')],
        env,
        out,
      ),
      1,
    );
    assert.match(stderr, /Account not found/);
    stderr = '';
    assert.equal(await runCommand(['admin', 'create-subaccount', '--account', String(a.accountId)], env, out), 1);
    assert.match(stderr, /needs --account, --name and --email/);
  });
});
