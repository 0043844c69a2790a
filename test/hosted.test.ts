/**
 * Hosted forms over plain HTTP (test/hosted-browser.test.ts drives them in Chromium): the
 * page's states and headers, the plain and scripted submit with its abuse controls, the
 * embed HTML, prefill URLs, partial submissions (spec 4.6) and the page statistics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { removeExpiredPartials } from '../src/modules/partials/service.js';
import { dialectName, expectStatus, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { toWindowStart } from './support/quota.js';
import { savePartialOf } from './support/partials.js';

const PASSWORD = 'correct horse battery staple';
const FORM_POST = { 'content-type': 'application/x-www-form-urlencoded' };
const unescape = (s: string) => s.replace(/&#(\d+);/g, (_, c: string) => String.fromCharCode(Number(c)));

interface HostedForm {
  id: number;
  path: string;
  viewKey: string;
  field: (label: string) => number;
}

async function makeForm(owner: TestAccount, body: Record<string, unknown>): Promise<HostedForm> {
  const res = await owner.post('/forms', body);
  assert.equal(res.status, 200, res.text);
  const fields: { id: number; label: string }[] = res.body.fields ?? [];
  return {
    id: res.body.id,
    path: new URL(res.body.url).pathname,
    viewKey: res.body.viewKey,
    field: (label) => fields.find((f) => f.label === label)!.id,
  };
}

const contact = {
  name: 'Contact us',
  fields: [
    { type: 'text', label: 'Name', required: true },
    { type: 'email', label: 'Email' },
    {
      type: 'checkbox',
      label: 'Topics',
      options: [
        { label: 'Sales', value: 'sales' },
        { label: 'Help', value: 'help' },
      ],
    },
  ],
};

describe(`hosted forms over HTTP (${dialectName})`, () => {
  let app: TestApp;
  let owner: TestAccount;
  let other: TestAccount;

  before(async () => {
    app = await startTestApp();
    owner = await app.account('Hosted owner');
    other = await app.account('Someone else');
  });
  after(() => app.close());

  /** The page's load token, after the minimum time to submit has passed. */
  async function open(form: HostedForm, query = ''): Promise<{ token: string; html: string }> {
    const page = await app.request('GET', `${form.path}${query}`);
    assert.equal(page.status, 200, page.text);
    const token = unescape(/name="_fw" value="([^"]*)"/.exec(page.text)![1]!);
    app.server.ctx.clock.advance(4000);
    return { token, html: page.text };
  }

  function post(form: HostedForm, values: Record<string, string | string[]>) {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(values)) for (const x of [v].flat()) body.append(k, x);
    return app.request('POST', form.path, { raw: body.toString(), headers: FORM_POST });
  }

  async function stats(form: HostedForm, account = owner) {
    const res = await account.get(`/forms/${form.id}/stats`);
    assert.equal(res.status, 200, res.text);
    return res.body;
  }

  it('serves the page with its policy: scripts only from the service, embeddable, no sniffing', async () => {
    const form = await makeForm(owner, contact);
    const page = await app.request('GET', form.path);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type')!, /^text\/html/);
    const csp = page.headers.get('content-security-policy')!;
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.match(csp, /frame-ancestors \*/);
    assert.equal(page.headers.get('x-frame-options'), null, 'forms may be framed');
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(page.headers.get('cache-control'), 'no-store');
    assert.doesNotMatch(page.text, /<script>(?!\s*$)|<style|style="/, 'no inline script or style');
    // The script and the style sheet are the service's own, cached for good under their hash.
    for (const src of [...page.text.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!)) {
      const asset = await app.request('GET', src);
      assert.equal(asset.status, 200, src);
      assert.match(asset.headers.get('cache-control')!, /immutable/);
    }
    // The sign-in pages stay unframeable.
    const signIn = await app.request('GET', '/oauth2/authorize?client_id=none');
    assert.equal(signIn.headers.get('x-frame-options'), 'DENY');
    assert.match(signIn.headers.get('content-security-policy')!, /frame-ancestors 'none'/);
  });

  it("leaves out of the script's definition the options its controls hold, unless HTML would change them", async () => {
    const form = await makeForm(owner, {
      name: 'Options once',
      fields: [
        { type: 'select', label: 'Plain', options: [{ label: 'A & B', value: 'a"b' }] },
        { type: 'radio', label: 'Returns', options: [{ label: 'One\r\nline', value: 'one' }] },
        { type: 'checkbox', label: 'Value', options: [{ label: 'Zero', value: 'z\r' }] },
        { type: 'text', label: 'Text' },
      ],
    });
    const page = await app.request('GET', form.path);
    const json = /<script type="application\/json" class="fw-definition">(.*?)<\/script>/s.exec(page.text)![1]!;
    const fields: { id: number; options?: unknown }[] = JSON.parse(json).fields;
    const options = (label: string) => fields.find((f) => f.id === form.field(label))!.options;
    // The select's option is in its control, escaped: the script reads it back from there.
    assert.equal(options('Plain'), undefined);
    assert.match(page.text, /<option value="a&#34;b">A &#38; B<\/option>/);
    // HTML parsing turns a carriage return into a line feed: such options stay in the JSON.
    assert.deepEqual(options('Returns'), [{ label: 'One\r\nline', value: 'one' }]);
    assert.deepEqual(options('Value'), [{ label: 'Zero', value: 'z\r' }]);
  });

  it('shows closed pages with their status: unknown 404, inactive and full 403, deleted 410', async () => {
    assert.equal((await app.request('GET', '/f/no-such-form')).status, 404);
    const inactive = await makeForm(owner, { ...contact, inactive: true, settings: { closedMessage: 'Back in May.' } });
    const page = await app.request('GET', inactive.path);
    assert.equal(page.status, 403);
    assert.match(page.text, /Back in May\./);
    assert.doesNotMatch(page.text, /<form/);
    const full = await makeForm(owner, { ...contact, settings: { submissionLimit: 1 } });
    const { token } = await open(full);
    assert.equal((await post(full, { _fw: token, website: '', [`f${full.field('Name')}`]: 'Ann' })).status, 200);
    assert.equal((await app.request('GET', full.path)).status, 403);
    const late = await post(full, { _fw: token, website: '', [`f${full.field('Name')}`]: 'Bob' });
    assert.equal(late.status, 403, 'a post to a full form gets the closed page');
    const deleted = await makeForm(owner, contact);
    const { token: before } = await open(deleted);
    await owner.delete(`/forms/${deleted.id}`);
    assert.equal((await app.request('GET', deleted.path)).status, 410);
    const sent = { _fw: before, website: '', [`f${deleted.field('Name')}`]: 'Cy' };
    assert.equal((await post(deleted, sent)).status, 410, 'a plain post gets the page');
    const scripted = await app.request('POST', deleted.path, {
      body: { fields: [{ id: deleted.field('Name'), value: 'Cy' }], _fw: before, website: '' },
    });
    assert.equal(scripted.status, 404, scripted.text);
    assert.equal(scripted.body.code, 'form_not_found', 'as for its other JSON routes and the API');
    const unknown = await app.request('POST', '/f/no-such-form', { body: { fields: [], _fw: before, website: '' } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.code, 'form_not_found', 'JSON for the script, not the page');
  });

  it('takes a plain HTML post through the submission checks, once per page, and confirms or redirects', async () => {
    const form = await makeForm(owner, contact);
    const { token } = await open(form);
    const values = {
      _fw: token,
      website: '',
      [`f${form.field('Name')}`]: 'Ann',
      [`f${form.field('Email')}`]: 'not-an-email',
      [`f${form.field('Topics')}`]: ['sales', 'help'],
    };
    const bad = await post(form, values);
    assert.equal(bad.status, 400);
    assert.match(
      bad.text,
      new RegExp(`id="f${form.field('Email')}-error"[^>]*>This field must be an email address\\.<`),
    );
    assert.match(bad.text, /value="Ann"/, 'the answers come back');
    values[`f${form.field('Email')}`] = 'ann@example.com';
    const good = await post(form, values);
    assert.equal(good.status, 200);
    assert.match(good.text, /Thank you! Your answers were received\./);
    // The same page sent again (a double click, a reload of the answer) submits once.
    assert.equal((await post(form, values)).status, 200);
    const list = await owner.get(`/forms/${form.id}/submissions?data=true`);
    assert.equal(list.body.total, 1);
    assert.deepEqual(list.body.submissions[0].data[String(form.field('Topics'))].value, ['sales', 'help']);

    const redirecting = await makeForm(owner, { ...contact, settings: { redirectUrl: 'https://example.com/thanks' } });
    const page = await open(redirecting);
    const moved = await fetch(`${app.url}${redirecting.path}`, {
      method: 'POST',
      headers: FORM_POST,
      body: new URLSearchParams({ _fw: page.token, website: '', [`f${redirecting.field('Name')}`]: 'Ann' }),
      redirect: 'manual',
    });
    assert.equal(moved.status, 303);
    assert.equal(moved.headers.get('location'), 'https://example.com/thanks');
  });

  it("lets every page of a redirecting form post to its redirect: prefilled, resumed and refused pages' form-action", async () => {
    const form = await makeForm(owner, {
      ...contact,
      settings: { redirectUrl: 'https://example.com/thanks', saveAndResume: true },
    });
    const allows = (res: { headers: Headers }, what: string) =>
      assert.match(res.headers.get('content-security-policy')!, /form-action 'self' https:\/\/example\.com;/, what);
    allows(await app.request('GET', form.path), 'the plain page');
    const prefill = await owner.post(`/forms/${form.id}/prefill`, {
      fields: [{ id: form.field('Name'), value: 'Ann' }],
    });
    allows(
      await app.request('GET', new URL(prefill.body.url).pathname + new URL(prefill.body.url).search),
      'prefilled',
    );
    const saved = await app.request('POST', `${form.path}/partial`, {
      body: { fields: [{ id: form.field('Name'), value: 'Ann' }], website: '' },
    });
    assert.equal(saved.status, 200, saved.text);
    allows(await app.request('GET', saved.body.resumeUrl), 'resumed');
    const { token } = await open(form);
    const refused = await post(form, { _fw: token, website: '', [`f${form.field('Email')}`]: 'not-an-email' });
    assert.equal(refused.status, 400);
    allows(refused, 'shown again after a refused post');
  });

  it('refuses a redirectUrl that browsers cannot parse, and serves the page of a form that holds one', async () => {
    // The schema's uri format takes these; a browser's URL parser (and the page's policy) does not.
    for (const redirectUrl of ['https://example.com:99999/', 'https://256.1.1.1/', 'https://1.2.3.4.5/']) {
      const made = await owner.post('/forms', { ...contact, settings: { redirectUrl } });
      assert.equal(made.status, 400, `${redirectUrl}: ${made.text}`);
      assert.equal(made.body.details[0].property, 'body.settings.redirectUrl');
    }
    const form = await makeForm(owner, contact);
    const changed = await owner.put(`/forms/${form.id}`, { settings: { redirectUrl: 'https://example.com:99999/' } });
    assert.equal(changed.status, 400, changed.text);
    assert.equal(changed.body.details[0].property, 'body.settings.redirectUrl');
    // One stored before the check: its page (and embed HTML) still answer.
    await app.server.ctx.db
      .updateTable('forms')
      .set({ settings: JSON.stringify({ redirectUrl: 'https://example.com:99999/' }), revision: 999 })
      .where('id', '=', form.id)
      .execute();
    const page = await app.request('GET', form.path);
    assert.equal(page.status, 200, page.text.slice(0, 300));
    assert.match(page.headers.get('content-security-policy')!, /form-action 'self';/);
    assert.equal((await owner.get(`/forms/${form.id}/html`)).status, 200);
  });

  it("answers the page's script in JSON, with problems per field", async () => {
    const form = await makeForm(owner, contact);
    const { token } = await open(form);
    const bad = await app.request('POST', form.path, { body: { fields: [], _fw: token, website: '' } });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.body.fieldErrors, { [form.field('Name')]: 'This field is required.' });
    const good = await app.request('POST', form.path, {
      body: { fields: [{ id: form.field('Name'), value: 'Ann' }], _fw: token, website: '' },
    });
    assert.equal(good.status, 200);
    assert.equal(good.body.message, 'Thank you! Your answers were received.');
  });

  it("answers a script's post of values of any JSON shape with a 400, never a 500", async () => {
    const form = await makeForm(owner, contact);
    const odd = [{ subvalues: [null] }, { subvalues: [7, 'x', [], {}] }, { subvalues: 'x' }, { first: null }, [null]];
    for (const value of odd) {
      const page = await app.request('GET', form.path);
      const token = unescape(/name="_fw" value="([^"]*)"/.exec(page.text)![1]!);
      app.server.ctx.clock.advance(4000);
      const res = await app.request('POST', form.path, {
        body: { fields: [{ id: form.field('Topics'), value }], _fw: token, website: '' },
      });
      assert.equal(res.status, 400, `${JSON.stringify(value)}: ${res.text}`);
      assert.equal(res.body.code, 'invalid_submission');
    }
  });

  it('refuses a plain post whose text is not UTF-8 or holds a NUL, as the API does, and stores nothing', async () => {
    const form = await makeForm(owner, contact);
    const { token } = await open(form);
    const name = `f${form.field('Name')}`;
    const email = `f${form.field('Email')}=ann%40example.com`;
    // URLSearchParams read %FF as U+FFFD and kept %00: both were stored changed or as sent.
    for (const bad of [`${name}=Al%00ice`, `${name}=Al%FFice`, `${name}=%ED%A0%80`, `${name}%00=x`]) {
      const res = await app.request('POST', form.path, {
        raw: `_fw=${encodeURIComponent(token)}&website=&${email}&${bad}`,
        headers: FORM_POST,
      });
      assert.equal(res.status, 400, `${bad}: ${res.text.slice(0, 200)}`);
      assert.match(res.text, /invalid_characters/, bad);
    }
    const list = await owner.get(`/forms/${form.id}/submissions`);
    assert.equal(list.body.total, 0);
  });

  it('refuses the honeypot, a page sent too soon and a page token that is not ours, and counts the refusals', async () => {
    const form = await makeForm(owner, contact);
    const name = `f${form.field('Name')}`;
    const trap = await post(form, { _fw: (await open(form)).token, website: 'http://spam.example', [name]: 'Bot' });
    assert.equal(trap.status, 400);
    assert.match(trap.text, /looks automated/);
    const page = await app.request('GET', form.path);
    const fresh = unescape(/name="_fw" value="([^"]*)"/.exec(page.text)![1]!);
    const fast = await post(form, { _fw: fresh, website: '', [name]: 'Quick' });
    assert.equal(fast.status, 400);
    assert.match(fast.text, /sent too quickly/);
    assert.match(fast.text, /value="Quick"/, 'a person can send it again');
    const forged = await post(form, { _fw: `${fresh.slice(0, -3)}abc`, website: '', [name]: 'Forged' });
    assert.equal(forged.status, 400);
    assert.match(forged.text, /reload it/);
    assert.equal((await owner.get(`/forms/${form.id}/submissions`)).body.total, 0);
    const s = await stats(form);
    assert.deepEqual(s.totals.refused, { rateLimit: 0, honeypot: 1, tooFast: 1, tooLarge: 0 });
  });

  it('limits submits per address (PUBLIC_SUBMIT_PER_MINUTE) and bodies (BODY_LIMIT), with counts for the owner', async () => {
    const strict = await startTestApp({ PUBLIC_SUBMIT_PER_MINUTE: '2', BODY_LIMIT: '4096' });
    try {
      const acc = await strict.account('Strict');
      const res = await acc.post('/forms', contact);
      const path = new URL(res.body.url).pathname;
      const name = `f${res.body.fields[0].id}`;
      const send = async (value: string) => {
        const page = await strict.request('GET', path);
        const token = unescape(/name="_fw" value="([^"]*)"/.exec(page.text)![1]!);
        strict.server.ctx.clock.advance(4000);
        return strict.request('POST', path, {
          raw: new URLSearchParams({ _fw: token, website: '', [name]: value }).toString(),
          headers: FORM_POST,
        });
      };
      // The limiter's windows are aligned on the epoch: the three sends start a window, so that they all fall in it.
      toWindowStart(strict.server.ctx.clock, 60_000);
      assert.equal((await send('One')).status, 200);
      assert.equal((await send('Two')).status, 200);
      const third = await send('Three');
      assert.equal(third.status, 429);
      assert.ok(Number(third.headers.get('retry-after')) > 0);
      assert.match(third.text, /Too many attempts/);
      strict.server.ctx.clock.advance(61_000);
      const huge = await send('x'.repeat(10_000));
      assert.equal(huge.status, 413);
      assert.match(huge.text, /too long to send/);
      const s = (await acc.get(`/forms/${res.body.id}/stats`)).body;
      assert.deepEqual(s.totals.refused, { rateLimit: 1, honeypot: 0, tooFast: 0, tooLarge: 1 });
      assert.equal(s.totals.completions, 2);
    } finally {
      await strict.close();
    }
  });

  it('takes submissions of an encrypted form on its page without the password, sealed like the API', async () => {
    const form = await makeForm(owner, { ...contact, isEncrypted: true, encryptionPassword: PASSWORD });
    const { token } = await open(form);
    assert.equal((await post(form, { _fw: token, website: '', [`f${form.field('Name')}`]: 'Secret Ann' })).status, 200);
    assert.equal((await owner.get(`/forms/${form.id}/submissions?data=true`)).status, 401);
    const read = await owner.get(`/forms/${form.id}/submissions?data=true`, {
      headers: { 'x-formwork-encryption-password': PASSWORD },
    });
    assert.equal(read.body.submissions[0].data[String(form.field('Name'))].value, 'Secret Ann');
    const rows = await app.server.ctx.db
      .selectFrom('submissions')
      .select('data')
      .where('form_id', '=', form.id)
      .execute();
    assert.ok(!rows[0]!.data.includes('Secret Ann'));
  });

  it('gives the HTML to embed, with its style and script, escaped, the same for every visitor', async () => {
    const form = await makeForm(owner, { ...contact, name: 'Embed <b>me</b>' });
    const res = await owner.get(`/forms/${form.id}/html`);
    assert.equal(res.status, 200);
    assert.equal(res.body.url, `http://forms.test${form.path}`);
    assert.match(res.body.html, /<form [^>]*action="http:\/\/forms\.test\/f\//);
    assert.ok(res.body.html.includes(`<link rel="stylesheet" href="${res.body.styles[0]}">`));
    assert.ok(res.body.html.includes(`<script src="${res.body.scripts[0]}" defer></script>`));
    assert.equal((await owner.get(`/forms/${form.id}/html`)).body.html, res.body.html);
    assert.equal((await app.request('GET', new URL(res.body.scripts[0]).pathname)).status, 200);
    assert.equal((await other.get(`/forms/${form.id}/html`)).status, 404);
    // The script asks for a page token when it starts.
    const token = await app.request('GET', `${form.path}/token`);
    assert.equal(token.status, 200);
    assert.equal(token.headers.get('access-control-allow-origin'), '*');
    // Posted without the script (no token), the form comes back filled in, to be sent again.
    const plain = await post(form, { _fw: '', website: '', [`f${form.field('Name')}`]: 'Eve' });
    assert.equal(plain.status, 400);
    assert.match(plain.text, /send the form again/);
    assert.match(plain.text, /value="Eve"/);
  });

  it('makes prefill URLs from checked values, kept behind a signed token that expires', async () => {
    const form = await makeForm(owner, contact);
    const unknown = await owner.post(`/forms/${form.id}/prefill`, { fields: [{ id: 999999, value: 'x' }] });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.details[0].property, 'body.fields[0].id');
    const bad = await owner.post(`/forms/${form.id}/prefill`, {
      fields: [
        { id: form.field('Name'), value: 'Ann' },
        { id: form.field('Email'), value: 'nope' },
        { id: form.field('Topics'), value: 'nothing' },
      ],
    });
    assert.equal(bad.status, 400);
    assert.deepEqual(
      bad.body.details.map((d: { property: string }) => d.property),
      ['body.fields[1].value', 'body.fields[2].value'],
    );
    const res = await owner.post(`/forms/${form.id}/prefill`, {
      fields: [
        { id: form.field('Name'), value: 'Ann "the <b>best</b>"' },
        { id: form.field('Topics'), value: { subvalues: [{ subvalue: 'help' }] } },
      ],
    });
    assert.equal(res.status, 200, res.text);
    const url = new URL(res.body.url);
    assert.ok(url.search.length < 80, 'a short token, not the values, in the URL');
    assert.ok(!url.search.includes('Ann'));
    const page = await app.request('GET', `${url.pathname}${url.search}`);
    assert.ok(page.text.includes('value="Ann &#34;the &#60;b&#62;best&#60;/b&#62;&#34;"'));
    assert.match(page.text, /value="help" checked/);
    assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
    const tampered = await app.request('GET', `${url.pathname}${url.search.slice(0, -2)}xx`);
    assert.match(tampered.text, /prefilled link has expired/);
    app.server.ctx.clock.advance(31 * 86_400_000);
    const expired = await app.request('GET', `${url.pathname}${url.search}`);
    assert.match(expired.text, /prefilled link has expired/);
    assert.ok(!expired.text.includes('Ann &#34;'));
    assert.equal((await other.post(`/forms/${form.id}/prefill`, { fields: [] })).status, 404);
    const twice = await owner.post(`/forms/${form.id}/prefill`, {
      fields: [
        { id: form.field('Name'), value: 'Ann' },
        { id: String(form.field('Name')), value: 'Bo' },
      ],
    });
    assert.equal(twice.status, 400);
    assert.deepEqual(twice.body.details, [
      { property: 'body.fields[1].id', message: `field ${form.field('Name')} is given twice` },
    ]);
  });

  describe('partial submissions (4.6)', () => {
    it('are saved from the page, listed, searched, read and deleted through the API', async () => {
      const form = await makeForm(owner, { ...contact, settings: { saveAndResume: true } });
      const first = await savePartialOf(app, owner, form.id, [
        { id: form.field('Name'), value: 'Ann Able' },
        { id: form.field('Email'), value: 'not valid yet' },
      ]);
      app.server.ctx.clock.advance(2000);
      const second = await savePartialOf(app, owner, form.id, [{ id: form.field('Name'), value: 'Bob Baker' }]);
      const list = await owner.get(`/form/${form.id}/partialsubmission?data=true&order=ASC`);
      assert.equal(list.status, 200, list.text);
      assert.equal(list.body.total, 2);
      assert.deepEqual(
        list.body.partialSubmissions.map((p: { id: number }) => p.id),
        [first.id, second.id],
      );
      assert.deepEqual(
        list.body.partialSubmissions[0].data,
        {
          [form.field('Name')]: { field: form.field('Name'), value: 'Ann Able' },
        },
        'a value that fails its check is left out',
      );
      const byKeyword = await owner.get(`/form/${form.id}/partialsubmission?keyword=bak&prettyName=true`);
      assert.deepEqual(
        byKeyword.body.partialSubmissions.map((p: any) => [p.id, p.prettyName]),
        [[second.id, null]],
      );
      const bySearch = await owner.get(
        `/form/${form.id}/partialsubmission?search[0][fieldId]=${form.field('Name')}&search[0][value]=ann able`,
      );
      assert.deepEqual(
        bySearch.body.partialSubmissions.map((p: any) => p.id),
        [first.id],
      );
      // The submission list's filters, refused the same way.
      for (const [query, property] of [
        ['search[0][fieldId]=999999&search[0][value]=x', 'query.search[0].fieldId'],
        ['minTime=2026-02-30 10:00:00', 'query.minTime'],
      ]) {
        const refused = await owner.get(`/form/${form.id}/partialsubmission?${query}`);
        assert.equal(refused.status, 400, query);
        assert.equal(refused.body.code, 'validation_failed');
        assert.equal(refused.body.details[0].property, property);
        const submissions = await owner.get(`/forms/${form.id}/submissions?${query}`);
        assert.deepEqual(submissions.body.details, refused.body.details);
      }
      // The v2 path answers in v2's names and shape (docs/v2.md).
      const legacy = await app.request('GET', `/api/v2/form/${form.id}/partialsubmission.json?per_page=1&page=2`, {
        token: owner.token,
      });
      assert.equal(legacy.status, 200);
      assert.equal(legacy.body.pages, 2);
      assert.equal(legacy.body.partial_submissions.length, 1);
      assert.equal(typeof legacy.body.partial_submissions[0].id, 'string');
      const one = await owner.get(`/partialsubmission/${first.id}`);
      assert.equal(one.status, 200);
      assert.equal(one.body.data[0].displayValue, 'Ann Able');
      assert.equal((await other.get(`/partialsubmission/${first.id}`)).status, 404);
      assert.equal((await other.delete(`/partialsubmission/${first.id}`)).status, 404);
      assert.deepEqual((await owner.delete(`/partialsubmission/${first.id}`)).body, { id: first.id });
      assert.equal((await owner.get(`/partialsubmission/${first.id}`)).status, 404);
      const page = await app.request('GET', `${form.path}?resume=${first.resumeToken}`);
      assert.match(page.text, /resume link has expired or was already used/);
    });

    it('start with a value: a save with nothing in it keeps nothing, one from a resumed page empties it', async () => {
      const form = await makeForm(owner, { ...contact, settings: { saveAndResume: true } });
      const save = (body: object) => app.request('POST', `${form.path}/partial`, { body: { website: '', ...body } });
      for (const fields of [[], [{ id: form.field('Email'), value: 'not an address' }]]) {
        const empty = await save({ fields });
        assert.equal(empty.status, 400, empty.text);
        assert.equal(empty.body.code, 'nothing_to_save');
      }
      const unknownLink = await save({ fields: [], _resume: 'no-such-token' });
      assert.equal(unknownLink.body.code, 'nothing_to_save');
      assert.equal((await owner.get(`/form/${form.id}/partialsubmission`)).body.total, 0);
      const kept = await save({ fields: [{ id: form.field('Name'), value: 'Pat' }] });
      assert.equal(kept.status, 200, kept.text);
      const emptied = await save({ fields: [], _resume: kept.body.resumeToken });
      assert.equal(emptied.status, 200, emptied.text);
      assert.equal(emptied.body.resumeToken, kept.body.resumeToken);
      const list = await owner.get(`/form/${form.id}/partialsubmission?data=true`);
      assert.equal(list.body.total, 1);
      assert.deepEqual(list.body.partialSubmissions[0].data, {});
      const notAList = await save({ fields: 'Pat' });
      assert.equal(notAList.status, 400);
      assert.deepEqual(notAList.body.details, [
        { property: 'body.fields', message: 'must be a list of at most 1000 fields' },
      ]);
    });

    it('are refused on forms that do not keep them', async () => {
      const form = await makeForm(owner, contact);
      const res = await app.request('POST', `${form.path}/partial`, { body: { fields: [], website: '' } });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'save_and_resume_off');
    });

    it('of an encrypted form are sealed, read with the password, resumed without it', async () => {
      const form = await makeForm(owner, {
        ...contact,
        isEncrypted: true,
        encryptionPassword: PASSWORD,
        settings: { saveAndResume: true },
      });
      const saved = await savePartialOf(app, owner, form.id, [{ id: form.field('Name'), value: 'Hidden Hannah' }]);
      const row = await app.server.ctx.db
        .selectFrom('partial_submissions')
        .selectAll()
        .where('id', '=', saved.id)
        .executeTakeFirstOrThrow();
      assert.ok(!row.data.includes('Hannah') && !row.resume_data!.includes('Hannah'));
      assert.equal(row.pretty_name, null);
      assert.equal((await owner.get(`/partialsubmission/${saved.id}`)).status, 401);
      const read = await owner.get(`/partialsubmission/${saved.id}`, {
        headers: { 'x-formwork-encryption-password': PASSWORD },
      });
      assert.equal(read.body.data[0].value, 'Hidden Hannah');
      const page = await app.request('GET', `${form.path}?resume=${saved.resumeToken}`);
      assert.match(page.text, /value="Hidden Hannah"/);
    });

    it('turn into the submission that finishes them, and expire after PARTIAL_RETENTION_DAYS', async () => {
      const form = await makeForm(owner, { ...contact, settings: { saveAndResume: true } });
      const done = await savePartialOf(app, owner, form.id, [{ id: form.field('Name'), value: 'Done Dora' }]);
      const { token } = await open(form, `?resume=${done.resumeToken}`);
      const sent = await post(form, {
        _fw: token,
        website: '',
        _resume: done.resumeToken,
        [`f${form.field('Name')}`]: 'Done Dora',
      });
      assert.equal(sent.status, 200);
      assert.equal((await owner.get(`/partialsubmission/${done.id}`)).status, 404);
      const left = await savePartialOf(app, owner, form.id, [{ id: form.field('Name'), value: 'Left Lee' }]);
      app.server.ctx.clock.advance(31 * 86_400_000);
      assert.equal(
        (await owner.get(`/partialsubmission/${left.id}`)).status,
        404,
        'expired: gone from the API at once',
      );
      assert.ok((await removeExpiredPartials(app.server.ctx)) >= 1);
      const rows = await app.server.ctx.db
        .selectFrom('partial_submissions')
        .select('id')
        .where('id', '=', left.id)
        .execute();
      assert.deepEqual(rows, [], 'the chore removed the row');
    });
  });

  it('counts views, starts, partial saves and completions per day, with the completion rate', async () => {
    const form = await makeForm(owner, { ...contact, settings: { saveAndResume: true } });
    for (let i = 0; i < 3; i++) await app.request('GET', form.path);
    for (let i = 0; i < 2; i++)
      assert.equal((await app.request('POST', `${form.path}/events`, { body: { type: 'start' } })).status, 200);
    await savePartialOf(app, owner, form.id, [{ id: form.field('Name'), value: 'Sam' }]);
    const { token } = await open(form);
    await post(form, { _fw: token, website: '', [`f${form.field('Name')}`]: 'Sam' });
    const s = await stats(form);
    assert.equal(s.totals.views, 4);
    assert.equal(s.totals.starts, 2);
    assert.equal(s.totals.partialSaves, 1);
    assert.equal(s.totals.completions, 1);
    assert.equal(s.completionRate, 0.5);
    assert.equal(s.days.length, 1);
    assert.equal(s.days[0].day, s.to);
    const none = await owner.get(`/forms/${form.id}/stats?from=2000-01-01&to=2000-01-31`);
    assert.deepEqual([none.body.days, none.body.completionRate], [[], null]);
    assert.equal((await owner.get(`/forms/${form.id}/stats?from=2000-02-01&to=2000-01-31`)).status, 400);
    // The default range, thirty days back, stops at the first day there is.
    const early = expectStatus(await owner.get(`/forms/${form.id}/stats?to=0000-01-05`), 200, 'year 0');
    assert.deepEqual([early.from, early.to], ['0000-01-01', '0000-01-05']);
    assert.equal((await other.get(`/forms/${form.id}/stats`)).status, 404);
    // No row per view: one row per form and day.
    const rows = await app.server.ctx.db
      .selectFrom('form_daily_stats')
      .selectAll()
      .where('form_id', '=', form.id)
      .execute();
    assert.equal(rows.length, 1);
  });
});
