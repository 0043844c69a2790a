import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { cssProblem, themeSheet } from '../src/modules/themes/css.js';
import { DEFAULT_FONT } from '../src/modules/themes/schemas.js';
import { logoOrigin } from '../src/modules/themes/service.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';

/** The checks of a theme's custom CSS (image-set), logo URL and font stack (docs/themes.md). */

function expectError(res: Reply, status: number, code: string, property: string, what: string): void {
  assert.equal(res.status, status, `${what}: ${res.text.slice(0, 500)}`);
  assert.equal(res.body.code, code, `${what}: ${res.text.slice(0, 500)}`);
  assert.deepEqual(
    res.body.details.map((d: any) => d.property),
    [property],
    what,
  );
}

describe(`theme checks (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;

  before(async () => {
    app = await startTestApp();
    a = await app.account();
  });
  after(() => app.close());

  async function newTheme(body: Record<string, unknown>): Promise<any> {
    const res = await a.post('/themes', body);
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  /** Writes a theme's style column as a theme stored before a check would hold it. */
  async function storeStyle(themeId: string, style: Record<string, unknown>): Promise<void> {
    await app.server.ctx.db
      .updateTable('themes')
      .set({ style: JSON.stringify(style) })
      .where('id', '=', themeId)
      .execute();
  }

  /** The hosted page of a new form on the theme: its HTML, CSP and theme sheet. */
  async function pageOn(themeId: string): Promise<{ html: string; csp: string; css: string }> {
    const form = (await a.post('/forms', { name: 'On theme', themeId })).body;
    const res = await app.request('GET', `/f/${form.viewKey}`);
    assert.equal(res.status, 200, res.text.slice(0, 300));
    const m = /<link rel="stylesheet" href="(\/f\/[^"]+\/theme\.css\?v=[0-9a-f]+)">/.exec(res.text);
    assert.ok(m, 'the page links its theme sheet');
    const css = await app.request('GET', m[1]!.replace(/&amp;/g, '&'));
    assert.equal(css.status, 200);
    return { html: res.text, csp: res.headers.get('content-security-policy') ?? '', css: css.text };
  }

  it('reads the whole argument of image-set(), past any ")", and checks every string and url() in it', async () => {
    const evil = '"https://evil.example/x.png"';
    const bad = [
      // A ")" in type(), in a string, in a url() or in a comment before the outside URL.
      `.x{background-image:image-set("a.png" type("image/png"), ${evil} type("image/png"))}`,
      `.x{background-image:image-set("a)" 1x, ${evil} 2x)}`,
      `.x{background-image:image-set('a)' 1x, 'https://evil.example/x.png' 2x)}`,
      `.x{background-image:image-set(url(a.png) 1x, ${evil} 2x)}`,
      `.x{background-image:image-set(url("a)") 1x, ${evil} 2x)}`,
      `.x{background-image:image-set("a.png" /* ) */ 1x, ${evil} 2x)}`,
      // An escaped quote does not end a string; an escaped ")" closes nothing.
      `.x{background-image:image-set("\\")" 1x, ${evil} 2x)}`,
      `.x{background-image:image-set('a\\')' 1x, 'https://evil.example/x.png' 2x)}`,
      `.x{background-image:image-set(a\\) 1x, ${evil} 2x)}`,
      // Other spellings of the function.
      `.x{background-image:-webkit-image-set("a)" 1x, ${evil} 2x)}`,
      `.x{background-image:IMAGE-SET("a)" 1x, ${evil} 2x)}`,
      `.x{background-image:image\\-set("a)" 1x, ${evil} 2x)}`,
      `.x{background-image:\\69mage-set("a)" 1x, ${evil} 2x)}`,
      `.x{background-image:image-set("a)" 1x, "\\68ttps://evil.example/x.png" 2x)}`,
      // An outside url() or string in a nested function, or in a second image-set.
      `.x{background-image:image-set("a.png" 1x, url(https://evil.example/x.png) 2x)}`,
      `.x{background-image:image-set("a.png" 1x)} .y{background-image:image-set("b)" 1x, ${evil} 2x)}`,
      `.x{background-image:image-set(image-set("a)" 1x) 1x, ${evil} 2x)}`,
    ];
    for (const css of bad) {
      const res = await a.post('/themes', { name: 'T10', customCss: css });
      expectError(res, 400, 'invalid_css', 'body.customCss', css);
      assert.match(res.body.details[0].message, /image-set\(\)|url\(\)/, css);
    }
    // Not well formed: refused rather than guessed at.
    const unbalanced = [
      '.x{background-image:image-set("a.png" 1x}',
      '.x{background-image:image-set("a.png 1x)}',
      '.x{background-image:image-set("a.png\n" 1x)}',
      '.x{background-image:image-set(url(a"b) 1x)}',
      '.x{background-image:image-set("a.png" 1x /* )}',
    ];
    for (const css of unbalanced) {
      const res = await a.post('/themes', { name: 'T10', customCss: css });
      expectError(res, 400, 'invalid_css', 'body.customCss', css);
      assert.match(res.body.details[0].message, /image-set\(\) must be well formed/, css);
    }
    // This service's own images, relative paths and data: are fine, with type(), nesting and both spellings.
    const fine = [
      '.x{background-image:image-set("a.png" type("image/png") 1x, "/b.avif" type("image/avif") 2x)}',
      `.x{background-image:-webkit-image-set(url(a.png) 1x, url("${app.config.publicUrl}/b.png") 2x)}`,
      `.x{background-image:image-set("a.png" 1x, "${app.config.publicUrl}/b.png" 2x)} .y{color:red}`,
      '.x{background-image:image-set("data:image/png;base64,iVBORw0KGgo=" 1x)}',
      '.x{background-image:image-set(image-set("a.png" 1x) 1x, "b(1).png" 2x)}',
    ];
    for (const css of fine) {
      const res = await a.post('/themes', { name: 'Fine', customCss: css });
      assert.equal(res.status, 201, `${css}: ${res.text}`);
    }
    assert.equal(cssProblem('.x{b:image-set("a)" 1x, "http://forms.test/b.png" 2x)}', 'http://forms.test'), undefined);
    assert.match(
      cssProblem('.x{b:image-set("a)" 1x, "http://forms.test.evil/b.png" 2x)}', 'http://forms.test') ?? '',
      /forms\.test\.evil/,
    );
    // Deeply nested image-set()s are read once, not once each.
    const nested = `${'image-set('.repeat(1800)}"a.png" 1x${')'.repeat(1800)}`;
    const started = Date.now();
    assert.equal(cssProblem(nested, 'http://forms.test'), undefined);
    assert.ok(Date.now() - started < 2000, 'nested image-set()s are read in linear time');
  });

  it('refuses a logo URL whose host is no plain DNS name or IP address, and names only its origin in the policy', async () => {
    for (const logoUrl of [
      'https://*/logo.png',
      'https://*.example.com/logo.png',
      'https://a%2Ab.example.com/logo.png',
      'https://a;b.example.com/logo.png',
      'https://a,b.example.com/logo.png',
      "https://a'b.example.com/logo.png",
      'https://a!b.example.com/logo.png',
      'https://a_b.example.com/logo.png',
      'https://a..b/logo.png',
      'https://example.com./logo.png',
    ]) {
      expectError(await a.post('/themes', { name: 'T2', logoUrl }), 400, 'validation_failed', 'body.logoUrl', logoUrl);
    }
    const theme = await newTheme({ name: 'Later logo' });
    const put = await a.put(`/themes/${theme.id}`, { logoUrl: 'https://*/logo.png' });
    expectError(put, 400, 'validation_failed', 'body.logoUrl', 'PUT');

    // Plain hosts are fine; the policy names exactly the origin (no path, no user).
    for (const [logoUrl, origin] of [
      ['https://cdn.example.com/logo.png', 'https://cdn.example.com'],
      ['https://user@cdn.example.com:8443/a/logo.png?x=1', 'https://cdn.example.com:8443'],
      ['http://192.0.2.7/logo.png', 'http://192.0.2.7'],
      ['https://[2001:db8::1]/logo.png', 'https://[2001:db8::1]'],
    ] as const) {
      assert.equal(logoOrigin(logoUrl), origin, logoUrl);
      const shown = await pageOn((await newTheme({ name: 'Logo', logoUrl })).id);
      const imgSrc = /(?:^|; )img-src ([^;]*)/.exec(shown.csp)?.[1];
      assert.equal(imgSrc, `'self' data: blob: ${origin}`, logoUrl);
    }

    // A theme stored before the check: no logo on the page, and no wildcard in its policy.
    for (const stored of ['https://*/logo.png', 'https://a;b/logo.png', 'https://a,b/logo.png']) {
      const old = await newTheme({ name: 'Old wildcard logo', logoUrl: 'https://cdn.example.com/fine.png' });
      await storeStyle(old.id, { logoUrl: stored });
      const shown = await pageOn(old.id);
      assert.doesNotMatch(shown.html, /fw-logo/, stored);
      assert.equal(/(?:^|; )img-src ([^;]*)/.exec(shown.csp)?.[1], "'self' data: blob:", `${stored}: ${shown.csp}`);
      assert.doesNotMatch(shown.csp, /https?:\/\/\*/, stored);
    }
  });

  it('takes a font stack only of names, each in matching quotes or none, and writes no stored one that is not', async () => {
    for (const fontFamily of [
      "Arial'",
      "'Arial",
      '"Arial',
      'Arial"',
      '"Arial\'',
      '"Segoe UI, Arial',
      'A"rial"',
      '"A"B"',
      '""',
      'Arial,',
      ', Arial',
      'Arial,,serif',
    ]) {
      expectError(
        await a.post('/themes', { name: 'T4', fontFamily }),
        400,
        'validation_failed',
        'body.fontFamily',
        fontFamily,
      );
    }
    const theme = await newTheme({ name: 'Font later' });
    expectError(
      await a.put(`/themes/${theme.id}`, { fontFamily: "Arial'" }),
      400,
      'validation_failed',
      'body.fontFamily',
      'PUT',
    );
    for (const fontFamily of [
      DEFAULT_FONT,
      '"Inter", Arial, sans-serif',
      "'Segoe UI' , Helvetica Neue,serif",
      'Georgia',
      ' Times New Roman ',
    ]) {
      const res = await a.post('/themes', { name: 'Font', fontFamily });
      assert.equal(res.status, 201, `${fontFamily}: ${res.text}`);
      assert.equal(res.body.fontFamily, fontFamily);
    }

    // A font stored before the check is left to the default: the :root block closes, and the
    // custom CSS comes after it, not in it.
    const old = await newTheme({ name: 'Old font', customCss: '.fw-title { color: red; }' });
    await storeStyle(old.id, {
      fontFamily: "Arial'",
      colors: { primary: '#aa0011', card: 'red; }' },
      spacing: '1px; }',
    });
    const { css } = await pageOn(old.id);
    const root = /^:root \{ [^{}]* \}$/m.exec(css);
    assert.ok(root, css);
    assert.ok(root[0].includes(`--fw-font: ${DEFAULT_FONT};`), root[0]);
    assert.ok(root[0].includes('--fw-accent: #aa0011;'), root[0]);
    assert.ok(root[0].includes('--fw-card: #ffffff;'), root[0]);
    assert.ok(root[0].includes('--fw-spacing: 22px;'), root[0]);
    assert.doesNotMatch(css, /Arial'/);
    assert.match(css, /\/\* custom CSS \*\/\n\.fw-title \{ color: red; \}\n$/);
    assert.match(
      themeSheet({ id: 'th_x', style: { fontFamily: '"Inter", sans-serif' }, customCss: '' }),
      /--fw-font: "Inter", sans-serif;/,
    );
  });
});
