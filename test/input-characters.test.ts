/**
 * Text a request brings is UTF-8 without NUL (U+0000) or lone surrogates, on every route and
 * both databases: PostgreSQL cannot store either (it answered 500), SQLite stored them, and
 * surrogates and bytes that were not UTF-8 became U+FFFD behind a 200. Each is now a 400 that
 * names the input (an error page or an OAuth error on the OAuth endpoints), and changes nothing.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Browser, authorizeUrl, readForm, registerClient, type Client } from './support/oauth-flow.js';
import { dialectName, dumpData, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { ok } from './support/submission-fixtures.js';
import { ERRORS } from '../src/errors.js';

/** Every row of every table, to show that a refused request wrote nothing. */
function assertRefused(res: Reply, property: string, what: string): void {
  assert.equal(res.status, 400, `${what}: ${res.status} ${res.text.slice(0, 300)}`);
  assert.equal(res.body.status, 'error', what);
  assert.equal(res.body.code, 'invalid_characters', what);
  assert.ok(
    res.body.details.some((d: { property: string }) => d.property === property),
    `${what}: details should name ${property}: ${JSON.stringify(res.body.details)}`,
  );
}

describe(`NUL, lone surrogates and bytes that are not UTF-8 (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let form: any;
  let nameField: any;
  let fileField: any;
  let folder: any;
  let user: any;
  let client: Client;
  let submission: any;

  before(async () => {
    app = await startTestApp();
    a = await app.account('Characters');
    form = await ok(
      a.post('/forms', {
        name: 'Contact',
        fields: [
          { type: 'name', label: 'Name' },
          { type: 'file', label: 'File' },
        ],
      }),
    );
    [nameField, fileField] = form.fields;
    folder = await ok(a.post('/folders', { name: 'Folder' }));
    user = await ok(
      a.post('/users', {
        email: 'member@example.com',
        name: 'Member',
        role: 'member',
        password: 'long enough password',
      }),
    );
    client = await registerClient(a);
    submission = await ok(
      a.post(`/forms/${form.id}/submissions`, { fields: [{ id: nameField.id, value: { first: 'Ann', last: 'Lee' } }] }),
    );
  });
  after(() => app.close());

  /** POSTs text as it is, as a JSON body, with A's token. */
  const postJsonText = (path: string, text: string): Promise<Reply> =>
    fetch(`${app.url}/api/v2025${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body: text,
    }).then(async (res) => ({ status: res.status, headers: res.headers, body: (await res.json()) as any, text: '' }));

  it('refuses them in the names of forms, fields, folders, users and clients, in a name subfield and in searches, and writes nothing', async () => {
    const before = await dumpData(app);
    const cases: [string, () => Promise<Reply>, string][] = [
      ['form name (create)', () => a.post('/forms', { name: 'Con\u0000tact' }), 'body.name'],
      ['form name (update)', () => a.put(`/forms/${form.id}`, { name: 'Con\ud800tact' }), 'body.name'],
      [
        'field label (create)',
        () => a.post(`/forms/${form.id}/fields`, { type: 'text', label: 'La\u0000bel' }),
        'body.label',
      ],
      [
        'field label (update)',
        () => a.put(`/forms/${form.id}/fields/${nameField.id}`, { label: 'La\udc00bel' }),
        'body.label',
      ],
      ['folder name (create)', () => a.post('/folders', { name: '\u0000' }), 'body.name'],
      ['folder name (update)', () => a.put(`/folders/${folder.id}`, { name: 'Fol\ud800der' }), 'body.name'],
      [
        'user name (create)',
        () => a.post('/users', { email: 'other@example.com', name: 'Mem\u0000ber', role: 'member' }),
        'body.name',
      ],
      ['user name (update)', () => a.put(`/users/${user.id}`, { name: 'Mem\udfffber' }), 'body.name'],
      [
        'user email',
        () => a.post('/users', { email: 'o\u0000@example.com', name: 'Other', role: 'member' }),
        'body.email',
      ],
      [
        'client name',
        () => a.post('/oauth-clients', { name: 'Ap\u0000p', redirectUris: ['https://example.com/cb'] }),
        'body.name',
      ],
      [
        'name subfield (create)',
        () =>
          a.post(`/forms/${form.id}/submissions`, { fields: [{ id: nameField.id, value: { first: 'A\u0000nn' } }] }),
        'body.fields[0].value.first',
      ],
      [
        'name subfield (update)',
        () => a.put(`/submissions/${submission.id}`, { fields: [{ id: nameField.id, value: { last: 'L\ud800ee' } }] }),
        'body.fields[0].value.last',
      ],
      [
        'file name',
        () => a.post(`/forms/${form.id}/fields/${fileField.id}/upload-urls`, { filenames: ['ok.txt', 'b\u0000d.txt'] }),
        'body.filenames[1]',
      ],
      ['form search', () => a.get('/forms?search=%00'), 'query.search'],
      ['cross-form search', () => a.get('/submissions?search=a%00'), 'query.search'],
      ['keyword', () => a.get(`/forms/${form.id}/submissions?keyword=%00`), 'query.keyword'],
      [
        'field search',
        () => a.get(`/forms/${form.id}/submissions?search[0][fieldId]=${nameField.id}&search[0][value]=%ED%A0%80`),
        'query.search[0].value',
      ],
      ['form search, not UTF-8', () => a.get('/forms?search=caf%E9'), 'query.search'],
    ];
    for (const [what, send, property] of cases) assertRefused(await send(), property, what);
    assert.equal(await dumpData(app), before, 'a refused request changed the database');
  });

  it('refuses bytes that are not UTF-8 in a JSON body instead of reading them as U+FFFD', async () => {
    const before = await dumpData(app);
    const body = Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
    const res = await fetch(`${app.url}/api/v2025/forms`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body,
    });
    assertRefused(
      { status: res.status, headers: res.headers, body: await res.json(), text: '' },
      'body',
      'Latin-1 bytes in JSON',
    );
    assert.equal(await dumpData(app), before);
  });

  it('reads JSON escapes as JSON does: upper-case and property-name escapes refused, pairs and escaped backslashes kept', async () => {
    // A body whose text has no \u0000 or \uD800-\uDFFF escape is not walked (characters.ts):
    // what the rule refuses can come in no other way, in whatever case or place it is written.
    const send = (text: string) => postJsonText('/forms', text);
    const before = await dumpData(app);
    assertRefused(await send('{"name":"Con\\uD800tact"}'), 'body.name', 'an upper-case lone surrogate escape');
    assertRefused(await send('{"name":"Contact","x\\u0000":1}'), 'body', 'an escaped NUL in a property name');
    assert.equal(await dumpData(app), before);
    const kept = [
      ['{"name":"Rocket \\uD83D\\uDE80"}', 'Rocket 🚀'],
      ['{"name":"Back\\\\u0000slash"}', 'Back\\u0000slash'],
      ['{"name":"Caf\\u00E9"}', 'Café'],
    ];
    for (const [text, name] of kept) {
      const res = await send(text!);
      assert.equal(res.status, 200, `${text}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.name, name);
    }
  });

  it('answers the rule first when a body also has a key the JSON parser refuses (__proto__, constructor.prototype)', async () => {
    // Found by test/submissions-property.test.ts (seed -766365052): the parser's
    // prototype-poisoning rule answered invalid_json before the text's rule was asked.
    const create = `/forms/${form.id}/submissions`;
    const before = await dumpData(app);
    assertRefused(
      await postJsonText(
        create,
        `{"fields":[{"id":${nameField.id},"value":{"fir\\u0000st":false}},{"":{"__proto__":0}}]}`,
      ),
      `body.fields[0].value`,
      'a NUL in a property name beside a __proto__ key (the early create)',
    );
    assertRefused(
      await postJsonText('/forms', '{"name":"Con\\u0000tact","constructor":{"prototype":{"x":1}}}'),
      'body.name',
      'a NUL beside constructor.prototype',
    );
    assert.equal(await dumpData(app), before);
    // Without what the rule refuses, the parser's own answer stands.
    for (const text of ['{"__proto__":{"x":1},"name":"Rocket \\uD83D\\uDE80"}', '{"name":"Contact","__proto__":0}']) {
      const res = await postJsonText('/forms', text);
      assert.equal(res.status, 400, text);
      assert.equal(res.body.code, 'invalid_json', text);
    }
    assert.equal(await dumpData(app), before);
  });

  it('answers a path whose escapes are not UTF-8, or an over-long path part, with the usual error body', async () => {
    for (const path of ['/forms/%FF', `/forms/${form.id}/fields/%ED%A0%80`, '/folders/caf%C3']) {
      const res = await a.get(path);
      assert.equal(res.status, 400, `${path}: ${res.text}`);
      assert.deepEqual(res.body, {
        status: 'error',
        error: 'path: is not valid percent-encoded UTF-8',
        code: 'invalid_url',
        details: [{ property: 'path', message: 'is not valid percent-encoded UTF-8' }],
      });
    }
    const long = await a.get(`/forms/${'1'.repeat(201)}`);
    assert.equal(long.status, 414);
    assert.equal(long.body.code, 'uri_too_long');
    assert.equal(long.body.status, 'error');
  });

  it('answers what the HTTP parser refuses with the usual error body, and closes the connection', async () => {
    const { hostname, port } = new URL(app.url);
    const answerTo = async (head: string) => {
      const socket = connect({ host: hostname, port: Number(port) });
      socket.on('error', () => undefined);
      socket.setEncoding('latin1');
      let text = '';
      socket.on('data', (d: string) => (text += d));
      await once(socket, 'connect');
      const closed = once(socket, 'close');
      socket.write(head);
      await closed;
      return text;
    };
    const cases: [string, string, number, 'headers_too_large' | 'bad_request'][] = [
      [
        'a header of 20 KB',
        `GET /api/v2025/forms HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
        431,
        'headers_too_large',
      ],
      [
        'a path of 17 KB',
        `GET /api/v2025/forms/${'1'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
        431,
        'headers_too_large',
      ],
      ['a NUL in a header', 'GET /api/v2025/forms HTTP/1.1\r\nHost: x\r\nX-Nul: a\0b\r\n\r\n', 400, 'bad_request'],
      ['a target without its /', 'GET api/v2025/forms HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'bad_request'],
      [
        'both Content-Length and Transfer-Encoding',
        'POST /api/v2025/forms HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n',
        400,
        'bad_request',
      ],
    ];
    for (const [what, head, status, code] of cases) {
      const text = await answerTo(head);
      assert.match(text, new RegExp(`^HTTP/1\\.1 ${status} `), `${what}: ${text.slice(0, 200)}`);
      assert.match(text, /\r\nconnection: close\r\n/i, what);
      assert.deepEqual(
        JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)),
        { status: 'error', error: ERRORS[code].message, code },
        what,
      );
    }
  });

  it('keeps text that is well formed exactly as sent: astral characters, U+FFFD itself, a lone % in a query', async () => {
    const name = 'Zoë 😀 \ufffd 𝄞 \u2028 ✓';
    const created = await ok(a.post('/forms', { name }));
    assert.equal(created.name, name);
    assert.equal((await ok(a.get(`/forms/${created.id}`))).name, name);
    const found = await ok(a.get(`/forms?search=${encodeURIComponent('😀')}`));
    assert.deepEqual(
      found.forms.map((f: any) => f.id),
      [created.id],
    );
    assert.equal((await ok(a.get('/forms?search=100%'))).total, 0, 'a % without two hex digits stays a %');
  });

  it('answers the OAuth endpoints, which need no token, with 400 and no stack trace', async () => {
    const before = await dumpData(app);
    // The authorization page: an error page, not a 500.
    for (const query of ['client_id=%00', `client_id=${client.clientId}&state=%ED%A0%80`, 'client_id=%FF']) {
      const res = await app.request('GET', `/oauth2/authorize?${query}`);
      assert.equal(res.status, 400, `${query}: ${res.status}`);
      assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(res.text, /query\.(client_id|state)/);
    }
    // The sign-in form, with a real authorization request behind it.
    const browser = new Browser(app.url);
    const page = await browser.fetch(
      authorizeUrl(client, { code_challenge: 'x'.repeat(43), code_challenge_method: 'S256' }),
    );
    assert.equal(page.status, 200, page.text.slice(0, 300));
    const signIn = readForm(page.text);
    const res = await browser.fetch(signIn.action, {
      method: 'POST',
      form: { ...signIn.fields, email: 'member\u0000@example.com', password: 'long enough password' },
    });
    assert.equal(res.status, 400, `NUL in the email: ${res.status} ${res.text.slice(0, 300)}`);
    assert.match(res.text, /body\.email/);
    // A browser sends a lone surrogate as U+FFFD; another client may send its bytes.
    const raw = await app.request('POST', signIn.action, {
      raw: `${new URLSearchParams(signIn.fields).toString()}&email=member%40example.com%ED%A0%80&password=x`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(raw.status, 400, `a surrogate's bytes in the email: ${raw.status}`);
    assert.match(raw.text, /body\.email/);
    // The token endpoint answers as RFC 6749 says.
    const token = await app.request('POST', '/oauth2/token', {
      raw: `grant_type=authorization_code&code=a%00b&client_id=${client.clientId}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(token.status, 400);
    assert.equal(token.body.error, 'invalid_request');
    assert.match(token.body.error_description, /body\.code/);
    // The signed upload URL.
    const upload = await app.request('PUT', '/uploads/a%00b?expires=1&signature=x', {
      raw: 'bytes',
      headers: { 'content-type': 'text/plain' },
    });
    assertRefused(upload, 'path.fileKey', 'upload path');
    assert.equal(await dumpData(app), before);
  });

  it('gets no NUL through a header: Node refuses it before any route, and stores nothing', async () => {
    const before = await dumpData(app);
    const { port } = new URL(app.url);
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    const body = JSON.stringify({ fields: [{ id: nameField.id, value: 'Header' }] });
    socket.end(
      `POST /api/v2025/forms/${form.id}/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.token}\r\nContent-Type: application/json\r\n` +
        `User-Agent: bad\u0000agent\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    await once(socket, 'close');
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.equal(await dumpData(app), before);
  });
});
