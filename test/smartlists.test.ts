import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { PAGE_FRESHNESS_MS } from '../src/modules/hosted/service.js';
import { drainBytes } from '../src/modules/images/part.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker } from '../src/jobs/worker.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';

// A real 1×1 PNG.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);
const GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const JPEG_START = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01]);
const WEBP_START = Buffer.concat([Buffer.from('RIFF'), Buffer.from([0x1a, 0, 0, 0]), Buffer.from('WEBPVP8 ')]);

function expectError(res: Reply, status: number, code: string): void {
  assert.equal(res.status, status, res.text.slice(0, 500));
  assert.equal(res.body.status, 'error');
  assert.equal(res.body.code, code, res.text.slice(0, 500));
}

describe(`smart lists (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;

  before(async () => {
    app = await startTestApp({ OPTION_IMAGE_MAX_BYTES: '4096' });
    a = await app.account();
    b = await app.account();
  });
  after(() => app.close());

  async function newList(acc: TestAccount, name: string, useImages?: boolean): Promise<any> {
    const res = await acc.post('/smartlists', useImages === undefined ? { name } : { name, useImages });
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  it('creates, reads, renames and deletes a list', async () => {
    const list = await newList(a, 'Countries');
    assert.equal(list.name, 'Countries');
    assert.equal(list.useImages, false);
    assert.equal(list.optionsCount, 0);
    assert.match(list.created, /Z$/);

    const read = await a.get(`/smartlists/${list.id}`);
    assert.equal(read.status, 200);
    assert.deepEqual(read.body, list);

    const renamed = await a.put(`/smartlists/${list.id}`, { name: 'Nations', useImages: true });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.body.name, 'Nations');
    assert.equal(renamed.body.useImages, true);
    assert.equal((await a.get(`/smartlists/${list.id}`)).body.name, 'Nations');

    expectError(await a.put(`/smartlists/${list.id}`, {}), 400, 'validation_failed');
    expectError(await a.post('/smartlists', { name: '' }), 400, 'validation_failed');
    expectError(await a.post('/smartlists', { name: 'x', values: [] }), 400, 'validation_failed');

    const gone = await a.delete(`/smartlists/${list.id}`);
    assert.equal(gone.status, 200, gone.text);
    assert.deepEqual(gone.body, { id: list.id });
    expectError(await a.get(`/smartlists/${list.id}`), 404, 'smart_list_not_found');
    expectError(await a.delete(`/smartlists/${list.id}`), 404, 'smart_list_not_found');
    expectError(await a.put(`/smartlists/${list.id}`, { name: 'Back' }), 404, 'smart_list_not_found');
  });

  it('pages and searches lists by name, and shows an account only its own', async () => {
    const acc = await app.account();
    for (const name of ['Alpha fruits', 'beta FRUITS', 'Gamma', 'delta fruits', 'Epsilon']) await newList(acc, name);
    await newList(b, 'Fruits of B');
    const all = await acc.get('/smartlists');
    assert.equal(all.status, 200);
    assert.deepEqual(
      all.body.smartLists.map((l: any) => l.name),
      ['Alpha fruits', 'beta FRUITS', 'delta fruits', 'Epsilon', 'Gamma'],
    );
    assert.deepEqual([all.body.total, all.body.pages, all.body.pageNumber, all.body.pageSize], [5, 1, 1, 25]);

    const found = await acc.get('/smartlists?query=fruit&pageSize=2&pageNumber=2');
    assert.equal(found.status, 200);
    assert.deepEqual(
      found.body.smartLists.map((l: any) => l.name),
      ['delta fruits'],
    );
    assert.deepEqual([found.body.total, found.body.pages, found.body.pageNumber, found.body.pageSize], [3, 2, 2, 2]);
    expectError(await acc.get('/smartlists?pageSize=101'), 400, 'validation_failed');
    expectError(await acc.get('/smartlists?pageNumber=0'), 400, 'validation_failed');
  });

  it('keeps options with labels apart from values, in order, paged and searched by label', async () => {
    const list = await newList(a, 'Sizes');
    const small = await a.post(`/smartlists/${list.id}/options`, { label: 'Small', value: 's' });
    assert.equal(small.status, 201, small.text);
    assert.deepEqual(
      { label: small.body.label, value: small.body.value, order: small.body.order, list: small.body.smartListId },
      { label: 'Small', value: 's', order: 0, list: list.id },
    );
    const large = (await a.post(`/smartlists/${list.id}/options`, { label: 'Large', value: 'l' })).body;
    assert.equal(large.order, 1, 'appended after the last');
    const medium = await a.post(`/smartlists/${list.id}/options`, { label: 'Medium' });
    assert.equal(medium.status, 201);
    assert.equal(medium.body.value, 'Medium', 'the value defaults to the label');
    // Between small and large.
    const moved = await a.put(`/smartlists/${list.id}/options/${medium.body.id}`, { value: 'm', order: 0 });
    assert.equal(moved.status, 200, moved.text);
    assert.deepEqual([moved.body.label, moved.body.value, moved.body.order], ['Medium', 'm', 0]);

    const listed = await a.get(`/smartlists/${list.id}/options`);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.options.map((o: any) => o.value),
      ['s', 'm', 'l'],
    );
    assert.equal(listed.body.total, 3);
    const paged = await a.get(`/smartlists/${list.id}/options?pageSize=2&pageNumber=2`);
    assert.deepEqual(
      paged.body.options.map((o: any) => o.value),
      ['l'],
    );
    assert.equal(paged.body.pages, 2);
    const searched = await a.get(`/smartlists/${list.id}/options?query=ALL`);
    assert.deepEqual(
      searched.body.options.map((o: any) => o.label),
      ['Small'],
      'query matches labels, not values',
    );
    assert.equal((await a.get(`/smartlists/${list.id}/options?query=l`)).body.total, 2);
    assert.equal((await a.get(`/smartlists/${list.id}`)).body.optionsCount, 3);

    const one = await a.get(`/smartlists/${list.id}/options/${large.id}`);
    assert.equal(one.status, 200);
    assert.equal(one.body.label, 'Large');

    // A value is unique within its list; another list may hold it.
    expectError(await a.post(`/smartlists/${list.id}/options`, { label: 'Tiny', value: 's' }), 400, 'invalid_options');
    expectError(await a.put(`/smartlists/${list.id}/options/${large.id}`, { value: 's' }), 400, 'invalid_options');
    const other = await newList(a, 'Other sizes');
    assert.equal((await a.post(`/smartlists/${other.id}/options`, { label: 'Small', value: 's' })).status, 201);
    // An option is addressed through its own list only.
    expectError(await a.get(`/smartlists/${other.id}/options/${large.id}`), 404, 'smart_list_option_not_found');
    expectError(await a.post(`/smartlists/${list.id}/options`, { value: 'x' }), 400, 'validation_failed');

    const removed = await a.delete(`/smartlists/${list.id}/options/${small.body.id}`);
    assert.equal(removed.status, 200);
    assert.deepEqual(removed.body, { id: small.body.id });
    expectError(await a.get(`/smartlists/${list.id}/options/${small.body.id}`), 404, 'smart_list_option_not_found');
    expectError(await a.delete(`/smartlists/${list.id}/options/${small.body.id}`), 404, 'smart_list_option_not_found');
    expectError(
      await a.put(`/smartlists/${list.id}/options/${small.body.id}`, { label: 'x' }),
      404,
      'smart_list_option_not_found',
    );
    expectError(await a.get('/smartlists/2147483647/options'), 404, 'smart_list_not_found');
  });

  it('adds thousands of options in one call, after the last, and removes them all leaving the list', async () => {
    const list = await newList(a, 'Many');
    await a.post(`/smartlists/${list.id}/options`, { label: 'First', value: 'first' });
    const options = Array.from({ length: 5000 }, (_, i) => ({ label: `Option ${i}`, value: `v${i}` }));
    const bulk = await a.post(`/smartlists/${list.id}/bulkoptions`, { options });
    assert.equal(bulk.status, 200, bulk.text.slice(0, 500));
    assert.deepEqual(bulk.body, { id: list.id, added: 5000 });
    assert.equal((await a.get(`/smartlists/${list.id}`)).body.optionsCount, 5001);
    const firstPage = await a.get(`/smartlists/${list.id}/options?pageSize=3`);
    assert.deepEqual(
      firstPage.body.options.map((o: any) => o.value),
      ['first', 'v0', 'v1'],
    );
    const lastPage = await a.get(`/smartlists/${list.id}/options?pageSize=100&pageNumber=51`);
    assert.deepEqual(
      lastPage.body.options.map((o: any) => o.value),
      ['v4999'],
    );

    const cleared = await a.delete(`/smartlists/${list.id}/alloptions`);
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual(cleared.body, { id: list.id, deleted: 5001 });
    const after = await a.get(`/smartlists/${list.id}`);
    assert.equal(after.status, 200, 'the list stays');
    assert.equal(after.body.optionsCount, 0);
    assert.equal((await a.get(`/smartlists/${list.id}/options`)).body.total, 0);
    expectError(await a.delete('/smartlists/2147483647/alloptions'), 404, 'smart_list_not_found');
  });

  it('writes nothing of a bulk call with bad entries, and names each by its index', async () => {
    const list = await newList(a, 'Strict');
    await a.post(`/smartlists/${list.id}/options`, { label: 'Taken', value: 'taken' });
    const options = [
      { label: 'One', value: 'one' },
      { label: 'Again', value: 'taken' },
      { label: 'Two', value: 'two' },
      { label: 'One more', value: 'one' },
      { label: 'two' },
    ];
    const res = await a.post(`/smartlists/${list.id}/bulkoptions`, { options });
    expectError(res, 400, 'invalid_options');
    assert.deepEqual(
      res.body.details.map((d: any) => d.property),
      ['body.options[1].value', 'body.options[3].value', 'body.options[4].label'],
    );
    assert.match(res.body.details[1].message, /options\[0\]/);
    assert.equal((await a.get(`/smartlists/${list.id}`)).body.optionsCount, 1, 'nothing written');

    // An entry that fails the schema is named by its index too.
    const bad = await a.post(`/smartlists/${list.id}/bulkoptions`, {
      options: [{ label: 'Fine' }, { label: '' }],
    });
    expectError(bad, 400, 'validation_failed');
    assert.ok(
      bad.body.details.some((d: any) => d.property.startsWith('body.options[1]')),
      bad.text,
    );
    expectError(await a.post(`/smartlists/${list.id}/bulkoptions`, { options: [] }), 400, 'validation_failed');
    assert.equal((await a.get(`/smartlists/${list.id}`)).body.optionsCount, 1);
  });

  it("answers 404 for another account's lists and options, on every route", async () => {
    const list = await newList(a, `Private ${randomBytes(4).toString('hex')}`);
    const option = (await a.post(`/smartlists/${list.id}/options`, { label: 'Secret' })).body;
    const base = `/smartlists/${list.id}`;
    const calls: [string, string, unknown][] = [
      ['GET', base, undefined],
      ['PUT', base, { name: 'Mine now' }],
      ['DELETE', base, undefined],
      ['GET', `${base}/options`, undefined],
      ['POST', `${base}/options`, { label: 'Intruder' }],
      ['POST', `${base}/bulkoptions`, { options: [{ label: 'Intruder' }] }],
      ['DELETE', `${base}/alloptions`, undefined],
      ['GET', `${base}/options/${option.id}`, undefined],
      ['PUT', `${base}/options/${option.id}`, { label: 'Intruder' }],
      ['DELETE', `${base}/options/${option.id}`, undefined],
    ];
    for (const [method, path, body] of calls) {
      const res = await app.request(method, `/api/v2025${path}`, { token: b.token, body });
      expectError(res, 404, 'smart_list_not_found');
      assert.ok(!res.text.includes(list.name));
    }
    assert.equal((await b.get('/smartlists')).body.smartLists.length, 1, "B sees its own list only, not A's");
    assert.equal((await a.get(`${base}/options`)).body.total, 1, 'unchanged');
  });

  it('lets members read lists but not change them', async () => {
    const list = await newList(a, 'Shared');
    const member = await a.post('/users', {
      email: `m-${randomBytes(4).toString('hex')}@example.com`,
      name: 'Member',
      role: 'member',
    });
    const token = (await createPersonalToken(app.server.ctx, member.body.id)).token;
    const as = (method: string, path: string, body?: unknown) =>
      app.request(method, `/api/v2025${path}`, { token, body });
    assert.equal((await as('GET', '/smartlists')).status, 200);
    assert.equal((await as('GET', `/smartlists/${list.id}/options`)).status, 200);
    expectError(await as('POST', '/smartlists', { name: 'No' }), 403, 'admin_required');
    expectError(await as('POST', `/smartlists/${list.id}/options`, { label: 'No' }), 403, 'admin_required');
    expectError(await as('DELETE', `/smartlists/${list.id}`), 403, 'admin_required');
  });

  it('answers under /api/v2 with .json', async () => {
    const list = await newList(a, 'Legacy');
    const res = await app.request('GET', `/api/v2/smartlists/${list.id}.json`, { token: a.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'Legacy');
    const created = await app.request('POST', `/api/v2/smartlists/${list.id}/options.json`, {
      token: a.token,
      body: { label: 'Old client' },
    });
    assert.equal(created.status, 201, created.text);
  });

  describe('fields that take their options from a list', () => {
    it('shows the current options in the form record, checks submissions with them, and follows changes', async () => {
      const list = await newList(a, 'Departments');
      await a.post(`/smartlists/${list.id}/bulkoptions`, {
        options: [
          { label: 'Sales', value: 'sales' },
          { label: 'Support', value: 'support' },
        ],
      });
      const form = await a.post('/forms', {
        name: 'Routing',
        fields: [
          { type: 'select', label: 'Department', smartList: list.id, defaultValue: 'sales' },
          { type: 'checkbox', label: 'Copy to', smartList: list.id },
        ],
      });
      assert.equal(form.status, 200, form.text);
      const [select, checkbox] = form.body.fields;
      assert.equal(select.smartList, list.id);
      assert.deepEqual(select.options, [
        { label: 'Sales', value: 'sales' },
        { label: 'Support', value: 'support' },
      ]);
      const radio = await a.post(`/forms/${form.body.id}/fields`, {
        type: 'radio',
        label: 'Urgency',
        smartList: list.id,
      });
      assert.equal(radio.status, 200, radio.text);
      assert.equal(radio.body.options.length, 2);

      const submit = (fields: unknown[]) => a.post(`/forms/${form.body.id}/submissions`, { fields });
      const fine = await submit([
        { id: select.id, value: 'support' },
        { id: checkbox.id, value: { subvalues: [{ subvalue: 'sales' }, { subvalue: 'support' }] } },
        { id: radio.body.id, value: 'sales' },
      ]);
      assert.equal(fine.status, 200, fine.text);
      expectError(await submit([{ id: select.id, value: 'legal' }]), 400, 'invalid_submission');

      // A new option is offered at once: in the form record and in submission checks.
      assert.equal((await a.post(`/smartlists/${list.id}/options`, { label: 'Legal', value: 'legal' })).status, 201);
      const read = await a.get(`/forms/${form.body.id}?withFields=true`);
      assert.deepEqual(
        read.body.fields[0].options.map((o: any) => o.value),
        ['sales', 'support', 'legal'],
      );
      assert.equal((await submit([{ id: select.id, value: 'legal' }])).status, 200);
      const field = await a.get(`/forms/${form.body.id}/fields/${checkbox.id}`);
      assert.equal(field.body.options.length, 3);

      // A removed one is refused.
      const support = (await a.get(`/smartlists/${list.id}/options?query=support`)).body.options[0];
      await a.delete(`/smartlists/${list.id}/options/${support.id}`);
      expectError(await submit([{ id: select.id, value: 'support' }]), 400, 'invalid_submission');
      await a.delete(`/smartlists/${list.id}/alloptions`);
      expectError(await submit([{ id: radio.body.id, value: 'sales' }]), 400, 'invalid_submission');
      assert.deepEqual((await a.get(`/forms/${form.body.id}/fields/${radio.body.id}`)).body.options, []);
    });

    it('refuses a list of another account, a list on a field without options, and options sent with a list', async () => {
      const list = await newList(a, 'Mine');
      await a.post(`/smartlists/${list.id}/options`, { label: 'One', value: '1' });
      const form = (await b.post('/forms', { name: 'B form' })).body;
      expectError(
        await b.post(`/forms/${form.id}/fields`, { type: 'select', label: 'X', smartList: list.id }),
        404,
        'smart_list_not_found',
      );
      expectError(
        await a.post('/forms', { name: 'F', fields: [{ type: 'select', label: 'X', smartList: 2147483647 }] }),
        404,
        'smart_list_not_found',
      );
      const aForm = (await a.post('/forms', { name: 'A form' })).body;
      const text = await a.post(`/forms/${aForm.id}/fields`, { type: 'text', label: 'T', smartList: list.id });
      expectError(text, 400, 'invalid_field');
      assert.equal(text.body.details[0].property, 'body.smartList');
      const both = await a.post(`/forms/${aForm.id}/fields`, {
        type: 'select',
        label: 'S',
        smartList: list.id,
        options: [{ label: 'Own', value: 'own' }],
      });
      expectError(both, 400, 'invalid_field');
      assert.equal(both.body.details[0].property, 'body.options');
      const badDefault = await a.post(`/forms/${aForm.id}/fields`, {
        type: 'select',
        label: 'S',
        smartList: list.id,
        defaultValue: 'nope',
      });
      expectError(badDefault, 400, 'invalid_field');
      assert.equal((await a.get(`/forms/${aForm.id}/fields`)).body.fields.length, 0);
      // The list's own options, as a field's record shows them, are taken with it: a record read can be sent back.
      const same = { type: 'select', label: 'S', smartList: list.id, options: [{ label: 'One', value: '1' }] };
      const echoed = await a.post(`/forms/${aForm.id}/fields`, same);
      assert.equal(echoed.status, 200, echoed.text);
      assert.equal(echoed.body.smartList, list.id);
      const inForm = await a.post('/forms', { name: 'Echo', fields: [same] });
      assert.equal(inForm.status, 200, inForm.text);
      assert.equal(inForm.body.fields[0].smartList, list.id);
    });

    it('switches a field onto a list and off it again, keeping the options it showed', async () => {
      const list = await newList(a, 'Switch');
      await a.post(`/smartlists/${list.id}/options`, { label: 'From list', value: 'list' });
      const form = (
        await a.post('/forms', {
          name: 'Switching',
          fields: [{ type: 'select', label: 'S', options: [{ label: 'Own', value: 'own' }] }],
        })
      ).body;
      const id = form.fields[0].id;
      const on = await a.put(`/forms/${form.id}/fields/${id}`, { smartList: list.id });
      assert.equal(on.status, 200, on.text);
      assert.deepEqual(on.body.options, [{ label: 'From list', value: 'list' }]);
      const off = await a.put(`/forms/${form.id}/fields/${id}`, { smartList: null });
      assert.equal(off.status, 200, off.text);
      assert.equal(off.body.smartList, null);
      assert.deepEqual(off.body.options, [{ label: 'From list', value: 'list' }]);
      // Now its own: the list's changes no longer reach it.
      await a.post(`/smartlists/${list.id}/options`, { label: 'Later', value: 'later' });
      assert.equal((await a.get(`/forms/${form.id}/fields/${id}`)).body.options.length, 1);
    });

    it('refuses (409) to delete a list that fields use, naming them; a copied form uses it too', async () => {
      const list = await newList(a, 'In use');
      await a.post(`/smartlists/${list.id}/options`, { label: 'One', value: '1' });
      const form = (
        await a.post('/forms', {
          name: 'User of lists',
          fields: [{ type: 'radio', label: 'Pick one', smartList: list.id }],
        })
      ).body;
      const res = await a.delete(`/smartlists/${list.id}`);
      expectError(res, 409, 'smart_list_in_use');
      assert.match(
        res.body.error,
        new RegExp(`field ${form.fields[0].id} "Pick one" of form ${form.id} "User of lists"`),
      );
      assert.equal((await a.get(`/smartlists/${list.id}`)).status, 200, 'the list stays');

      const copy = await a.post(`/forms/${form.id}/copy`);
      assert.equal(copy.status, 200, copy.text);
      assert.equal(copy.body.fields[0].smartList, list.id);
      assert.deepEqual(copy.body.fields[0].options, [{ label: 'One', value: '1' }]);

      // Live forms block; once they let go (or are deleted), the list goes.
      await a.put(`/forms/${form.id}/fields/${form.fields[0].id}`, { smartList: null });
      expectError(await a.delete(`/smartlists/${list.id}`), 409, 'smart_list_in_use');
      assert.equal((await a.delete(`/forms/${copy.body.id}`)).status, 200);
      const gone = await a.delete(`/smartlists/${list.id}`);
      assert.equal(gone.status, 200, gone.text);
      // The deleted form's field keeps the options it showed, as its own.
      assert.equal((await a.post(`/forms/${copy.body.id}/restore`)).status, 200);
      const restored = await a.get(`/forms/${copy.body.id}?withFields=true`);
      assert.equal(restored.body.fields[0].smartList, null);
      assert.deepEqual(restored.body.fields[0].options, [{ label: 'One', value: '1' }]);
    });

    it('renders the list options on the hosted page', async () => {
      const list = await newList(a, 'Hosted');
      await a.post(`/smartlists/${list.id}/options`, { label: 'Hosted choice', value: 'hc' });
      const form = (
        await a.post('/forms', { name: 'Hosted', fields: [{ type: 'select', label: 'Pick', smartList: list.id }] })
      ).body;
      const page = async () => {
        const res = await app.request('GET', new URL(form.url).pathname, { token: null });
        assert.equal(res.status, 200, res.text.slice(0, 300));
        return res.text;
      };
      assert.match(await page(), /Hosted choice/);
      await a.post(`/smartlists/${list.id}/options`, { label: 'Added later', value: 'al' });
      // A page may be served as this process read it for a moment; past that, it shows the change.
      app.server.ctx.clock.advance(PAGE_FRESHNESS_MS + 1);
      assert.match(await page(), /Added later/);
    });
  });

  describe('option images', () => {
    async function upload(path: string, parts: [string, Buffer | string, string?][], token = a.token): Promise<Reply> {
      const form = new FormData();
      for (const [name, value, filename] of parts) {
        if (typeof value === 'string') form.append(name, value);
        else form.append(name, new Blob([value], { type: 'image/png' }), filename);
      }
      const res = await fetch(`${app.url}/api/v2025${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
        body: form,
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
    }
    const keyOf = async (optionId: number) =>
      (
        await app.server.ctx.db
          .selectFrom('smart_list_options')
          .select('image_key')
          .where('id', '=', optionId)
          .executeTakeFirstOrThrow()
      ).image_key;
    const runJobs = () => createWorker(app.server.ctx, { kinds: jobKinds }).runDue();

    it('stores a PNG, JPEG, GIF or WebP told by its bytes, replaces and removes it, and lets the old files go', async () => {
      const list = await newList(a, 'Flags', true);
      const option = (await a.post(`/smartlists/${list.id}/options`, { label: 'France', value: 'fr' })).body;
      assert.equal(option.image, null);
      const path = `/smartlists/${list.id}/options/${option.id}/image`;

      const png = await upload(path, [['image', PNG, 'flag.png']]);
      assert.equal(png.status, 200, png.text);
      assert.deepEqual(png.body.image, { contentType: 'image/png', size: PNG.length });
      const first = await keyOf(option.id);
      assert.ok(first && (await app.server.ctx.storage.head(first))?.size === PNG.length, 'stored through the driver');
      assert.deepEqual((await a.get(`/smartlists/${list.id}/options/${option.id}`)).body.image, png.body.image);

      for (const [bytes, type] of [
        [JPEG_START, 'image/jpeg'],
        [GIF, 'image/gif'],
        [WEBP_START, 'image/webp'],
      ] as const) {
        // The declared type and name say PNG: the bytes decide.
        const res = await upload(path, [['image', bytes, 'looks.png']]);
        assert.equal(res.status, 200, res.text);
        assert.equal(res.body.image.contentType, type);
      }
      const last = await keyOf(option.id);
      await runJobs();
      assert.equal(await app.server.ctx.storage.head(first), undefined, 'the replaced file is removed');
      assert.ok(await app.server.ctx.storage.head(last!));

      // An empty file part removes the image.
      const emptied = await upload(path, [['image', Buffer.alloc(0), 'empty.png']]);
      assert.equal(emptied.status, 200, emptied.text);
      assert.equal(emptied.body.image, null);
      await runJobs();
      assert.equal(await app.server.ctx.storage.head(last!), undefined);

      // So does a null part, and a request with no body.
      await upload(path, [['image', PNG, 'flag.png']]);
      const nulled = await upload(path, [['image', 'null']]);
      assert.equal(nulled.status, 200, nulled.text);
      assert.equal(nulled.body.image, null);
      await upload(path, [['image', PNG, 'flag.png']]);
      const bare = await a.post(path);
      assert.equal(bare.status, 200, bare.text);
      assert.equal(bare.body.image, null);

      // DELETE .../image too, with or without an image.
      await upload(path, [['image', PNG, 'flag.png']]);
      const key = await keyOf(option.id);
      const removed = await a.delete(path);
      assert.equal(removed.status, 200, removed.text);
      assert.deepEqual(removed.body, { id: option.id });
      assert.equal((await a.get(`/smartlists/${list.id}/options/${option.id}`)).body.image, null);
      assert.equal((await a.delete(path)).status, 200);
      await runJobs();
      assert.equal(await app.server.ctx.storage.head(key!), undefined);
    });

    it('shows option images on the hosted page and serves their bytes, cacheable, 404 when none', async () => {
      const list = await newList(a, 'Fruit pictures', true);
      const apple = (await a.post(`/smartlists/${list.id}/options`, { label: 'Apple', value: 'apple' })).body;
      const pear = (await a.post(`/smartlists/${list.id}/options`, { label: 'Pear', value: 'pear' })).body;
      const unused = await newList(a, 'Unused pictures', true);
      const other = (await a.post(`/smartlists/${unused.id}/options`, { label: 'Other' })).body;
      assert.equal(
        (await upload(`/smartlists/${unused.id}/options/${other.id}/image`, [['image', PNG, 'o.png']])).status,
        200,
      );
      const form = await a.post('/forms', {
        name: 'Pictures',
        fields: [
          { type: 'radio', label: 'Pick one', smartList: list.id },
          { type: 'select', label: 'Choose one', smartList: list.id },
        ],
      });
      assert.equal(form.status, 200, form.text);
      const path = new URL(form.body.url).pathname;
      const pageText = async () => {
        app.server.ctx.clock.advance(PAGE_FRESHNESS_MS + 1);
        const res = await app.request('GET', path);
        assert.equal(res.status, 200);
        return res.text;
      };
      assert.doesNotMatch(await pageText(), /fw-option-image/, 'no image yet');

      assert.equal(
        (await upload(`/smartlists/${list.id}/options/${apple.id}/image`, [['image', PNG, 'a.png']])).status,
        200,
      );
      const html = await pageText();
      const src = new RegExp(`src="(${path}/options/${apple.id}/image\\?v=[A-Za-z0-9_-]+)"`).exec(html);
      assert.ok(src, html);
      // Beside the radio's label, and in the select's gallery; the image adds nothing for a screen reader.
      assert.match(
        html,
        new RegExp(
          `<label for="f\\d+-0"><img class="fw-option-image" src="[^"]+" alt="" width="48" height="48" loading="lazy">Apple</label>`,
        ),
      );
      assert.match(
        html,
        /<ul class="fw-option-gallery"><li><img class="fw-option-image"[^>]+><span>Apple<\/span><\/li><\/ul>/,
      );
      assert.doesNotMatch(html, new RegExp(`options/${pear.id}/image`), 'an option without an image shows none');

      const served = await fetch(`${app.url}${src[1]!.replace(/&#38;/g, '&')}`);
      assert.equal(served.status, 200);
      assert.equal(served.headers.get('content-type'), 'image/png');
      assert.equal(served.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.equal(served.headers.get('x-content-type-options'), 'nosniff');
      assert.deepEqual(Buffer.from(await served.arrayBuffer()), PNG);
      // Without the version it is cached briefly; an old version is not cached for good.
      const bare = await fetch(`${app.url}${path}/options/${apple.id}/image`);
      assert.equal(bare.status, 200);
      assert.equal(bare.headers.get('cache-control'), 'public, max-age=300');
      await bare.arrayBuffer();

      const missing = async (url: string) => {
        const res = await fetch(`${app.url}${url}`);
        assert.equal(res.status, 404, url);
        await res.arrayBuffer();
      };
      await missing(`${path}/options/${pear.id}/image`); // no image
      await missing(`${path}/options/${other.id}/image`); // a list the form does not use
      await missing(`${path}/options/2147483647/image`);
      await missing(`/f/no-such-form/options/${apple.id}/image`);

      // Removed, and a list that stops using images: gone from the page and the route.
      await upload(`/smartlists/${list.id}/options/${pear.id}/image`, [['image', PNG, 'p.png']]);
      assert.match(await pageText(), new RegExp(`options/${pear.id}/image`));
      assert.equal((await a.delete(`/smartlists/${list.id}/options/${pear.id}/image`)).status, 200);
      assert.doesNotMatch(await pageText(), new RegExp(`options/${pear.id}/image`));
      await missing(`${path}/options/${pear.id}/image`);
      await a.put(`/smartlists/${list.id}`, { useImages: false });
      assert.doesNotMatch(await pageText(), /fw-option-image/);
      await missing(`${path}/options/${apple.id}/image`);
    });

    it('closes the connection of a multipart body it refuses before its end', async () => {
      const list = await newList(a, 'Closed', true);
      const option = (await a.post(`/smartlists/${list.id}/options`, { label: 'One' })).body;
      const { hostname, port } = new URL(app.url);
      // 5,000 parts (10 are read at most), about 400 KB: refused long before the body's end.
      const parts = Array.from(
        { length: 5000 },
        (_, i) => `--B\r\nContent-Disposition: form-data; name="f${i}"\r\n\r\n${'x'.repeat(30)}\r\n`,
      ).join('');
      const body = `${parts}--B--\r\n`;
      const socket = connect({ host: hostname, port: Number(port) });
      socket.on('error', () => undefined);
      await once(socket, 'connect');
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      const closed = once(socket, 'close');
      socket.write(
        `POST /api/v2025/smartlists/${list.id}/options/${option.id}/image HTTP/1.1\r\nHost: ${hostname}\r\n` +
          `Authorization: Bearer ${a.token}\r\nContent-Type: multipart/form-data; boundary=B\r\n` +
          `Content-Length: ${body.length}\r\n\r\n${body}`,
      );
      // Kept alive, the connection answered nothing more until its keep-alive timeout (72 s).
      const timer = setTimeout(() => socket.destroy(), 10_000);
      await closed;
      clearTimeout(timer);
      assert.match(answer, /^HTTP\/1\.1 400 /, answer.slice(0, 300));
      assert.match(answer, /\r\nconnection: close\r\n/i);
      assert.match(answer, /"code":"invalid_image"/);
    });

    it('refuses a renamed text file, an oversize file, other parts, and lists without images', async () => {
      const list = await newList(a, 'Badges', true);
      const option = (await a.post(`/smartlists/${list.id}/options`, { label: 'Gold' })).body;
      const path = `/smartlists/${list.id}/options/${option.id}/image`;
      await upload(path, [['image', PNG, 'gold.png']]);
      const kept = await keyOf(option.id);

      expectError(await upload(path, [['image', Buffer.from('just some text\n'), 'notes.png']]), 400, 'invalid_image');
      // Far past the limit (OPTION_IMAGE_MAX_BYTES is 4096 here), yet read to its end and refused.
      const big = Buffer.concat([PNG, Buffer.alloc(500 * 1024)]);
      const oversize = await upload(path, [['image', big, 'big.png']]);
      expectError(oversize, 400, 'invalid_image');
      assert.match(oversize.body.error, new RegExp(String(app.config.optionImageMaxBytes)));
      // Past what is read to its end, the reader cuts it: refused all the same.
      const huge = await upload(path, [
        ['image', Buffer.concat([PNG, Buffer.alloc(drainBytes(4096) + 1024)]), 'huge.png'],
      ]);
      expectError(huge, 400, 'invalid_image');
      expectError(await upload(path, [['picture', PNG, 'gold.png']]), 400, 'invalid_image');
      expectError(
        await upload(path, [
          ['image', PNG, 'gold.png'],
          ['image', PNG, 'again.png'],
        ]),
        400,
        'invalid_image',
      );
      expectError(await upload(path, [['image', 'not a file']]), 400, 'invalid_image');
      expectError(await a.post(path, { image: 'x' }), 400, 'invalid_image');
      assert.equal(await keyOf(option.id), kept, 'a refused upload changes nothing');

      const plain = await newList(a, 'No pictures');
      const plainOption = (await a.post(`/smartlists/${plain.id}/options`, { label: 'One' })).body;
      const plainPath = `/smartlists/${plain.id}/options/${plainOption.id}/image`;
      expectError(await upload(plainPath, [['image', PNG, 'one.png']]), 400, 'images_not_used');
      expectError(await a.delete(plainPath), 400, 'images_not_used');

      // Another account's option is 404, whatever the body holds.
      expectError(await upload(path, [['image', PNG, 'x.png']], b.token), 404, 'smart_list_not_found');
      expectError(
        await upload(`/smartlists/${list.id}/options/2147483647/image`, [['image', PNG, 'x.png']]),
        404,
        'smart_list_option_not_found',
      );

      // Turning images off lets them go; deleting the list too.
      await a.put(`/smartlists/${list.id}`, { useImages: false });
      assert.equal((await a.get(`/smartlists/${list.id}/options/${option.id}`)).body.image, null);
      await runJobs();
      assert.equal(await app.server.ctx.storage.head(kept!), undefined);
      await a.put(`/smartlists/${list.id}`, { useImages: true });
      await upload(path, [['image', PNG, 'gold.png']]);
      const again = await keyOf(option.id);
      assert.equal((await a.delete(`/smartlists/${list.id}`)).status, 200);
      await runJobs();
      assert.equal(await app.server.ctx.storage.head(again!), undefined);
    });
  });
});
