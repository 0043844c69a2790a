/** The v2 portal and smart-list paths (docs/v2.md): v2025's operations in v2's manner. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { assertDeleted, assertV2Error, ok, v2, V2_TIME } from './support/v2.js';

describe(`v2 portals and smart lists (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;
  let call: ReturnType<typeof v2>;

  before(async () => {
    app = await startTestApp();
    [a, b] = await Promise.all([app.account('A'), app.account('B')]);
    call = v2(app, a.token);
  });
  after(() => app.close());

  it('creates a portal, adds a form and a user, copies, lists and deletes, in snake_case', async () => {
    const form = ok(await a.post('/forms', { name: 'In a portal' }));
    const portal = ok(await call('POST', '/portal.json', { name: 'Clients', description: 'For clients' }), 201);
    assert.equal(typeof portal.id, 'string');
    assert.match(portal.created, V2_TIME);
    const withForm = ok(await call('POST', `/portal/${portal.id}/form`, { form_id: form.id, required: '1' }), 201);
    assert.ok(JSON.stringify(withForm).includes(`"${form.id}"`));
    ok(await call('POST', `/portal/${portal.id}/user.json`, { email: 'ada@example.com', name: 'Ada' }, 'json'), 201);
    const read = ok(await a.get(`/portal/${portal.id}`));
    assert.deepEqual(
      read.forms.map((f: any) => f.formId),
      [form.id],
    );
    assert.deepEqual(
      read.users.map((u: any) => u.email),
      ['ada@example.com'],
    );
    const renamed = ok(await call('PUT', `/portal/${portal.id}`, { name: 'Customers' }));
    assert.equal(renamed.name, 'Customers');
    const copy = ok(await call('POST', `/portal/${portal.id}/copy.json`), 201);
    const list = ok(await call('GET', '/portal.json?per_page=1&page=2'));
    assert.equal(list.total, 2);
    assert.equal(list.portals.length, 1);
    assertV2Error(await v2(app, b.token)('GET', `/portal/${portal.id}`), 404);
    assertDeleted(await call('DELETE', `/portal/${portal.id}/form/${form.id}.json`), form.id);
    assertDeleted(await call('DELETE', `/portal/${copy.id}`), copy.id);
  });

  it('creates a smart list, adds options one by one and in bulk, reads, changes and deletes them', async () => {
    const list = ok(await call('POST', '/smartlist.json', { name: 'Colours' }), 201);
    const red = ok(await call('POST', `/smartlist/${list.id}/option`, { label: 'Red', value: 'red' }), 201);
    assert.equal(red.smart_list_id, list.id);
    // Form-encoded bracket notation for the list of options.
    ok(
      await call('POST', `/smartlist/${list.id}/bulkoptions.json`, {
        options: [{ label: 'Blue', value: 'blue' }, { label: 'Green' }],
      }),
    );
    const options = ok(await call('GET', `/smartlist/${list.id}/option.json?per_page=10`));
    assert.deepEqual(
      options.options.map((o: any) => o.value),
      ['red', 'blue', 'Green'],
    );
    // The same through v2025.
    assert.equal(ok(await a.get(`/smartlists/${list.id}/options`)).total, 3);
    assert.equal(
      ok(await call('PUT', `/smartlist/${list.id}/option/${red.id}`, { label: 'Crimson' })).label,
      'Crimson',
    );
    assert.equal(ok(await call('GET', `/smartlist/${list.id}/option/${red.id}.json`)).label, 'Crimson');
    assertV2Error(await v2(app, b.token)('GET', `/smartlist/${list.id}`), 404);
    assertDeleted(await call('DELETE', `/smartlist/${list.id}/option/${red.id}`), red.id);
    assertDeleted(await call('DELETE', `/smartlist/${list.id}/alloptions`), list.id);
    assert.equal(ok(await call('GET', `/smartlist/${list.id}`)).name, 'Colours');
    assert.equal(ok(await call('GET', '/smartlist')).smart_lists.length, 1);
    assertDeleted(await call('DELETE', `/smartlist/${list.id}.json`), list.id);
  });
});
