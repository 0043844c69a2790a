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

  it("takes a portal form's due date as v2 answers it (Eastern Time), or as ISO, and answers it in Eastern Time", async () => {
    const form = ok(await a.post('/forms', { name: 'Due' }));
    const portal = ok(await call('POST', '/portal', { name: 'Deadlines' }), 201);
    const path = `/portal/${portal.id}/form/${form.id}`;
    const added = ok(
      await call('POST', `/portal/${portal.id}/form`, { form_id: form.id, due_date: '2026-12-31 07:00:00' }),
      201,
    );
    assert.equal(added.due_date, '2026-12-31 07:00:00');
    const stored = async () => Date.parse(ok(await a.get(`/portal/${portal.id}`)).forms[0].dueDate);
    assert.equal(await stored(), Date.parse('2026-12-31T12:00:00Z'));
    // Read and sent back unchanged; daylight saving time; a date alone is its midnight; ISO as before.
    for (const [given, utc, shown] of [
      [added.due_date, '2026-12-31T12:00:00Z', '2026-12-31 07:00:00'],
      ['2026-07-04 18:30:00', '2026-07-04T22:30:00Z', '2026-07-04 18:30:00'],
      ['2026-07-04', '2026-07-04T04:00:00Z', '2026-07-04 00:00:00'],
      ['2026-03-01T10:00:00Z', '2026-03-01T10:00:00Z', '2026-03-01 05:00:00'],
    ]) {
      assert.equal(ok(await call('PUT', path, { due_date: given })).due_date, shown, given);
      assert.equal(await stored(), Date.parse(utc), given);
      assert.equal(ok(await call('GET', `/portal/${portal.id}`)).forms[0].due_date, shown, given);
    }
    assert.equal(ok(await call('PUT', path, { due_date: '' })).due_date, null);
    for (const bad of ['2026-02-30 07:00:00', '2026-12-31 25:00:00', 'soon', '0099-01-01'])
      assertV2Error(await call('PUT', path, { due_date: bad }), 400);
    assertDeleted(await call('DELETE', `/portal/${portal.id}`), portal.id);
  });

  it('answers times in Eastern Time, and text that looks like a time as it was written', async () => {
    const iso = '2025-01-01T00:00:00Z';
    const portal = ok(await call('POST', '/portal', { name: iso, description: iso }), 201);
    assert.deepEqual([portal.name, portal.description], [iso, iso]);
    assert.match(portal.created, V2_TIME);
    const user = ok(await call('POST', `/portal/${portal.id}/user`, { email: 'iso@example.com', name: iso }), 201);
    assert.equal(user.users[0].name, iso);
    assert.equal(user.users[0].last_sign_in, null);
    assert.match(user.users[0].created, V2_TIME);
    assertDeleted(await call('DELETE', `/portal/${portal.id}`), portal.id);

    const list = ok(await call('POST', '/smartlist', { name: iso }), 201);
    assert.equal(list.name, iso);
    const option = ok(await call('POST', `/smartlist/${list.id}/option`, { label: iso, value: iso }), 201);
    for (const read of [
      option,
      ok(await call('GET', `/smartlist/${list.id}/option/${option.id}`)),
      ok(await call('GET', `/smartlist/${list.id}/option`)).options[0],
    ]) {
      assert.deepEqual([read.label, read.value], [iso, iso]);
      assert.match(read.created, V2_TIME);
      assert.match(read.updated, V2_TIME);
    }
    assert.match(ok(await call('GET', '/smartlist')).smart_lists[0].updated, V2_TIME);
    // Written back as read, the option is unchanged.
    ok(await call('PUT', `/smartlist/${list.id}/option/${option.id}`, { label: option.label, value: option.value }));
    const stored = ok(await a.get(`/smartlists/${list.id}/options/${option.id}`));
    assert.deepEqual([stored.label, stored.value], [iso, iso]);
    assertDeleted(await call('DELETE', `/smartlist/${list.id}`), list.id);
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
