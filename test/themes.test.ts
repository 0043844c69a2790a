import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { PAGE_FRESHNESS_MS } from '../src/modules/hosted/service.js';
import { cssProblem } from '../src/modules/themes/css.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';

function expectError(res: Reply, status: number, code: string): void {
  assert.equal(res.status, status, res.text.slice(0, 500));
  assert.equal(res.body.status, 'error');
  assert.equal(res.body.code, code, res.text.slice(0, 500));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`themes (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;

  before(async () => {
    app = await startTestApp();
    a = await app.account();
    b = await app.account();
  });
  after(() => app.close());

  async function newTheme(acc: TestAccount, body: Record<string, unknown>): Promise<any> {
    const res = await acc.post('/themes', body);
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  async function defaultOf(acc: TestAccount): Promise<any> {
    const list = await acc.get('/themes?pageSize=100');
    assert.equal(list.status, 200, list.text);
    const found = list.body.themes.find((t: any) => t.isDefault);
    assert.ok(found, 'every account has a default theme');
    return found;
  }

  /** The hosted page of a form, and the theme sheet it links to. */
  async function page(form: any): Promise<{ html: string; css: string; cssUrl: string; csp: string }> {
    const res = await app.request('GET', `/f/${form.viewKey}`);
    assert.equal(res.status, 200, res.text.slice(0, 300));
    const m = /<link rel="stylesheet" href="(\/f\/[^"]+\/theme\.css\?v=[0-9a-f]+)">/.exec(res.text);
    assert.ok(m, 'the page links its theme sheet');
    const cssUrl = m[1]!.replace(/&amp;/g, '&');
    const css = await app.request('GET', cssUrl);
    assert.equal(css.status, 200);
    assert.match(css.headers.get('content-type') ?? '', /^text\/css/);
    assert.match(css.headers.get('cache-control') ?? '', /immutable/);
    return { html: res.text, css: css.text, cssUrl, csp: res.headers.get('content-security-policy') ?? '' };
  }

  it('gives every account a default theme that new forms take, and that cannot be deleted', async () => {
    const def = await defaultOf(a);
    assert.match(def.id, /^th_[A-Za-z0-9_-]{16}$/);
    assert.equal(def.name, 'Default');
    assert.equal(def.colors.primary, '#2557d6');
    assert.equal(def.logoUrl, null);
    const form = (await a.post('/forms', { name: 'Plain' })).body;
    assert.equal(form.themeId, def.id);
    assert.equal((await a.get(`/themes/${def.id}`)).body.formsCount >= 1, true);
    expectError(await a.delete(`/themes/${def.id}`), 400, 'default_theme');
    // B's default is B's own.
    assert.notEqual((await defaultOf(b)).id, def.id);
  });

  it('creates, lists, reads, updates and deletes a theme', async () => {
    const theme = await newTheme(a, {
      name: 'Brand',
      colors: { primary: '#ff0066', background: '#101010' },
      fontFamily: '"Inter", Arial, sans-serif',
      spacing: 30,
      logoUrl: 'https://cdn.example.com/logo.png',
      customCss: '.fw-title { letter-spacing: .02em; }',
      lockedInUse: false,
    });
    assert.match(theme.id, /^th_[A-Za-z0-9_-]{16}$/);
    assert.equal(theme.isDefault, false);
    assert.equal(theme.colors.primary, '#ff0066');
    assert.equal(theme.colors.text, '#1c2333', 'unset colours take the defaults');
    assert.equal(theme.spacing, 30);
    assert.equal(theme.formsCount, 0);
    assert.deepEqual((await a.get(`/themes/${theme.id}`)).body, theme);

    const list = await a.get('/themes?pageNumber=1&pageSize=100');
    assert.equal(list.status, 200);
    assert.ok(list.body.themes[0].isDefault, 'the default comes first');
    assert.ok(list.body.themes.some((t: any) => t.id === theme.id));
    assert.equal(list.body.pageNumber, 1);

    const changed = await a.put(`/themes/${theme.id}`, { name: 'Brand 2', spacing: null, colors: { text: '#222222' } });
    assert.equal(changed.status, 200, changed.text);
    assert.equal(changed.body.name, 'Brand 2');
    assert.equal(changed.body.spacing, 22, 'null goes back to the default');
    assert.equal(changed.body.colors.primary, '#2557d6', 'colours are replaced as a whole');
    assert.equal(changed.body.colors.text, '#222222');
    assert.equal(changed.body.fontFamily, '"Inter", Arial, sans-serif');

    const gone = await a.delete(`/themes/${theme.id}`);
    assert.equal(gone.status, 200, gone.text);
    assert.equal(gone.body.themeId, theme.id);
    assert.equal(gone.body.switchedForms, 0);
    assert.equal(gone.body.defaultThemeId, (await defaultOf(a)).id);
    expectError(await a.get(`/themes/${theme.id}`), 404, 'theme_not_found');
    expectError(await a.delete(`/themes/${theme.id}`), 404, 'theme_not_found');
  });

  it('refuses custom CSS that reaches out or breaks out, naming the field', async () => {
    const bad = [
      '@import url("https://evil.example/x.css");',
      '@IMPORT "x.css";',
      '.a { background: url(https://evil.example/x.png) }',
      ".a { background: url('//evil.example/x.png') }",
      '.a { background: u\\72l(https://evil.example/x.png) }',
      '.a { background: \\75 rl(https://evil.example/x.png) }',
      '.a { width: expression(alert(1)) }',
      '.a { width: expr/**/ession(alert(1)) }',
      '.a { background: url(javascript:alert(1)) }',
      '.a { b: "javascript:x" }',
      '</style><script>alert(1)</script>',
      '</STYLE >',
      '.a { behavior: url(x.htc) }',
      '.a { -moz-binding: url(x.xml#x) }',
      '.a { background-image: image-set("https://evil.example/a.png" 1x) }',
      '@\\69mport "x.css";',
      // A comment's ends hidden in strings, around an escaped url( or @import.
      'body{content:"/*";background:\\75rl(//evil.example/x.png);quotes:"*/"}',
      'body{content:"/*"} @\\69mport "x.css"; .b{quotes:"*/"}',
      // Targets a browser's URL parser reads as another host: a leading control character, a tab.
      '.a { background: url("\\1//evil.example/a.png") }',
      '.a { background: url("h\\9ttp://evil.example/a.png") }',
      '.a { background: url("/\t/evil.example/a.png") }',
      '.a { background-image: image-set("\\1//evil.example/a.png" 1x) }',
    ];
    for (const css of bad) {
      const res = await a.post('/themes', { name: 'Bad', customCss: css });
      expectError(res, 400, 'invalid_css');
      assert.deepEqual(
        res.body.details.map((d: any) => d.property),
        ['body.customCss'],
        css,
      );
    }
    const theme = await newTheme(a, { name: 'Fine' });
    expectError(await a.put(`/themes/${theme.id}`, { customCss: '@import "x.css";' }), 400, 'invalid_css');
    // Allowed: this service, relative paths, data:.
    const fine = [
      '.a { background: url(/assets/x.png) }',
      `.a { background: url("${app.config.publicUrl}/x.png") }`,
      '.a { background: url(data:image/png;base64,iVBORw0KGgo=) }',
      '.fw-title::before { content: "\\201C"; }',
      '.a::before { content: "/*" } .b::after { content: "*/" } .c { color: red }',
      '',
    ];
    for (const css of fine) {
      const res = await a.put(`/themes/${theme.id}`, { customCss: css });
      assert.equal(res.status, 200, `${css}: ${res.text}`);
    }
    assert.equal(cssProblem('.a{}', 'http://forms.test'), undefined);
    assert.match(cssProblem('.a{background:url(http://forms.test.evil/x)}', 'http://forms.test') ?? '', /url\(\)/);
  });

  it('refuses bad colours, fonts and logos', async () => {
    for (const body of [
      { name: 'X', colors: { primary: 'red' } },
      { name: 'X', colors: { primary: '#12345' } },
      { name: 'X', colors: { surprise: '#123456' } },
      { name: 'X', fontFamily: 'Arial; } body { display:none' },
      { name: 'X', logoUrl: 'javascript:alert(1)' },
      { name: 'X', spacing: 65 },
      // URIs by the schema's format that a browser's parser refuses.
      { name: 'X', logoUrl: 'http://a:99999/x.png' },
      { name: 'X', logoUrl: 'https://%00x.com/' },
      { name: 'X', logoUrl: 'http://999.1.1.1/' },
      { name: 'X', logoUrl: 'http://[v1.x]/' },
    ])
      expectError(await a.post('/themes', body), 400, 'validation_failed');
    const theme = await newTheme(a, { name: 'Logo later' });
    expectError(await a.put(`/themes/${theme.id}`, { logoUrl: 'http://a:99999/x.png' }), 400, 'validation_failed');
  });

  it("leaves out a logo saved before browsers' URL rules were checked, and serves the page", async () => {
    const theme = await newTheme(a, { name: 'Old logo', logoUrl: 'https://cdn.example.com/fine.png' });
    await app.server.ctx.db
      .updateTable('themes')
      .set({ style: JSON.stringify({ logoUrl: 'http://a:99999/x.png' }) })
      .where('id', '=', theme.id)
      .execute();
    const form = (await a.post('/forms', { name: 'Old logo form', themeId: theme.id })).body;
    const shown = await page(form);
    assert.doesNotMatch(shown.html, /fw-logo/);
    assert.doesNotMatch(shown.csp, /99999/);
  });

  it('shows the theme of a form on its hosted page, as custom properties and its custom CSS', async () => {
    const theme = await newTheme(a, {
      name: 'Page',
      colors: { primary: '#aa0011', background: '#fafafa', card: '#fffff0' },
      fontFamily: 'Georgia, serif',
      spacing: 40,
      logoUrl: 'https://cdn.example.com/brand.png',
      customCss: '.fw-title { text-transform: uppercase; }',
    });
    const form = (await a.post('/forms', { name: 'Styled', themeId: theme.id, fields: [{ type: 'text', label: 'A' }] }))
      .body;
    assert.equal(form.themeId, theme.id);
    const shown = await page(form);
    assert.match(shown.css, /--fw-accent: #aa0011;/);
    assert.match(shown.css, /--fw-bg: #fafafa;/);
    assert.match(shown.css, /--fw-card: #fffff0;/);
    assert.match(shown.css, /--fw-font: Georgia, serif;/);
    assert.match(shown.css, /--fw-spacing: 40px;/);
    assert.match(shown.css, /\.fw-title \{ text-transform: uppercase; \}/);
    assert.match(shown.html, /<img class="fw-logo" src="https:\/\/cdn\.example\.com\/brand\.png" alt="">/);
    assert.match(shown.csp, /img-src 'self' data: blob: https:\/\/cdn\.example\.com/);
    assert.doesNotMatch(shown.csp, /style-src[^;]*unsafe-inline/);

    // A change to the theme shows on the page (once the page's second of freshness has passed).
    assert.equal((await a.put(`/themes/${theme.id}`, { colors: { primary: '#00aa11' } })).status, 200);
    await sleep(PAGE_FRESHNESS_MS + 50);
    const after = await page(form);
    assert.notEqual(after.cssUrl, shown.cssUrl, 'a new sheet, under a new hash');
    assert.match(after.css, /--fw-accent: #00aa11;/);
    // An old hash still answers, with the current sheet, not cached for good.
    const stale = await app.request('GET', shown.cssUrl);
    assert.equal(stale.status, 200);
    assert.equal(stale.headers.get('cache-control'), 'no-cache');
    assert.match(stale.text, /#00aa11/);
    assert.equal((await app.request('GET', '/f/nope/theme.css')).status, 404);

    // The embed HTML links the theme's sheet too.
    const embed = await a.get(`/forms/${form.id}/html`);
    assert.equal(embed.status, 200);
    assert.equal(embed.body.styles.length, 2);
    assert.equal(embed.body.styles[1], `${app.config.publicUrl}${after.cssUrl}`);
    assert.ok(embed.body.html.includes(`<link rel="stylesheet" href="${embed.body.styles[1]}">`));

    // Another form on the default theme shows the defaults and no logo.
    const plain = (await a.post('/forms', { name: 'Plain page' })).body;
    const other = await page(plain);
    assert.match(other.css, /--fw-accent: #2557d6;/);
    assert.doesNotMatch(other.html, /fw-logo/);
  });

  it('moves a form to another theme with PUT /forms, and reads the new version', async () => {
    const one = await newTheme(a, { name: 'One', colors: { primary: '#111111' } });
    const two = await newTheme(a, { name: 'Two', colors: { primary: '#222222' } });
    const form = (await a.post('/forms', { name: 'Mover', themeId: one.id })).body;
    const first = await a.get(`/forms/${form.id}`);
    const etag = first.headers.get('etag')!;
    const moved = await a.put(`/forms/${form.id}`, { themeId: two.id });
    assert.equal(moved.status, 200, moved.text);
    assert.equal(moved.body.themeId, two.id);
    const read = await a.get(`/forms/${form.id}`, { headers: { 'if-none-match': etag } });
    assert.equal(read.status, 200, 'the old ETag no longer matches');
    assert.equal(read.body.themeId, two.id);
    // A change to the theme gives its forms a new version too.
    const etag2 = read.headers.get('etag')!;
    await a.put(`/themes/${two.id}`, { name: 'Two, renamed' });
    const again = await a.get(`/forms/${form.id}`, { headers: { 'if-none-match': etag2 } });
    assert.equal(again.status, 200, 'a theme change moves the form version');
    // Another account's theme, or none, is a 400 naming themeId; the form is unchanged.
    const bTheme = await newTheme(b, { name: 'B theme' });
    for (const themeId of [bTheme.id, 'th_AAAAAAAAAAAAAAAA']) {
      for (const res of [
        await a.put(`/forms/${form.id}`, { themeId }),
        await a.post('/forms', { name: 'X', themeId }),
      ]) {
        expectError(res, 400, 'invalid_theme');
        assert.equal(res.body.details[0].property, 'body.themeId');
      }
    }
    assert.equal((await a.get(`/forms/${form.id}`)).body.themeId, two.id);
    expectError(await a.put(`/forms/${form.id}`, { themeId: 'not a theme' }), 400, 'validation_failed');
    // A copy keeps the theme.
    const copy = await a.post(`/forms/${form.id}/copy`);
    assert.equal(copy.body.themeId, two.id);
  });

  it('switches the forms of a deleted theme to the default, and refuses (409) a theme locked in use', async () => {
    const def = await defaultOf(a);
    const loose = await newTheme(a, { name: 'Loose' });
    const f1 = (await a.post('/forms', { name: 'L1', themeId: loose.id })).body;
    const f2 = (await a.post('/forms', { name: 'L2', themeId: loose.id })).body;
    await a.delete(`/forms/${f2.id}`);
    assert.equal((await a.get(`/themes/${loose.id}`)).body.formsCount, 1, 'live forms only');
    const etag = (await a.get(`/forms/${f1.id}`)).headers.get('etag')!;
    const gone = await a.delete(`/themes/${loose.id}`);
    assert.equal(gone.status, 200, gone.text);
    assert.deepEqual(gone.body, { themeId: loose.id, defaultThemeId: def.id, switchedForms: 2 });
    const read = await a.get(`/forms/${f1.id}`, { headers: { 'if-none-match': etag } });
    assert.equal(read.status, 200);
    assert.equal(read.body.themeId, def.id);
    assert.match((await page(f1)).css, /--fw-accent: #2557d6;/);

    const locked = await newTheme(a, { name: 'Locked', lockedInUse: true });
    const f3 = (await a.post('/forms', { name: 'L3', themeId: locked.id })).body;
    const refused = await a.delete(`/themes/${locked.id}`);
    expectError(refused, 409, 'theme_in_use');
    assert.match(refused.body.error, /1 form uses this theme/);
    assert.equal((await a.get(`/forms/${f3.id}`)).body.themeId, locked.id);
    // Once no live form uses it, it goes; so does a lock turned off.
    await a.put(`/forms/${f3.id}`, { themeId: def.id });
    assert.equal((await a.delete(`/themes/${locked.id}`)).status, 200);
    const locked2 = await newTheme(a, { name: 'Locked 2', lockedInUse: true });
    const f4 = (await a.post('/forms', { name: 'L4', themeId: locked2.id })).body;
    expectError(await a.delete(`/themes/${locked2.id}`), 409, 'theme_in_use');
    await a.put(`/themes/${locked2.id}`, { lockedInUse: false });
    const ok = await a.delete(`/themes/${locked2.id}`);
    assert.equal(ok.status, 200);
    assert.equal(ok.body.switchedForms, 1);
    assert.equal((await a.get(`/forms/${f4.id}`)).body.themeId, def.id);
  });

  it('never leaves a form on a deleted theme when a delete and assignments cross', async () => {
    const def = await defaultOf(a);
    const forms: { id: number }[] = [];
    for (let i = 0; i < 8; i++) forms.push((await a.post('/forms', { name: `Race ${i}` })).body);
    for (let round = 0; round < 3; round++) {
      const theme = await newTheme(a, { name: `Race theme ${round}` });
      const results = await Promise.all([
        ...forms.map((f) => a.put(`/forms/${f.id}`, { themeId: theme.id })),
        a.delete(`/themes/${theme.id}`),
      ]);
      for (const r of results.slice(0, -1)) {
        assert.ok(r.status === 200 || r.body.code === 'invalid_theme', r.text.slice(0, 300));
      }
      assert.equal(results.at(-1)!.status, 200, results.at(-1)!.text);
      for (const f of forms) assert.equal((await a.get(`/forms/${f.id}`)).body.themeId, def.id);
    }
  });

  it("answers 404 for another account's themes", async () => {
    const theme = await newTheme(a, { name: 'Private' });
    expectError(await b.get(`/themes/${theme.id}`), 404, 'theme_not_found');
    expectError(await b.put(`/themes/${theme.id}`, { name: 'Mine now' }), 404, 'theme_not_found');
    expectError(await b.delete(`/themes/${theme.id}`), 404, 'theme_not_found');
    assert.ok(!(await b.get('/themes?pageSize=100')).body.themes.some((t: any) => t.id === theme.id));
    assert.equal((await a.get(`/themes/${theme.id}`)).body.name, 'Private');
  });

  it('lets members read themes and use them on forms they may edit, and no more', async () => {
    const theme = await newTheme(a, { name: 'For members' });
    const def = await defaultOf(a);
    const form = (await a.post('/forms', { name: 'Member form' })).body;
    const member = (await a.post('/users', { email: `m-${Date.now()}@example.com`, name: 'Member', role: 'member' }))
      .body;
    const token = (await createPersonalToken(app.server.ctx, member.id)).token;
    const as = (method: string, path: string, body?: unknown) =>
      app.request(method, `/api/v2025${path}`, { token, body });
    assert.equal((await as('GET', '/themes')).status, 200);
    assert.equal((await as('GET', `/themes/${theme.id}`)).status, 200);
    expectError(await as('POST', '/themes', { name: 'Nope' }), 403, 'admin_required');
    expectError(await as('PUT', `/themes/${theme.id}`, { name: 'Nope' }), 403, 'admin_required');
    expectError(await as('DELETE', `/themes/${theme.id}`), 403, 'admin_required');
    // Without edit on the form: 403; with it: the theme is theirs to use.
    await a.put(`/users/${member.id}/permissions/${form.id}`, { level: 'view' });
    expectError(await as('PUT', `/forms/${form.id}`, { themeId: theme.id }), 403, 'form_permission_required');
    await a.put(`/users/${member.id}/permissions/${form.id}`, { level: 'edit' });
    const used = await as('PUT', `/forms/${form.id}`, { themeId: theme.id });
    assert.equal(used.status, 200, used.text);
    assert.equal(used.body.themeId, theme.id);
    assert.notEqual(def.id, theme.id);

    // Its forms are counted as a folder's are: for the member, only those it holds a level on.
    const hidden = (await a.post('/forms', { name: 'Not the member’s' })).body;
    assert.equal((await a.put(`/forms/${hidden.id}`, { themeId: theme.id })).status, 200);
    assert.equal((await a.get(`/themes/${theme.id}`)).body.formsCount, 2);
    assert.equal((await as('GET', `/themes/${theme.id}`)).body.formsCount, 1);
    const listed = (await as('GET', '/themes?pageSize=100')).body.themes.find((t: { id: string }) => t.id === theme.id);
    assert.equal(listed.formsCount, 1);
  });

  it('serves the same under /api/v2 with .json', async () => {
    const theme = await newTheme(a, { name: 'Legacy' });
    const old = await app.request('GET', `/api/v2/themes/${theme.id}.json`, { token: a.token });
    assert.equal(old.status, 200, old.text);
    assert.deepEqual(old.body, (await a.get(`/themes/${theme.id}`)).body);
    const created = await app.request('POST', '/api/v2/themes.json', { token: a.token, body: { name: 'Legacy 2' } });
    assert.equal(created.status, 201, created.text);
  });
});
