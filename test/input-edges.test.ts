/**
 * Inputs at the edges that an audit found mishandled: field attributes, and submission values
 * wrapped in {"value": …}, nested thousands of levels deep (a stack overflow's 500), numbers past the largest double (JSON.parse reads 1e309
 * as Infinity, which JSON.stringify then stores as null), and a copy's name cut between the two
 * halves of a surrogate pair.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  dialectName,
  dumpData,
  expectStatus,
  startTestApp,
  type TestAccount,
  type TestApp,
} from './support/helpers.js';

describe(`inputs at the edges (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let formId: number;

  before(async () => {
    app = await startTestApp();
    a = await app.account();
    formId = expectStatus(
      await a.post('/forms', { name: 'Edges', fields: [{ type: 'text', label: 'T' }] }),
      200,
      'form',
    ).id;
  });
  after(() => app.close());

  /** A raw JSON body (fetch through the app's client would parse and re-encode numbers). */
  const raw = (method: string, path: string, body: string) =>
    fetch(`${app.url}/api/v2025${path}`, {
      method,
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body,
    });

  it('refuses attributes nested too deeply with 400 invalid_field, on create and update, writing nothing', async () => {
    const deep = `${'['.repeat(6000)}${']'.repeat(6000)}`;
    const before = await dumpData(app);
    const created = await raw(
      'POST',
      `/forms/${formId}/fields`,
      `{"type":"text","label":"l","attributes":{"placeholder":${deep}}}`,
    );
    assert.equal(created.status, 400);
    const body = (await created.json()) as { code: string; details: { property: string }[] };
    assert.equal(body.code, 'invalid_field');
    assert.equal(body.details[0]!.property, 'body.attributes');
    const form = expectStatus(await a.get(`/forms/${formId}?withFields=true`), 200, 'form');
    const updated = await raw(
      'PUT',
      `/forms/${formId}/fields/${form.fields[0].id}`,
      `{"attributes":{"placeholder":${deep}}}`,
    );
    assert.equal(updated.status, 400);
    const inline = await raw(
      'POST',
      '/forms',
      `{"name":"x","fields":[{"type":"text","label":"l","attributes":{"a":${deep}}}]}`,
    );
    assert.equal(inline.status, 400);
    assert.equal(await dumpData(app), before);
  });

  it('refuses a number past the largest double (1e309) with 400, where it was stored as null', async () => {
    const before = await dumpData(app);
    for (const body of [
      '{"type":"number","label":"n","attributes":{"min":-1e309}}',
      '{"type":"number","label":"n","defaultValue":1e309}',
    ]) {
      const res = await raw('POST', `/forms/${formId}/fields`, body);
      assert.equal(res.status, 400, body);
      // The attributes are checked by their type's schema (invalid_field), the rest by the body's.
      assert.match(((await res.json()) as { code: string }).code, /^(invalid_field|validation_failed)$/);
    }
    assert.equal(await dumpData(app), before);
    const numbers = expectStatus(
      await a.post('/forms', { name: 'Numbers', fields: [{ type: 'number', label: 'N' }] }),
      200,
      'form',
    );
    const res = await raw(
      'POST',
      `/forms/${numbers.id}/submissions`,
      `{"fields":[{"id":${numbers.fields[0].id},"value":1e309}]}`,
    );
    assert.equal(res.status, 400);
  });

  it('refuses a submission value wrapped in {"value": …} thousands of levels deep with 400, not a 500', async () => {
    const form = expectStatus(
      await a.post('/forms', {
        name: 'Deep values',
        fields: [
          { type: 'text', label: 'T' },
          { type: 'file', label: 'F' },
        ],
      }),
      200,
      'form',
    );
    const deep = (inner: string) => `${'{"value":'.repeat(20000)}${inner}${'}'.repeat(20000)}`;
    for (const field of form.fields as { id: number }[]) {
      for (const inner of ['"x"', 'null']) {
        const res = await raw(
          'POST',
          `/forms/${form.id}/submissions`,
          `{"fields":[{"id":${field.id},"value":${deep(inner)}}]}`,
        );
        // A value of nothing is a submission with the field empty; anything else is refused.
        if (inner === 'null') {
          assert.equal(res.status, 200, `field ${field.id}, ${inner}`);
          continue;
        }
        assert.equal(res.status, 400, `field ${field.id}, ${inner}`);
        assert.equal(((await res.json()) as { code: string }).code, 'invalid_submission');
      }
    }
  });

  it('refuses query names nested too deeply or reaching for a prototype, as any unknown parameter', async () => {
    for (const query of ['a[b][c][d][e][f]=1', '__proto__[x]=1', 'x[constructor]=1', 'search[0][prototype]=1']) {
      const res = await a.get(`/forms?${query}`);
      assert.equal(res.status, 400, `${query}: ${res.text}`);
      assert.equal(res.body.code, 'validation_failed', query);
    }
    assert.equal((await a.get('/forms?pageSize=10')).status, 200);
  });

  it("cuts a copy's name at a character, never inside a surrogate pair", async () => {
    const name = `a${'😀'.repeat(199)}`;
    const source = expectStatus(await a.post('/forms', { name }), 200, 'form');
    const copy = expectStatus(await a.post(`/forms/${source.id}/copy`), 200, 'copy');
    assert.equal(copy.name, name, '200 characters already: the suffix does not fit');
    assert.equal(Array.from(copy.name as string).length, 200);
    const read = expectStatus(await a.get(`/forms/${copy.id}`), 200, 'read');
    assert.equal(read.name, name);
    assert.doesNotMatch(read.name, /\ufffd/);
  });
});
