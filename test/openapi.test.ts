/**
 * The OpenAPI document as client generators read it: every operation has an operationId
 * (their method names), unique and in camelCase. Redocly's rules run on the same document in
 * `npm run lint:openapi`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { API_PREFIX } from '../src/app.js';
import { compileEverySerializer } from '../src/http/serialization.js';
import { compileEveryValidator } from '../src/http/validation.js';
import { dialectName, startTestApp, type TestApp } from './support/helpers.js';

const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

describe(`OpenAPI document (${dialectName})`, () => {
  let app: TestApp;
  let operations: { key: string; operationId: unknown }[] = [];
  let doc: { paths: Record<string, Record<string, Record<string, any>>> };

  before(async () => {
    app = await startTestApp();
    const res = await app.request('GET', `${API_PREFIX}/openapi.json`);
    assert.equal(res.status, 200);
    doc = res.body;
    operations = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([method]) => METHODS.has(method))
        .map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, operationId: op.operationId })),
    );
  });
  after(() => app.close());

  it('gives every operation an operationId in camelCase', () => {
    assert.ok(operations.length >= 30, `only ${operations.length} operations`);
    const bad = operations.filter(
      (op) => typeof op.operationId !== 'string' || !/^[a-z][a-zA-Z0-9]*$/.test(op.operationId),
    );
    assert.deepEqual(
      bad.map((op) => `${op.key}: ${JSON.stringify(op.operationId)}`),
      [],
      'give each of these an operationId (camelCase, verb first: listForms, getForm ...) in its route schema',
    );
  });

  it('declares the answers that are not JSON under the types they are sent as', () => {
    const types = (path: string, method = 'get') => Object.keys(doc.paths[path]![method]!.responses['200'].content);
    assert.deepEqual(types('/forms/{formId}/submissions/export'), ['text/csv', 'application/x-ndjson']);
    assert.deepEqual(types('/submissions/{submissionId}/upload'), ['application/octet-stream']);
    // No answer of bytes or text is declared as a JSON string.
    const strings = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([method, op]) => METHODS.has(method) && op.responses?.['200']?.content?.['application/json'])
        .filter(([, op]) => op.responses['200'].content['application/json'].schema?.type === 'string')
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    assert.deepEqual(strings, []);
  });

  it("says each operation's access rule once, GETs too (whose HEAD route shares their schema)", () => {
    const twice = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([method, op]) => METHODS.has(method) && typeof op.description === 'string')
        .filter(([, op]) => (op.description as string).split('Needs the ').length > 2)
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    assert.deepEqual(twice, []);
    const list = doc.paths['/forms/{formId}/submissions']!.get!.description as string;
    assert.match(list, /Needs the `submissions:read` scope/);
  });

  it('marks no query parameter that has a default as required', () => {
    const required = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([method]) => METHODS.has(method))
        .flatMap(([method, op]) =>
          ((op.parameters ?? []) as { in: string; name: string; required?: boolean; schema?: { default?: unknown } }[])
            .filter((p) => p.in === 'query' && p.required === true && p.schema?.default !== undefined)
            .map((p) => `${method.toUpperCase()} ${path} ${p.name}`),
        ),
    );
    assert.deepEqual(required, []);
    const read = doc.paths['/forms/{formId}']!.get!.parameters as { name: string; required?: boolean }[];
    assert.equal(read.find((p) => p.name === 'withFields')?.required, false);
  });

  it('gives no two operations the same operationId', () => {
    const byId = new Map<unknown, string[]>();
    for (const op of operations) byId.set(op.operationId, [...(byId.get(op.operationId) ?? []), op.key]);
    const shared = [...byId]
      .filter(([, keys]) => keys.length > 1)
      .map(([id, keys]) => `${String(id)}: ${keys.join(', ')}`);
    assert.deepEqual(shared, []);
  });

  it('has a serializer for every response schema of every route, though each is built on first use', () => {
    // Built lazily (src/http/serialization.ts): a schema fast-json-stringify refuses would
    // otherwise only show on the first response that needs it, as a 500.
    const built = compileEverySerializer();
    assert.ok(
      built >= operations.length,
      `only ${built} response schemas were waiting for ${operations.length} operations`,
    );
    assert.equal(compileEverySerializer(), 0, 'nothing is left to build');
  });

  it('has a validator for every request part of every route, though each is compiled on first use', () => {
    // Compiled lazily too (src/http/validation.ts): a schema ajv refuses would otherwise only
    // show on the first request that needs it, as a 500.
    const compiled = compileEveryValidator();
    assert.ok(
      compiled >= operations.length,
      `only ${compiled} request schemas were waiting for ${operations.length} operations`,
    );
    assert.equal(compileEveryValidator(), 0, 'nothing is left to compile');
  });
});
