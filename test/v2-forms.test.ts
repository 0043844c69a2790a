/** The v2 form and field paths (docs/v2.md), on the database the suite runs on. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { assertDeleted, assertShape, assertV2Error, FIELD_SHAPE, FORM_SHAPE, ok, v2, V2_TIME } from './support/v2.js';

describe(`v2 forms and fields (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;
  let call: ReturnType<typeof v2>;
  let formId: string;

  before(async () => {
    app = await startTestApp();
    [a, b] = await Promise.all([app.account('A'), app.account('B')]);
    call = v2(app, a.token);
    // Form-encoded, as v2 clients send by default; meaningless settings accepted and ignored.
    const created = ok(
      await call('POST', '/form.json', {
        name: 'Contact',
        label_position: 'left',
        timezone: 'Europe/Lisbon',
        language: 'pt',
        active: '1',
        db: '1',
        use_ssl: '1',
        num_columns: '2',
        submit_button_title: 'Send',
      }),
      201,
    );
    formId = created.id;
  });
  after(() => app.close());

  it('creates a form from form-encoded settings and answers in the documented shape', async () => {
    const form = ok(await call('GET', `/form/${formId}.json`));
    assertShape(form, FORM_SHAPE, 'form');
    assert.equal(form.label_position, 'left');
    assert.equal(form.timezone, 'Europe/Lisbon');
    assert.equal(form.language, 'pt');
    assert.equal(form.submit_button_title, 'Send');
    assert.equal(form.inactive, false);
    assert.equal(form.folder, '0');
    assert.deepEqual(form.fields, []);
    // The same form through v2025: one implementation.
    const same = ok(await a.get(`/forms/${formId}`));
    assert.equal(same.settings.labelPosition, 'left');
    assert.equal(same.submitButtonTitle, 'Send');
  });

  it('creates from JSON, from form-encoded labelled JSON, and with no content type', async () => {
    for (const style of ['json', 'form-as-json', 'none'] as const) {
      const made = ok(await call('POST', '/form', { name: `Made as ${style}`, active: 'false' }, style), 201);
      assert.equal(made.name, `Made as ${style}`);
      assert.equal(made.inactive, true, style);
    }
  });

  it('lists forms in the forms wrapper, with and without .json, paged by per_page and page', async () => {
    for (const path of ['/form', '/form.json', '/form/.json']) {
      const list = ok(await call('GET', `${path}?per_page=2&page=1`));
      assert.equal(list.forms.length, 2, path);
      assert.equal(list.total, 4);
      assert.equal(list.pages, 2);
      assertShape(list.forms[0], FORM_SHAPE, 'listed form');
    }
    // Parameters of a GET in a form body are read too.
    const inBody = ok(await call('GET', '/form', { per_page: '3', page_number: '2' }));
    assert.equal(inBody.forms.length, 1);
  });

  it('groups the list by folder with folders=1', async () => {
    const folder = ok(await call('POST', '/folder', { name: 'Sales', parent: '0' }), 201);
    ok(await call('PUT', `/form/${formId}`, { folder: folder.id }));
    const grouped = ok(await call('GET', '/form.json?folders=1'));
    assert.equal(grouped.forms[folder.id].name, 'Sales');
    assert.deepEqual(
      grouped.forms[folder.id].forms.map((f: any) => f.id),
      [formId],
    );
    assert.equal(grouped.forms['0'].forms.length, 3);
    ok(await call('PUT', `/form/${formId}`, { folder: '0' }));
  });

  it('updates only what is sent, booleans as 1/0 and true/false, and keeps other settings', async () => {
    const updated = ok(await call('PUT', `/form/${formId}.json`, { active: '0', timezone: 'America/Chicago' }));
    assert.equal(updated.inactive, true);
    assert.equal(updated.timezone, 'America/Chicago');
    assert.equal(updated.label_position, 'left');
    const back = ok(await call('PUT', `/form/${formId}`, { inactive: false }, 'json'));
    assert.equal(back.inactive, false);
    // Only meaningless settings: nothing changes, and the form is answered.
    assert.equal(
      ok(await call('PUT', `/form/${formId}`, { use_ssl: '1', num_columns: '3' })).timezone,
      'America/Chicago',
    );
    // Bad values get the v2025 rule's 400 in the error body.
    assertV2Error(await call('PUT', `/form/${formId}`, { label_position: 'middle' }), 400);
  });

  it('removes a submission limit given 0 or empty, and a redirect given empty; other settings kept', async () => {
    const settings = async () => ok(await a.get(`/forms/${formId}`)).settings;
    const limited = ok(
      await call('PUT', `/form/${formId}`, { submission_limit: '5', redirect_url: 'https://example.com/thanks' }),
    );
    assert.equal(limited.submission_limit, '5');
    assert.equal(limited.redirect_url, 'https://example.com/thanks');
    const unlimited = ok(await call('PUT', `/form/${formId}`, { submission_limit: '0' }));
    assert.equal(unlimited.submission_limit, '0');
    assert.equal(unlimited.redirect_url, 'https://example.com/thanks');
    assert.equal('submissionLimit' in (await settings()), false);
    ok(await call('PUT', `/form/${formId}`, { submission_limit: '7' }));
    assert.equal(ok(await call('PUT', `/form/${formId}`, { submission_limit: '' })).submission_limit, '0');
    assert.equal(ok(await call('PUT', `/form/${formId}`, { submission_limit: 3 }, 'json')).submission_limit, '3');
    assert.equal(ok(await call('PUT', `/form/${formId}`, { submission_limit: 0 }, 'json')).submission_limit, '0');
    const unredirected = ok(await call('PUT', `/form/${formId}`, { redirect_url: '' }));
    assert.equal(unredirected.redirect_url, '');
    assert.equal(unredirected.timezone, 'America/Chicago');
    const stored = await settings();
    assert.equal('redirectUrl' in stored, false);
    assert.equal(stored.labelPosition, 'left');
    // Anything else is still refused.
    for (const bad of [{ submission_limit: 'many' }, { submission_limit: '-1' }, { redirect_url: 'ftp://example.com' }])
      assertV2Error(await call('PUT', `/form/${formId}`, bad), 400);
    const made = ok(await call('POST', '/form', { name: 'No limit', submission_limit: '0', redirect_url: '' }), 201);
    assert.equal(made.submission_limit, '0');
    assertDeleted(await call('DELETE', `/form/${made.id}`), made.id);
  });

  it('adds, reads, changes and deletes fields, options given as options[n] and options_values', async () => {
    const field = ok(
      await call('POST', `/form/${formId}/field.json`, {
        field_type: 'select',
        label: 'Size',
        required: '1',
        uniq: '0',
        options: ['Small', 'Large'],
        options_values: ['s', 'l'],
      }),
      201,
    );
    assertShape(field, FIELD_SHAPE, 'field');
    assert.equal(field.type, 'select');
    assert.equal(field.required, '1');
    assert.deepEqual(field.options, [
      { label: 'Small', value: 's' },
      { label: 'Large', value: 'l' },
    ]);
    const text = ok(
      await call(
        'POST',
        `/form/${formId}/field`,
        { field_type: 'text', label: 'Note', hidden: 'true', colspan: 6 },
        'json',
      ),
      201,
    );
    assert.equal(text.hidden, '1');
    assert.equal(text.colspan, '6');
    const comma = ok(
      await call('POST', `/form/${formId}/field`, { field_type: 'checkbox', label: 'Extras', options: 'Bag,Card' }),
      201,
    );
    assert.deepEqual(
      comma.options.map((o: any) => o.value),
      ['Bag', 'Card'],
    );

    const list = ok(await call('GET', `/form/${formId}/field`));
    assert.deepEqual(
      list.fields.map((f: any) => f.id),
      [field.id, text.id, comma.id],
    );
    assert.equal(list.total, 3);
    for (const path of [`/field/${field.id}`, `/field/${field.id}.json`])
      assertShape(ok(await call('GET', path)), FIELD_SHAPE, path);
    const changed = ok(await call('PUT', `/field/${text.id}.json`, { label: 'Notes', readonly: '1' }));
    assert.equal(changed.label, 'Notes');
    assert.equal(changed.readonly, '1');
    assert.equal(ok(await a.get(`/forms/${formId}/fields/${text.id}`)).readOnly, true);

    // The form detail holds its fields; basic does not.
    const detail = ok(await call('GET', `/form/${formId}`));
    assert.equal(detail.fields.length, 3);
    assert.equal('fields' in ok(await call('GET', `/form/${formId}/basic.json`)), false);

    assertDeleted(await call('DELETE', `/field/${comma.id}.json`), comma.id);
    assertV2Error(await call('GET', `/field/${comma.id}`), 404);
  });

  it('refuses a GET body over BODY_LIMIT with a 413 and closes its connection, Content-Length or chunked', async () => {
    const small = await startTestApp({ BODY_LIMIT: '2048' });
    try {
      const s = await small.account();
      const { hostname, port } = new URL(small.url);
      const body = `per_page=1&note=${'x'.repeat(3000)}`;
      for (const framing of ['content-length', 'chunked']) {
        const socket = connect({ host: hostname, port: Number(port) });
        socket.on('error', () => undefined); // the server may reset what it left unread
        await once(socket, 'connect');
        let answer = '';
        socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        const closed = once(socket, 'close');
        socket.write(
          `GET /api/v2/form HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${s.token}\r\n` +
            'Content-Type: application/x-www-form-urlencoded\r\n' +
            (framing === 'chunked'
              ? `Transfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
              : `Content-Length: ${body.length}\r\n\r\n${body}`),
        );
        // Left open, the connection waited for the rest of a body never read, until its keep-alive timeout (72 s).
        const timer = setTimeout(() => socket.destroy(), 10_000);
        await closed;
        clearTimeout(timer);
        assert.match(answer, /^HTTP\/1\.1 413 /, framing);
        assert.match(answer, /\r\nconnection: close\r\n/i, framing);
        assert.match(answer, /"code":"payload_too_large"/, framing);
      }
    } finally {
      await small.close();
    }
  });

  it("answers a form's embed HTML", async () => {
    const embed = ok(await call('GET', `/form/${formId}/html.json`));
    assert.equal(embed.id, formId);
    assert.match(embed.html, /<form/);
    assert.equal(embed.url, ok(await a.get(`/forms/${formId}`)).url);
  });

  it('serves the OAuth endpoints under /api/v2/oauth2 as at /oauth2', async () => {
    const body = 'grant_type=authorization_code&code=nothing&client_id=nobody';
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    const old = await app.request('POST', '/api/v2/oauth2/token', { raw: body, headers });
    const current = await app.request('POST', '/oauth2/token', { raw: body, headers });
    assert.equal(old.status, current.status);
    assert.deepEqual(old.body, current.body);
    const authorize = await app.request('GET', '/api/v2/oauth2/authorize?client_id=nobody');
    assert.equal(authorize.status, (await app.request('GET', '/oauth2/authorize?client_id=nobody')).status);
    assert.notEqual(authorize.status, 404);
  });

  it('lists the v2 operations in the OpenAPI document under their own tag', async () => {
    const doc = ok(await app.request('GET', '/api/v2025/openapi.json'));
    const v2Paths = Object.keys(doc.paths).filter((p) => p.startsWith('/api/v2/'));
    for (const p of [
      '/api/v2/form',
      '/api/v2/form/{formId}/submission',
      '/api/v2/field/{fieldId}',
      '/api/v2/smartlist',
    ])
      assert.ok(v2Paths.includes(p), p);
    for (const p of v2Paths) {
      for (const op of Object.values(doc.paths[p]) as any[])
        if (op.operationId) assert.deepEqual(op.tags, ['v2 (original service)'], p);
      assert.deepEqual(doc.paths[p].servers, [{ url: app.config.publicUrl }]);
    }
  });

  it('copies a form with its fields', async () => {
    const copy = ok(await call('POST', `/form/${formId}/copy.json`), 201);
    assert.notEqual(copy.id, formId);
    assert.equal(copy.fields.length, 2);
    assertDeleted(await call('DELETE', `/form/${copy.id}.json`), copy.id);
    assertV2Error(await call('GET', `/form/${copy.id}`), 404);
  });

  it("copies to the top level with folder 0 or empty, to a folder by its id, and by default into the source's", async () => {
    const folder = ok(await call('POST', '/folder', { name: 'Filed', parent: '0' }), 201);
    const other = ok(await call('POST', '/folder', { name: 'Elsewhere', parent: '0' }), 201);
    const source = ok(await call('POST', '/form', { name: 'In a folder', folder: folder.id }), 201);
    assert.equal(source.folder, folder.id);
    const path = `/form/${source.id}/copy`;
    const copies: [any, string][] = [
      [ok(await call('POST', path, { folder: '0' }), 201), '0'],
      [ok(await call('POST', path, { folder: '' }), 201), '0'],
      [ok(await call('POST', path, { folder: 0 }, 'json'), 201), '0'],
      [ok(await call('POST', `${path}.json?folder=0`), 201), '0'],
      [ok(await call('POST', path, { folder: other.id }), 201), other.id],
      [ok(await call('POST', path), 201), folder.id],
    ];
    for (const [copy, expected] of copies) {
      assert.equal(copy.folder, expected, JSON.stringify(copy).slice(0, 200));
      assert.equal(ok(await a.get(`/forms/${copy.id}`)).folder, expected === '0' ? null : Number(expected));
      assertDeleted(await call('DELETE', `/form/${copy.id}`), copy.id);
    }
    assertV2Error(await call('POST', path, { folder: 'top' }), 400);
    assertDeleted(await call('DELETE', `/form/${source.id}`), source.id);
  });

  it('reads the .json and .xml endings in any case', async () => {
    for (const path of [`/form/${formId}.JSON`, `/form/${formId}.Json`, `/form/${formId}/.JSON`])
      assert.equal(ok(await call('GET', path)).id, formId, path);
    assert.equal(ok(await call('GET', '/form.JSON?per_page=1')).forms.length, 1);
    // The older alias of a v2025 route too.
    assert.equal(ok(await app.request('GET', `/api/v2/forms/${formId}.JSON`, { token: a.token })).id, Number(formId));
    for (const path of [`/form/${formId}.XML`, `/form/${formId}.Xml`, '/form.XML']) {
      const xml = await call('GET', path);
      assertV2Error(xml, 406);
      assert.equal(xml.body.code, 'not_acceptable', path);
    }
  });

  it("answers 404 for another account's form and field, 401 without a token", async () => {
    const theirs = v2(app, b.token);
    assertV2Error(await theirs('GET', `/form/${formId}.json`), 404);
    assertV2Error(await theirs('PUT', `/form/${formId}`, { name: 'Taken' }), 404);
    const field = ok(await call('GET', `/form/${formId}/field`)).fields[0];
    assertV2Error(await theirs('GET', `/field/${field.id}`), 404);
    assertV2Error(await theirs('DELETE', `/field/${field.id}`), 404);
    assertV2Error(await app.request('GET', '/api/v2/form.json'), 401);
  });

  it('takes the token as oauth_token, and refuses .xml with 406 naming JSON', async () => {
    const list = ok(await app.request('GET', `/api/v2/form.json?oauth_token=${a.token}`));
    assert.ok(list.forms.length > 0);
    const xml = await app.request('GET', `/api/v2/form/${formId}.xml`, { token: a.token });
    assertV2Error(xml, 406);
    assert.equal(xml.body.code, 'not_acceptable');
    assert.match(xml.body.error, /JSON/);
  });

  it('reads a v2025-made form through v2, times in Eastern Time', async () => {
    const made = ok(await a.post('/forms', { name: 'From v2025', settings: { labelPosition: 'right' } }));
    const form = ok(await call('GET', `/form/${made.id}.json`));
    assert.equal(form.label_position, 'right');
    assert.match(form.created, V2_TIME);
    // Eastern Time is 4 or 5 hours behind UTC.
    const lag = Math.round((Date.parse(made.created) - Date.parse(`${form.created.replace(' ', 'T')}Z`)) / 3_600_000);
    assert.ok(lag === 4 || lag === 5, String(lag));
  });
});

describe(`v2 oauth_token over plain HTTP with an https PUBLIC_URL (${dialectName})`, () => {
  it('is refused unless the request comes from this machine', async () => {
    const app = await startTestApp({ PUBLIC_URL: 'https://forms.example.com', TRUST_PROXY: 'true' });
    try {
      const a = await app.account();
      // From this machine (the test's own connection): taken.
      ok(await app.request('GET', `/api/v2/form.json?oauth_token=${a.token}`));
      // Through a proxy that says the caller is elsewhere, over http: refused.
      const far = await app.request('GET', `/api/v2/form.json?oauth_token=${a.token}`, {
        headers: { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'http' },
      });
      assertV2Error(far, 401);
      assert.equal(far.body.code, 'token_in_query_refused');
      const https = await app.request('GET', `/api/v2/form.json?oauth_token=${a.token}`, {
        headers: { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'https' },
      });
      ok(https);
    } finally {
      await app.close();
    }
  });
});
