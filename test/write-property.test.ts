/**
 * Random text in every string of the write routes' bodies (forms, fields, folders, users,
 * OAuth clients, upload URLs): NUL, lone surrogates, look-alikes that are fine and strings
 * of 100,000 characters. Whatever is sent, the answer is 200, 400, or 413 for a body over the
 * limit; never 500. Text with NUL or a lone surrogate is always 400 invalid_characters naming
 * where it is; a refused request changes no row; and after a 200 every string reads back as
 * sent (trimmed where the route says it trims), never with U+FFFD in place of what was sent.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { dialectName, dumpData, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { brokenPaths, hostileString, wireSize } from './support/hostile-text.js';
import { ok } from './support/submission-fixtures.js';

const RUNS = Math.ceil(Number(process.env.FORMWORK_PROPERTY_RUNS ?? 150) / 3);

/** Every row of every table. */
const S = hostileString;
const NEW_EMAIL = '(a new email)';
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
/** A record without the properties left undefined (JSON would drop them anyway). */
const defined = (o: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

interface WriteRoute {
  name: string;
  method: 'POST' | 'PUT';
  path: () => string;
  body: fc.Arbitrary<Record<string, unknown>>;
  /** Makes a generated body ready to send, each time it is sent (shrinking sends values again). */
  prepare?(body: Record<string, unknown>): Record<string, unknown>;
  /** After a 200: reads the record back and checks that every string sent is stored as sent. */
  kept(sent: any, res: Reply): Promise<void>;
}

describe(`random text in the write routes (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let form: any;
  let field: any;
  let fileField: any;
  let folder: any;
  let user: any;
  let emails = 0;
  const routes: WriteRoute[] = [];

  before(async () => {
    app = await startTestApp();
    a = await app.account('Property');
    form = await ok(
      a.post('/forms', {
        name: 'Target',
        fields: [
          { type: 'text', label: 'Text' },
          { type: 'file', label: 'Files', attributes: { maxFiles: 3 } },
        ],
      }),
    );
    [field, fileField] = form.fields;
    folder = await ok(a.post('/folders', { name: 'Target' }));
    user = await ok(a.post('/users', { email: 'target@example.com', name: 'Target', role: 'member' }));

    const read = async (path: string) => ok(a.get(path), `read ${path}`);
    routes.push(
      {
        name: 'POST /forms',
        method: 'POST',
        path: () => '/forms',
        body: fc
          .record({
            name: S,
            submitButtonTitle: maybe(S),
            settings: maybe(fc.record({ description: maybe(S), successMessage: maybe(S) }).map(defined)),
            fields: maybe(
              fc.array(fc.record({ type: fc.constant('text'), label: S, description: maybe(S) }).map(defined), {
                maxLength: 2,
              }),
            ),
          })
          .map(defined),
        async kept(sent, res) {
          const stored = await read(`/forms/${res.body.id}?withFields=true`);
          assert.equal(stored.name, sent.name);
          if (sent.submitButtonTitle !== undefined) assert.equal(stored.submitButtonTitle, sent.submitButtonTitle);
          for (const k of ['description', 'successMessage'])
            if (sent.settings?.[k] !== undefined) assert.equal(stored.settings[k], sent.settings[k]);
          (sent.fields ?? []).forEach((f: any, i: number) => {
            assert.equal(stored.fields[i].label, f.label);
            if (f.description !== undefined) assert.equal(stored.fields[i].description, f.description);
          });
        },
      },
      {
        name: 'PUT /forms/{formId}',
        method: 'PUT',
        path: () => `/forms/${form.id}`,
        body: fc.record({ name: maybe(S), submitButtonTitle: maybe(S) }).map(defined),
        async kept(sent) {
          const stored = await read(`/forms/${form.id}`);
          for (const k of ['name', 'submitButtonTitle']) if (sent[k] !== undefined) assert.equal(stored[k], sent[k]);
        },
      },
      {
        name: 'POST /forms/{formId}/fields',
        method: 'POST',
        path: () => `/forms/${form.id}/fields`,
        body: fc.oneof(
          fc
            .record({
              type: fc.constant('text'),
              label: S,
              description: maybe(S),
              defaultValue: maybe(S),
              attributes: maybe(fc.record({ placeholder: S })),
            })
            .map(defined),
          fc.record({
            type: fc.constant('select'),
            label: S,
            options: fc.array(fc.record({ label: S, value: S }), { minLength: 1, maxLength: 3 }),
          }),
        ),
        async kept(sent, res) {
          const stored = await read(`/forms/${form.id}/fields/${res.body.id}`);
          assert.equal(stored.label, sent.label);
          if (sent.description !== undefined) assert.equal(stored.description, sent.description);
          if (sent.defaultValue !== undefined) assert.equal(stored.defaultValue, sent.defaultValue);
          if (sent.attributes) assert.equal(stored.attributes.placeholder, sent.attributes.placeholder);
          if (sent.options) assert.deepEqual(stored.options, JSON.parse(JSON.stringify(sent.options)));
        },
      },
      {
        name: 'PUT /forms/{formId}/fields/{fieldId}',
        method: 'PUT',
        path: () => `/forms/${form.id}/fields/${field.id}`,
        body: fc.record({ label: maybe(S), description: maybe(S) }).map(defined),
        async kept(sent) {
          const stored = await read(`/forms/${form.id}/fields/${field.id}`);
          for (const k of ['label', 'description']) if (sent[k] !== undefined) assert.equal(stored[k], sent[k]);
        },
      },
      {
        name: 'POST /folders',
        method: 'POST',
        path: () => '/folders',
        body: fc.record({ name: S }),
        async kept(sent, res) {
          assert.equal((await read(`/folders/${res.body.id}`)).name, sent.name);
        },
      },
      {
        name: 'PUT /folders/{folderId}',
        method: 'PUT',
        path: () => `/folders/${folder.id}`,
        body: fc.record({ name: S }),
        async kept(sent) {
          assert.equal((await read(`/folders/${folder.id}`)).name, sent.name);
        },
      },
      {
        name: 'POST /users',
        method: 'POST',
        path: () => '/users',
        // Emails are unique: a new one at each request, or hostile text.
        body: fc
          .record({
            email: fc.oneof({ weight: 4, arbitrary: fc.constant(NEW_EMAIL) }, { weight: 1, arbitrary: S }),
            name: S,
            role: fc.constant('member'),
            password: maybe(S),
          })
          .map(defined),
        prepare: (body) => (body.email === NEW_EMAIL ? { ...body, email: `user${++emails}@example.com` } : body),
        async kept(sent, res) {
          const stored = (await read('/users')).users.find((u: any) => u.id === res.body.id);
          assert.equal(stored.name, sent.name.trim(), 'names are trimmed, and nothing else changes');
          assert.equal(stored.email, sent.email.trim().toLowerCase());
        },
      },
      {
        name: 'PUT /users/{userId}',
        method: 'PUT',
        path: () => `/users/${user.id}`,
        body: fc.record({ name: maybe(S), password: maybe(S) }).map(defined),
        async kept(sent) {
          const stored = (await read('/users')).users.find((u: any) => u.id === user.id);
          if (sent.name !== undefined) assert.equal(stored.name, sent.name.trim());
        },
      },
      {
        name: 'POST /oauth-clients',
        method: 'POST',
        path: () => '/oauth-clients',
        body: fc.record({
          name: S,
          redirectUris: fc.array(
            fc.oneof(
              // Redirect URIs are taken only in the form the URL parser writes (docs/access.md): most of these are.
              S.map((s) => new URL(`https://example.com/${s}`).href),
              S,
            ),
            { minLength: 1, maxLength: 2 },
          ),
        }),
        async kept(sent, res) {
          const stored = (await read('/oauth-clients')).clients.find((c: any) => c.id === res.body.id);
          assert.equal(stored.name, sent.name.trim());
          assert.deepEqual(stored.redirectUris, [...sent.redirectUris]);
        },
      },
      {
        name: 'POST /forms/{formId}/fields/{fieldId}/upload-urls',
        method: 'POST',
        path: () => `/forms/${form.id}/fields/${fileField.id}/upload-urls`,
        body: fc.record({
          filenames: fc.array(
            fc.oneof(
              S,
              S.map((s) => `${s}.txt`),
            ),
            { minLength: 1, maxLength: 3 },
          ),
        }),
        async kept(sent, res) {
          assert.deepEqual(
            res.body.uploads.map((u: any) => u.filename),
            [...sent.filenames],
          );
        },
      },
    );
  });
  after(() => app.close());

  /** A copy of value with a NUL added to its first string (depth first). */
  function withNul<T>(value: T): T {
    let done = false;
    const visit = (v: unknown): unknown => {
      if (done) return v;
      if (typeof v === 'string') {
        done = true;
        return `${v}\u0000`;
      }
      if (Array.isArray(v)) return v.map(visit);
      if (v !== null && typeof v === 'object')
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, visit(x)]));
      return v;
    };
    const changed = visit(value) as T;
    assert.ok(done, `no text to put a NUL in: ${JSON.stringify(value)}`);
    return changed;
  }

  const ROUTE_NAMES = [
    'POST /forms',
    'PUT /forms/{formId}',
    'POST /forms/{formId}/fields',
    'PUT /forms/{formId}/fields/{fieldId}',
    'POST /folders',
    'PUT /folders/{folderId}',
    'POST /users',
    'PUT /users/{userId}',
    'POST /oauth-clients',
    'POST /forms/{formId}/fields/{fieldId}/upload-urls',
  ];

  for (const name of ROUTE_NAMES) {
    it(`${name}: 200, 400 or 413, never 500; NUL and lone surrogates are 400 invalid_characters; a refusal writes nothing; a 200 keeps the text`, async (t) => {
      const route = routes.find((r) => r.name === name)!;
      const seen: Record<string, number> = {};
      await fc.assert(
        fc.asyncProperty(route.body, async (generated) => {
          const sent = route.prepare?.(generated) ?? generated;
          const before = await dumpData(app);
          const res = await a[route.method === 'POST' ? 'post' : 'put'](route.path(), sent);
          const what = `${res.status} ${res.text.slice(0, 300)} for ${JSON.stringify(sent).slice(0, 300)}`;
          const broken = brokenPaths(sent);
          const code = res.status === 200 ? 'ok' : res.body.code;
          seen[code] = (seen[code] ?? 0) + 1;
          if (wireSize(sent) > app.config.bodyLimit) {
            assert.equal(res.status, 413, what);
          } else if (broken.length > 0) {
            assert.equal(res.status, 400, what);
            assert.equal(res.body.code, 'invalid_characters', what);
            assert.ok(res.body.details.length > 0, what);
            for (const d of res.body.details)
              assert.ok(broken.includes(d.property), `${d.property} is not one of ${JSON.stringify(broken)}: ${what}`);
          } else {
            assert.ok(res.status === 200 || res.status === 400, what);
          }
          if (res.status !== 200) {
            assert.equal(res.body.status, 'error', what);
            assert.equal(await dumpData(app), before, `a refusal changed the database: ${what}`);
            return;
          }
          await route.kept(sent, res);
        }),
        // One body with a NUL in its first text runs whatever the draw, so that every run of
        // the property sends one such body (the draw alone leaves it to chance).
        { numRuns: RUNS, examples: [[withNul(fc.sample(route.body, { numRuns: 1, seed: 42 })[0])]] },
      );
      t.diagnostic(`outcomes: ${JSON.stringify(seen)}`);
      assert.ok(
        (seen.invalid_characters ?? 0) > 0,
        `no body with NUL or a lone surrogate was tried: ${JSON.stringify(seen)}`,
      );
      assert.ok((seen.ok ?? 0) > 0, `no body was taken: ${JSON.stringify(seen)}`);
    });
  }
});
