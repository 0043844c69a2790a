/**
 * The request log never holds a query string's values: search words (of encrypted forms too)
 * and the signature of upload URLs stay out of it, on every kind of route. Real server
 * processes at the most verbose log level, their whole output read back.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { queryRedaction, redactText, urlForLog } from '../src/http/logging.js';
import { dialectName } from './support/helpers.js';
import { ProcessSet } from './support/processes.js';
import { authorizeUrl, Browser, pkce, readForm, REDIRECT, type Client } from './support/oauth-flow.js';

describe('query redaction', () => {
  it('keeps the path and the names of the parameters', () => {
    assert.equal(
      urlForLog('/api/v2025/forms/1/submissions?keyword=x&search[0][value]=y&flag&=z&'),
      '/api/v2025/forms/1/submissions?keyword=&search[0][value]=&flag=&=',
    );
    assert.equal(urlForLog('/uploads/fk_1?expires=1&signature=abc'), '/uploads/fk_1?expires=&signature=');
    assert.equal(urlForLog('/healthz'), '/healthz');
  });

  it("also redacts URLs quoted in messages and errors, as some of Fastify's warnings quote them", () => {
    let written = '';
    const sink = new Writable({ write: (chunk, _enc, done) => ((written += chunk.toString()), done()) });
    const log = pino({ level: 'trace', ...queryRedaction }, sink);
    log.warn(
      'Reply was already sent, did you forget to "return reply" in the "/api/v2025/submissions?search=hush1" (GET) route?',
    );
    log.error({ err: new Error('failed at /forms/1/submissions?keyword=hush2&x=hush3') }, 'request failed');
    log.info('what? nothing to redact here');
    for (const word of ['hush1', 'hush2', 'hush3']) assert.ok(!written.includes(word), written);
    assert.ok(written.includes('in the \\"/api/v2025/submissions?search=\\" (GET) route?'), written);
    assert.match(written, /\/forms\/1\/submissions\?keyword=&x=/);
    assert.match(written, /what\? nothing to redact here/);
  });
});

describe('credential redaction', () => {
  it('takes the user name and password out of URLs in messages and errors (SMTP_URL, DATABASE_URL)', () => {
    let written = '';
    const sink = new Writable({ write: (chunk, _enc, done) => ((written += chunk.toString()), done()) });
    const log = pino({ level: 'trace', ...queryRedaction }, sink);
    log.warn('could not reach smtps://mailer:hush4@mail.example.com:465');
    log.error({ err: new Error('connect to postgres://app:hush5@db:5432/formwork failed') }, 'no database');
    for (const word of ['hush4', 'mailer', 'hush5']) assert.ok(!written.includes(word), written);
    assert.ok(written.includes('smtps://[redacted]@mail.example.com:465'), written);
    assert.ok(written.includes('postgres://[redacted]@db:5432/formwork'), written);
    assert.equal(
      redactText('see https://example.com/a@b and mailto:x@y'),
      'see https://example.com/a@b and mailto:x@y',
    );
  });
});

describe(`request logs keep query names and drop their values (${dialectName})`, () => {
  const processes = new ProcessSet('log');
  /** Words that go into URLs and must never be logged. */
  const secrets: string[] = [];
  const secret = (what: string) => {
    const word = `${what}${randomBytes(6).toString('hex')}`;
    secrets.push(word);
    return word;
  };

  const serve = (extra: Record<string, string> = {}) =>
    processes.serve({ LOG_LEVEL: 'trace', ...extra }, ['--no-worker']);

  before(() => processes.open());
  // SIGTERM: a process writes its last lines as it stops.
  after(() => processes.close('SIGTERM'));

  it('logs API, legacy, OAuth, upload, not-found and bad-URL requests, and 5xx errors, without query values', async () => {
    const token = await processes.createAccount('Logs', 'logs@example.com', ['--password', 'long enough password']);
    const server = await serve();
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.text()) as string };
    };
    const json = async (method: string, path: string, body?: unknown) => {
      const res = await api(method, path, body);
      assert.equal(res.status, 200, `${method} ${path}: ${res.body.slice(0, 300)}`);
      return JSON.parse(res.body);
    };

    // An encrypted form with a submission, searched by keyword and by field.
    const form = await json('POST', '/api/v2025/forms', {
      name: 'Sealed',
      isEncrypted: true,
      encryptionPassword: 'long enough password',
      fields: [
        { type: 'text', label: 'Note' },
        { type: 'file', label: 'File' },
      ],
    });
    const [note, file] = form.fields;
    const keyword = secret('keyword');
    const value = secret('value');
    const cross = secret('cross');
    const sealed = { 'x-formwork-encryption-password': 'long enough password' };
    for (const path of [
      `/api/v2025/forms/${form.id}/submissions?keyword=${keyword}&search[0][fieldId]=${note.id}&search[0][value]=${value}`,
      `/api/v2025/forms/${form.id}/submissions/export?format=csv&keyword=${keyword}`,
      `/api/v2/forms/${form.id}/submissions.json?keyword=${keyword}`,
    ]) {
      const res = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}`, ...sealed } });
      assert.equal(res.status, 200, `${path}: ${await res.text()}`);
      await res.arrayBuffer().catch(() => undefined);
    }
    await json('GET', `/api/v2025/submissions?search=${cross}`);

    // An upload URL, used: its signature is in the query.
    const { uploads } = await json('POST', `/api/v2025/forms/${form.id}/fields/${file.id}/upload-urls`, {
      filenames: ['notes.txt'],
    });
    const uploadUrl = new URL(uploads[0].uploadUrl);
    const signature = uploadUrl.searchParams.get('signature')!;
    assert.ok(signature.length > 20);
    secrets.push(signature);
    const put = await fetch(uploadUrl, { method: 'PUT', body: 'file bytes' });
    assert.equal(put.status, 200, await put.text());

    // The OAuth pages: an authorization request with its state and challenge, then sign-in.
    const client = (await json('POST', '/api/v2025/oauth-clients', {
      name: 'Logger',
      redirectUris: [REDIRECT],
    })) as Client;
    const state = secret('state');
    const browser = new Browser(server.url);
    const page = await browser.fetch(
      authorizeUrl(client, { state, code_challenge: pkce().challenge, code_challenge_method: 'S256' }),
    );
    assert.equal(page.status, 200, page.text.slice(0, 300));
    const form2 = readForm(page.text);
    const signedIn = await browser.fetch(form2.action, {
      method: 'POST',
      form: { ...form2.fields, email: 'logs@example.com', password: 'long enough password' },
    });
    assert.equal(signedIn.status, 303);
    assert.equal(
      (await browser.fetch(signedIn.location!)).status,
      200,
      'the consent page, at a URL that holds the state',
    );

    // Routes that do not exist, a path that is not UTF-8, a refused query.
    const missing = secret('missing');
    assert.equal((await fetch(`${server.url}/nowhere?token=${missing}`)).status, 404);
    assert.equal((await api('GET', `/api/v2025/nothing/here?q=${missing}`)).status, 404);
    assert.equal((await fetch(`${server.url}/api/v2025/forms/%FF?q=${missing}`)).status, 400);
    assert.equal((await api('GET', `/api/v2025/forms?search=${missing}%00`)).status, 400);

    // A server whose rate limiter is away answers 503 and logs the error.
    const broken = await serve({ REDIS_URL: 'redis://127.0.0.1:1' });
    const failing = secret('failing');
    const res = await fetch(`${broken.url}/api/v2025/forms/${form.id}/submissions?keyword=${failing}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 503, await res.text());

    // Every line written, by both servers, until they have stopped.
    await processes.stopAll('SIGTERM');
    const output = processes.output();
    for (const word of secrets)
      assert.ok(
        !output.includes(word),
        `${word} is in the log:\n${output
          .split('\n')
          .filter((l) => l.includes(word))
          .join('\n')}`,
      );

    // What the log does say: each request, with its parameter names.
    const urls = output
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { req?: { url: string }; msg: string; err?: unknown })
      .filter((l) => l.req)
      .map((l) => l.req!.url);
    for (const expected of [
      `/api/v2025/forms/${form.id}/submissions?keyword=&search[0][fieldId]=&search[0][value]=`,
      `/api/v2025/forms/${form.id}/submissions?keyword=`,
      `/api/v2025/submissions?search=`,
      `/uploads/${uploadUrl.pathname.split('/').pop()}?expires=&signature=`,
      '/nowhere?token=',
      '/api/v2025/forms/%FF?q=',
    ]) {
      assert.ok(urls.includes(expected), `${expected} is not among the logged URLs:\n${urls.join('\n')}`);
    }
    assert.ok(
      urls.some((u) => u.startsWith('/oauth2/authorize?') && u.includes('state=&')),
      urls.join('\n'),
    );
    assert.ok(
      output.split('\n').some((l) => l.includes('"request failed"') && l.includes('rate_limiter_unavailable')),
      'the 503 is logged with its error',
    );
  });
});
