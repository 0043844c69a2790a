/**
 * The catalogue of error codes (src/errors.ts) is the one list: the OpenAPI document and
 * docs/api.md publish it, the error handler sends nothing outside it, and errors that wrap
 * another keep it as their cause, for the log only. (Every test that goes through
 * test/helpers.ts also checks that each error body it receives has a catalogued code.)
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import { API_PREFIX } from '../src/app.js';
import { transact } from '../src/db/transaction.js';
import { AppError, ConflictError, ERROR_CODES, ERRORS, statusesOf, type ErrorCode } from '../src/errors.js';
import { registerErrorHandling } from '../src/http/error-handler.js';
import { insertUser } from '../src/modules/accounts/repository.js';
import { dialectName, startTestApp, type TestApp } from './support/helpers.js';

/** The rows of the table in docs/api.md, as the catalogue says they should read. */
function docRows(): string[] {
  const escape = (s: string) => s.replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return ERROR_CODES.map((code) => {
    const spec: { message: string; note?: string } = ERRORS[code];
    const meaning = escape(spec.message) + (spec.note ? ` (${spec.note})` : '');
    return `| \`${code}\` | ${statusesOf(code).join(', ')} | ${meaning} |`;
  });
}

describe('the catalogue of error codes', () => {
  it('holds stable snake_case codes with an error status and a message each', () => {
    assert.ok(ERROR_CODES.length >= 50, `${ERROR_CODES.length} codes`);
    for (const code of ERROR_CODES) {
      assert.match(code, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, code);
      const statuses = statusesOf(code);
      assert.ok(
        statuses.length > 0 && statuses.every((s) => Number.isInteger(s) && s >= 400 && s <= 599),
        `${code}: ${statuses.join(', ')}`,
      );
      assert.equal(new Set(statuses).size, statuses.length, code);
      assert.ok(ERRORS[code].message.length > 0, code);
    }
  });

  it('is the table of docs/api.md, row for row', () => {
    const docs = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
    const rows = docs.split('\n').filter((line) => /^\| `[a-z0-9_]+` \|/.test(line));
    const expected = docRows();
    assert.deepEqual(rows, expected, `docs/api.md should list the codes of src/errors.ts as:\n${expected.join('\n')}`);
  });

  it('makes errors whose status comes from the code, unless the code lists the one asked for', () => {
    assert.equal(new AppError('upload_url_expired').statusCode, 410);
    assert.equal(new AppError('upload_url_expired').message, 'This upload URL has expired; ask for a new one');
    assert.equal(new AppError('encryption_password_required').statusCode, 401);
    assert.equal(new AppError('encryption_password_required', undefined, { status: 400 }).statusCode, 400);
    const cause = new Error('underneath');
    assert.equal(new ConflictError('duplicate', undefined, { cause }).cause, cause);
    assert.equal(Object.hasOwn(new ConflictError('duplicate'), 'cause'), false);
  });
});

describe(`the OpenAPI document (${dialectName})`, () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('publishes exactly the catalogue as the enum of ErrorBody.code', async () => {
    const doc = (await app.request('GET', `${API_PREFIX}/openapi.json`)).body;
    const code = doc.components.schemas.ErrorBody.properties.code;
    assert.equal(code.type, 'string');
    assert.deepEqual([...code.enum].sort(), [...ERROR_CODES].sort());
  });

  it('answers errors through routes whose responses declare the enum', async () => {
    const a = await app.account();
    const notFound = await a.get('/forms/2000000000');
    assert.equal(notFound.status, 404);
    assert.deepEqual(notFound.body, { status: 'error', error: 'Form not found', code: 'form_not_found' });
    const invalid = await a.get('/forms/abc');
    assert.equal(invalid.status, 400);
    assert.equal(invalid.body.code, 'validation_failed');
  });
});

describe(`database constraint errors (${dialectName})`, () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it("become duplicate and invalid_reference with the driver's error as their cause", async () => {
    const a = await app.account();
    const db = app.server.db.kysely;
    const user = {
      accountId: a.accountId,
      email: 'twin@example.com',
      name: 'Twin',
      passwordHash: null,
      role: 'member' as const,
    };
    await transact(db, (trx) => insertUser(trx, user, Date.now()));
    const duplicate = await transact(db, (trx) => insertUser(trx, user, Date.now())).then(
      () => assert.fail('a second user with the same email was inserted'),
      (error: unknown) => error,
    );
    assert.ok(duplicate instanceof AppError);
    assert.equal(duplicate.code, 'duplicate');
    assert.ok(duplicate.cause instanceof Error, 'the driver error is kept');
    assert.match(String((duplicate.cause as { code?: unknown }).code), /^(23505|SQLITE_CONSTRAINT_UNIQUE)$/);

    const orphan = await transact(db, (trx) =>
      insertUser(trx, { ...user, accountId: 2_000_000_000, email: 'orphan@example.com' }, Date.now()),
    ).then(
      () => assert.fail('a user of no account was inserted'),
      (error: unknown) => error,
    );
    assert.ok(orphan instanceof AppError);
    assert.equal(orphan.code, 'invalid_reference');
    assert.match(String((orphan.cause as { code?: unknown }).code), /^(23503|SQLITE_CONSTRAINT_FOREIGNKEY)$/);
  });
});

describe('the error handler', () => {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n'))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  // The real handler on a bare Fastify instance: the only way to throw what no route of the
  // service can (an uncatalogued code) and to read what it logs.
  const app = Fastify({ logger: { level: 'debug', stream: sink } });
  registerErrorHandling(app);
  app.get('/uncatalogued', async () => {
    throw new AppError('no_such_code' as ErrorCode, 'Made up');
  });
  app.get('/wrapped-4xx', async () => {
    throw new ConflictError('duplicate', undefined, {
      cause: new Error('constraint users_email_unique (x@example.com)'),
    });
  });
  app.get('/wrapped-5xx', async () => {
    throw new AppError('file_integrity_failed', undefined, { cause: new Error('tag mismatch in object abc') });
  });
  after(() => app.close());

  const logged = (text: string) => lines.filter((l) => JSON.stringify(l).includes(text));

  it('sends a code outside the catalogue as internal_error, and logs it', async () => {
    const res = await app.inject({ method: 'GET', url: '/uncatalogued' });
    assert.equal(res.statusCode, 500);
    assert.deepEqual(res.json(), { status: 'error', error: ERRORS.internal_error.message, code: 'internal_error' });
    assert.ok(
      logged('no_such_code').some((l) => l.level === 50),
      'logged as an error',
    );
  });

  it('logs the cause of a refusal at debug level and sends only the code and message', async () => {
    const res = await app.inject({ method: 'GET', url: '/wrapped-4xx' });
    assert.equal(res.statusCode, 409);
    assert.deepEqual(res.json(), { status: 'error', error: ERRORS.duplicate.message, code: 'duplicate' });
    const entries = logged('users_email_unique');
    assert.ok(entries.length > 0, 'the cause is logged');
    assert.ok(
      entries.every((l) => l.level === 20),
      'at debug level',
    );
  });

  it('logs the cause of a failure as an error and sends only the code and message', async () => {
    const res = await app.inject({ method: 'GET', url: '/wrapped-5xx' });
    assert.equal(res.statusCode, 500);
    assert.deepEqual(res.json(), {
      status: 'error',
      error: ERRORS.file_integrity_failed.message,
      code: 'file_integrity_failed',
    });
    assert.ok(
      logged('tag mismatch in object abc').some((l) => l.level === 50),
      'the cause is logged as an error',
    );
  });
});
