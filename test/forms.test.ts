import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

const contactFields = [
  { type: 'name', label: 'Your name', required: true },
  { type: 'email', label: 'Email', unique: true },
  {
    type: 'select',
    label: 'Topic',
    options: [
      { label: 'Sales', value: 'sales' },
      { label: 'Support', value: 'support' },
    ],
    defaultValue: 'sales',
  },
];

describe(`forms (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;

  before(async () => {
    app = await startTestApp();
    a = await app.account('A');
  });
  after(() => app.close());

  it('creates a form with its fields in one request and reads it back', async () => {
    const created = await a.post('/forms', {
      name: 'Contact',
      submitButtonTitle: 'Send',
      settings: { language: 'en', labelPosition: 'left' },
      fields: contactFields,
    });
    assert.equal(created.status, 200);
    const form = created.body;
    assert.equal(form.name, 'Contact');
    assert.equal(form.submitButtonTitle, 'Send');
    assert.equal(form.isEncrypted, false);
    assert.equal(form.submissionsCount, 0);
    assert.equal(form.folder, null);
    assert.deepEqual(form.settings, { language: 'en', labelPosition: 'left' });
    assert.match(form.viewKey, /^[A-Za-z0-9_-]{16}$/);
    assert.equal(form.url, `http://forms.test/f/${form.viewKey}`);
    assert.match(form.created, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.deepEqual(
      form.fields.map((f: any) => [f.type, f.label, f.displayOrder]),
      [
        ['name', 'Your name', 0],
        ['email', 'Email', 1],
        ['select', 'Topic', 2],
      ],
    );

    const read = await a.get(`/forms/${form.id}`);
    assert.equal(read.status, 200);
    assert.equal(read.body.fields, undefined, 'fields only when asked for');
    const withFields = await a.get(`/forms/${form.id}?withFields=true`);
    assert.deepEqual(withFields.body.fields, form.fields);
    assert.equal((await a.get(`/forms/${form.id}?withFields=false`)).body.fields, undefined);
  });

  it('writes nothing when one inline field is bad', async () => {
    const before = (await a.get('/forms')).body.total;
    const res = await a.post('/forms', {
      name: 'Broken',
      fields: [
        { type: 'text', label: 'ok' },
        { type: 'text', label: 'bad', options: [{ label: 'x', value: 'x' }] },
      ],
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.code, 'invalid_field');
    assert.deepEqual(res.body.details, [
      { property: 'body.fields[1].options', message: 'a text field has no options' },
    ]);
    assert.equal((await a.get('/forms')).body.total, before);
  });

  it('updates only what is sent and rejects read-only and unknown properties', async () => {
    const form = (await a.post('/forms', { name: 'Before', settings: { successMessage: 'Thanks' } })).body;
    const updated = await a.put(`/forms/${form.id}`, { name: 'After', inactive: true });
    assert.equal(updated.status, 200);
    assert.equal(updated.body.name, 'After');
    assert.equal(updated.body.inactive, true);
    assert.deepEqual(updated.body.settings, { successMessage: 'Thanks' });
    assert.ok(updated.body.updated >= form.updated);

    for (const body of [
      {},
      { id: 99 },
      { submissionsCount: 5 },
      { viewKey: 'x' },
      { name: '' },
      { name: 'x'.repeat(201) },
      { settings: { colour: 'red' } },
    ]) {
      const res = await a.put(`/forms/${form.id}`, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.status, 'error');
    }
    assert.equal((await a.get(`/forms/${form.id}`)).body.name, 'After');
  });

  it('lists with paging, search, ordering and folder filter', async () => {
    const b = await app.account('Lister');
    const folder = (await b.post('/folders', { name: 'Marketing' })).body;
    for (const name of ['Alpha survey', 'beta SURVEY', 'Gamma', 'Delta 100%', 'Epsilon_x']) {
      await b.post('/forms', { name, ...(name.startsWith('G') || name.startsWith('D') ? { folder: folder.id } : {}) });
    }
    const page1 = await b.get('/forms?pageSize=2&pageNumber=1');
    assert.equal(page1.status, 200);
    assert.deepEqual(
      { ...page1.body, forms: page1.body.forms.map((f: any) => f.name) },
      {
        forms: ['Alpha survey', 'beta SURVEY'],
        total: 5,
        pages: 3,
        pageNumber: 1,
        pageSize: 2,
      },
    );
    const page3 = await b.get('/forms?pageSize=2&pageNumber=3');
    assert.deepEqual(
      page3.body.forms.map((f: any) => f.name),
      ['Epsilon_x'],
    );
    assert.deepEqual((await b.get('/forms?pageSize=2&pageNumber=4')).body.forms, []);

    assert.deepEqual(
      (await b.get('/forms?search=survey')).body.forms.map((f: any) => f.name),
      ['Alpha survey', 'beta SURVEY'],
    );
    assert.deepEqual(
      (await b.get('/forms?search=100%25')).body.forms.map((f: any) => f.name),
      ['Delta 100%'],
    );
    assert.deepEqual(
      (await b.get('/forms?search=n_x')).body.forms.map((f: any) => f.name),
      ['Epsilon_x'],
      'LIKE wildcards match literally',
    );
    assert.deepEqual(
      (await b.get('/forms?search=%25')).body.forms.map((f: any) => f.name),
      ['Delta 100%'],
    );

    // Case-insensitive: 'beta' sorts between 'Alpha' and 'Delta'.
    assert.deepEqual(
      (await b.get('/forms?orderBy=name&order=desc')).body.forms.map((f: any) => f.name),
      ['Gamma', 'Epsilon_x', 'Delta 100%', 'beta SURVEY', 'Alpha survey'],
    );
    assert.deepEqual((await b.get('/forms?orderBy=id&order=DESC')).body.forms.map((f: any) => f.name)[0], 'Epsilon_x');
    // Every letter's case, not ASCII's alone, and the same order on both databases (code points).
    for (const name of ['Éz sort', 'éa sort', 'Ez sort', 'ea sort'])
      assert.equal((await b.post('/forms', { name })).status, 200);
    assert.deepEqual(
      (await b.get('/forms?search=%20sort&orderBy=name')).body.forms.map((f: any) => f.name),
      ['ea sort', 'Ez sort', 'éa sort', 'Éz sort'],
    );
    assert.deepEqual(
      (await b.get('/forms?search=%C3%89A')).body.forms.map((f: any) => f.name),
      ['éa sort'],
      'the search folds É too',
    );
    assert.deepEqual(
      (await b.get(`/forms?folder=${folder.id}`)).body.forms.map((f: any) => f.name),
      ['Gamma', 'Delta 100%'],
    );

    for (const query of [
      'orderBy=colour',
      'order=sideways',
      'pageSize=0',
      'pageSize=101',
      'pageNumber=0',
      'folder=abc',
      'search=' + 'x'.repeat(201),
      'unknown=1',
    ]) {
      const res = await b.get(`/forms?${query}`);
      assert.equal(res.status, 400, query);
      assert.equal(res.body.code, 'validation_failed', query);
    }
    const missingFolder = await b.get('/forms?folder=999999');
    assert.equal(missingFolder.status, 404);
    assert.equal(missingFolder.body.code, 'folder_not_found');
  });

  it('soft-deletes: the form leaves listings and reads, can be listed as deleted and restored', async () => {
    const form = (await a.post('/forms', { name: 'Temporary', fields: [{ type: 'text', label: 'Q' }] })).body;
    const del = await a.delete(`/forms/${form.id}`);
    assert.equal(del.status, 200);
    assert.equal(del.body.id, form.id);
    assert.equal(del.body.name, 'Temporary');
    assert.match(del.body.deleted, /Z$/);

    assert.equal((await a.get(`/forms/${form.id}`)).status, 404);
    assert.equal((await a.get(`/forms/${form.id}/fields`)).status, 404);
    assert.equal((await a.put(`/forms/${form.id}`, { name: 'x' })).status, 404);
    assert.equal((await a.post(`/forms/${form.id}/copy`)).status, 404);
    assert.equal((await a.delete(`/forms/${form.id}`)).status, 404, 'deleting twice');
    assert.ok(!(await a.get('/forms?pageSize=100')).body.forms.some((f: any) => f.id === form.id));

    const deleted = (await a.get('/forms?deleted=true')).body.forms;
    const listed = deleted.find((f: any) => f.id === form.id);
    assert.ok(listed, 'listed among deleted forms');
    assert.equal(listed.deleted, del.body.deleted);

    const restored = await a.post(`/forms/${form.id}/restore`);
    assert.equal(restored.status, 200);
    assert.equal(restored.body.deleted, undefined);
    const again = await a.get(`/forms/${form.id}?withFields=true`);
    assert.equal(again.status, 200);
    assert.equal(again.body.fields.length, 1, 'fields survive the delete');
    assert.equal((await a.post(`/forms/${form.id}/restore`)).status, 404, 'a live form cannot be restored');
  });

  it('lists deleted forms newest deletion first unless an order is asked for', async () => {
    const b = await app.account('Deletions');
    const ids: number[] = [];
    for (const name of ['First', 'Second', 'Third']) ids.push((await b.post('/forms', { name })).body.id);
    const [first, second, third] = ids as [number, number, number];
    // Deleted in another order than made, a clock tick apart.
    for (const id of [second, third, first]) {
      assert.equal((await b.delete(`/forms/${id}`)).status, 200);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const order = async (query: string) =>
      (await b.get(`/forms?deleted=true${query}`)).body.forms.map((f: { id: number }) => f.id);
    assert.deepEqual(await order(''), [first, third, second], 'newest deletion first');
    assert.deepEqual(await order('&order=asc'), [second, third, first], 'oldest deletion first');
    assert.deepEqual(await order('&orderBy=id'), [first, second, third]);
    assert.deepEqual(await order('&orderBy=id&order=desc'), [third, second, first]);
    assert.deepEqual(await order('&pageSize=1&pageNumber=2'), [third]);
    // Live forms keep their order by id.
    const live = (await b.post('/forms', { name: 'Live' })).body.id;
    const later = (await b.post('/forms', { name: 'Later' })).body.id;
    assert.deepEqual(
      (await b.get('/forms')).body.forms.map((f: { id: number }) => f.id),
      [live, later],
    );
  });

  it('copies a form with its fields, remapping logic to the copied fields', async () => {
    const folder = (await a.post('/folders', { name: 'Copies' })).body;
    const form = (
      await a.post('/forms', { name: 'Original', settings: { successMessage: 'Hi' }, fields: contactFields })
    ).body;
    const topic = form.fields.find((f: any) => f.label === 'Topic');
    const email = form.fields.find((f: any) => f.label === 'Email');
    await a.put(`/forms/${form.id}/fields/${email.id}`, {
      logic: {
        action: 'show',
        conditional: 'all',
        checks: [{ field: topic.id, condition: 'equals', option: 'support' }],
      },
    });

    const copy = await a.post(
      `/forms/${form.id}/copy?folder=${folder.id}&includeEmails=true&includeIntegrations=false`,
    );
    assert.equal(copy.status, 200);
    assert.notEqual(copy.body.id, form.id);
    assert.equal(copy.body.name, 'Original (copy)');
    assert.equal(copy.body.folder, folder.id);
    assert.notEqual(copy.body.viewKey, form.viewKey);
    assert.deepEqual(copy.body.settings, { successMessage: 'Hi' });
    assert.equal(copy.body.fields.length, 3);
    const copiedTopic = copy.body.fields.find((f: any) => f.label === 'Topic');
    const copiedEmail = copy.body.fields.find((f: any) => f.label === 'Email');
    assert.ok(!form.fields.some((f: any) => f.id === copiedTopic.id), 'new field ids');
    assert.deepEqual(copiedEmail.logic.checks, [{ field: copiedTopic.id, condition: 'equals', option: 'support' }]);
    // The original is untouched.
    const original = (await a.get(`/forms/${form.id}?withFields=true`)).body;
    assert.equal(original.fields.find((f: any) => f.label === 'Email').logic.checks[0].field, topic.id);

    const template = (
      await a.post('/forms', { name: 'Look', submitButtonTitle: 'Go', settings: { labelPosition: 'right' } })
    ).body;
    const styled = await a.post(`/forms/${form.id}/copy?template=${template.id}`);
    assert.equal(styled.status, 200);
    assert.equal(styled.body.submitButtonTitle, 'Go');
    assert.deepEqual(styled.body.settings, { labelPosition: 'right' });
    assert.equal(styled.body.fields.length, 3);

    assert.equal((await a.post(`/forms/${form.id}/copy?folder=999999`)).status, 404);
    assert.equal((await a.post(`/forms/${form.id}/copy?template=999999`)).status, 404);
    assert.equal((await a.post(`/forms/${form.id}/copy?includeEmails=maybe`)).status, 400);
    assert.equal((await a.post('/forms/999999/copy')).status, 404);

    // The copy takes no body: a name asked for in one is refused, not ignored, and nothing is copied; {} is no body.
    const before = (await a.get('/forms?pageSize=100')).body.total;
    const named = await a.post(`/forms/${form.id}/copy`, { name: 'Renamed' });
    assert.equal(named.status, 400);
    assert.deepEqual(named.body.details, [{ property: 'body.name', message: 'is not a known property' }]);
    assert.equal((await a.get('/forms?pageSize=100')).body.total, before);
    assert.equal((await a.post(`/forms/${form.id}/copy`, {})).status, 200);
    assert.equal((await a.get('/forms?pageSize=100')).body.total, before + 1);
  });

  it("copies with a template only a member may read, and only into the account's own folders", async () => {
    const secret = (
      await a.post('/forms', {
        name: 'Hidden',
        submitButtonTitle: 'Secret title',
        settings: { successMessage: 'secret', redirectUrl: 'https://secret.example.com' },
      })
    ).body;
    const seen = (
      await a.post('/forms', { name: 'Seen', submitButtonTitle: 'Seen title', settings: { successMessage: 'seen' } })
    ).body;
    const own = (await a.post('/forms', { name: 'Own' })).body;
    const member = await a.post('/users', {
      email: `copier-${randomBytes(5).toString('hex')}@example.com`,
      name: 'Copier',
      role: 'member',
    });
    assert.equal((await a.put(`/users/${member.body.id}/permissions/${own.id}`, { level: 'view' })).status, 200);
    assert.equal((await a.put(`/users/${member.body.id}/permissions/${seen.id}`, { level: 'view' })).status, 200);
    const token = (await createPersonalToken(app.server.ctx, member.body.id)).token;
    const copy = (query: string) => app.request('POST', `/api/v2025/forms/${own.id}/copy${query}`, { token });

    const formsBefore = (await a.get('/forms')).body.total;
    const refused = await copy(`?template=${secret.id}`);
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.code, 'form_permission_required');
    assert.ok(!refused.text.includes('secret'), 'nothing of the hidden form is shown');
    assert.equal((await a.get('/forms')).body.total, formsBefore, 'the refused copy wrote nothing');

    const styled = await copy(`?template=${seen.id}`);
    assert.equal(styled.status, 200, styled.text);
    assert.equal(styled.body.submitButtonTitle, 'Seen title');
    assert.deepEqual(styled.body.settings, { successMessage: 'seen' });

    // Another account's form or folder is 404, for the owner and for the member alike.
    const b = await app.account('B');
    const bForm = (await b.post('/forms', { name: 'B form', submitButtonTitle: 'B title' })).body;
    const bFolder = (await b.post('/folders', { name: 'B folder' })).body;
    for (const res of [
      await copy(`?template=${bForm.id}`),
      await a.post(`/forms/${own.id}/copy?template=${bForm.id}`),
    ]) {
      assert.equal(res.status, 404, res.text);
      assert.equal(res.body.code, 'form_not_found');
    }
    for (const res of [
      await copy(`?folder=${bFolder.id}`),
      await a.post(`/forms/${own.id}/copy?folder=${bFolder.id}`),
    ]) {
      assert.equal(res.status, 404, res.text);
      assert.equal(res.body.code, 'folder_not_found');
    }
  });

  it('accepts an empty body sent with Content-Type: application/json on a body-less route', async () => {
    const form = (await a.post('/forms', { name: 'Empty body' })).body;
    const res = await a.post(`/forms/${form.id}/copy`, undefined, { raw: '' });
    assert.equal(res.status, 200);
  });

  it('answers bad bodies with 400 and the error body', async () => {
    const cases: [string, string][] = [
      ['{bad', 'invalid_json'],
      ['[]', 'validation_failed'],
      ['"form"', 'validation_failed'],
      ['{"name": 5}', 'validation_failed'],
      ['{"name": "x", "folder": "1"}', 'validation_failed'],
      ['{"name": "x", "fields": [{"type": "hologram", "label": "x"}]}', 'validation_failed'],
      ['{"name": "x", "fields": {}}', 'validation_failed'],
      ['{"name": "x", "settings": {"redirectUrl": "javascript:alert(1)"}}', 'validation_failed'],
    ];
    for (const [raw, code] of cases) {
      const res = await a.post('/forms', undefined, { raw });
      assert.equal(res.status, 400, raw);
      assert.equal(res.body.status, 'error');
      assert.equal(res.body.code, code, raw);
      assert.equal(typeof res.body.error, 'string');
    }
    const unknown = await a.post('/forms', { name: 'x', colour: 'red' });
    assert.deepEqual(unknown.body.details, [{ property: 'body.colour', message: 'is not a known property' }]);
    const wrongType = await a.post('/forms', undefined, {
      raw: '{"name":"x"}',
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(wrongType.status, 415);
    assert.equal(wrongType.body.code, 'unsupported_media_type');
  });

  it('names at most 100 problems of a body that has thousands, and answers other requests meanwhile', async () => {
    // 20,000 unknown keys (about 200 KB): each one an error of ajv's. Naming them meant comparing
    // each with every other, over a minute of the event loop for this one request.
    const keys = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, 1]));
    const [res, other] = await Promise.all([a.post('/forms', { name: 'x', ...keys }), a.get('/forms')]);
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.code, 'validation_failed');
    assert.equal(res.body.details.length, 100);
    assert.deepEqual(res.body.details[0], { property: 'body.k0', message: 'is not a known property' });
    assert.equal(other.status, 200);
  });

  it('names only the size of a list over its limit, not each of its items', async () => {
    const form = (await a.post('/forms', { name: 'Sized', fields: [{ type: 'text', label: 'T' }] })).body;
    // 300,000 empty objects (900 KB): an error for each of their missing properties was 600,000
    // objects to make and collect, over half a second of the event loop.
    const res = await a.post(`/forms/${form.id}/submissions`, { fields: Array.from({ length: 300_000 }, () => ({})) });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.code, 'validation_failed');
    assert.deepEqual(res.body.details, [{ property: 'body.fields', message: 'must NOT have more than 500 items' }]);
    // Under the limit, every problem is named as before.
    const two = await a.post(`/forms/${form.id}/submissions`, { fields: [{}, { id: 'x' }] });
    assert.equal(two.status, 400, two.text);
    assert.ok(two.body.details.length >= 2, two.text);
  });

  it('refuses a body over the configured limit with 413', async () => {
    const small = await startTestApp({ BODY_LIMIT: '2048' });
    try {
      const s = await small.account();
      const res = await s.post('/forms', { name: 'x', settings: { description: 'y'.repeat(5000) } });
      assert.equal(res.status, 413);
      assert.equal(res.body.code, 'payload_too_large');
    } finally {
      await small.close();
    }
  });

  it('serves reads with an ETag, answers If-None-Match with 304, and never serves a stale read', async () => {
    const form = (await a.post('/forms', { name: 'Cached', fields: [{ type: 'text', label: 'Before' }] })).body;
    const first = await a.get(`/forms/${form.id}?withFields=true`);
    const etag = first.headers.get('etag');
    assert.match(etag ?? '', /^"\d+\.[\d.]+f?"$/);
    assert.equal(first.headers.get('cache-control'), 'private, no-cache');
    const again = await a.get(`/forms/${form.id}?withFields=true`, { headers: { 'if-none-match': etag! } });
    assert.equal(again.status, 304);
    assert.equal(again.text, '');
    assert.notEqual((await a.get(`/forms/${form.id}`)).headers.get('etag'), etag, 'with and without fields differ');

    // Every kind of change shows at once, with a new ETag.
    const seen = new Set([etag]);
    const changes: [string, () => Promise<unknown>, (f: any) => boolean][] = [
      [
        'field label',
        () => a.put(`/forms/${form.id}/fields/${form.fields[0].id}`, { label: 'After' }),
        (f) => f.fields[0].label === 'After',
      ],
      [
        'field added',
        () => a.post(`/forms/${form.id}/fields`, { type: 'email', label: 'Mail' }),
        (f) => f.fields.length === 2,
      ],
      ['field deleted', () => a.delete(`/forms/${form.id}/fields/${form.fields[0].id}`), (f) => f.fields.length === 1],
      ['form renamed', () => a.put(`/forms/${form.id}`, { name: 'Renamed' }), (f) => f.name === 'Renamed'],
    ];
    const folder = (await a.post('/folders', { name: 'Holder' })).body;
    changes.push(
      ['moved into folder', () => a.put(`/forms/${form.id}`, { folder: folder.id }), (f) => f.folder === folder.id],
      ['folder deleted', () => a.delete(`/folders/${folder.id}`), (f) => f.folder === null],
    );
    for (const [what, change, holds] of changes) {
      await change();
      const read = await a.get(`/forms/${form.id}?withFields=true`, {
        headers: { 'if-none-match': [...seen].join(', ') },
      });
      assert.equal(read.status, 200, what);
      assert.ok(holds(read.body), what);
      seen.add(read.headers.get('etag'));
      assert.equal(seen.size, changes.indexOf(changes.find((c) => c[0] === what)!) + 2, `${what}: new ETag`);
    }
    await a.delete(`/forms/${form.id}`);
    assert.equal(
      (await a.get(`/forms/${form.id}?withFields=true`)).status,
      404,
      'deleted forms are not served from the cache',
    );
  });

  it('never serves a read cached by one server after another server changed the form', async () => {
    const second = await startTestApp({}, app);
    try {
      const form = (await a.post('/forms', { name: 'Shared', fields: [{ type: 'text', label: 'Q' }] })).body;
      const viaSecond = () => second.request('GET', `/api/v2025/forms/${form.id}?withFields=true`, { token: a.token });
      assert.equal((await viaSecond()).body.fields[0].label, 'Q');
      await a.put(`/forms/${form.id}/fields/${form.fields[0].id}`, { label: 'Changed elsewhere' });
      assert.equal((await viaSecond()).body.fields[0].label, 'Changed elsewhere');
    } finally {
      await second.close();
    }
  });

  it('lists forms as their reads show them, after every kind of change, from any server', async () => {
    const second = await startTestApp({}, app);
    try {
      const form = (await a.post('/forms', { name: 'Listed', fields: [{ type: 'text', label: 'Q' }] })).body;
      const other = (await a.post('/forms', { name: 'Listed too' })).body;
      const listed = async (via: TestApp, deleted = false) => {
        const res = await via.request('GET', `/api/v2025/forms?pageSize=100&search=Listed&deleted=${deleted}`, {
          token: a.token,
        });
        assert.equal(res.status, 200);
        return res.body as { forms: any[]; total: number };
      };
      // Every item is exactly the form's own read, and the paging fields are right.
      const matchesReads = async (via: TestApp, what: string) => {
        const page = await listed(via);
        assert.deepEqual(
          page.forms.map((f) => f.id),
          [form.id, other.id],
          what,
        );
        assert.equal(page.total, 2, what);
        for (const item of page.forms) assert.deepEqual(item, (await a.get(`/forms/${item.id}`)).body, what);
        // Listed once more, so that the next change is first seen by a list that has served these forms.
        assert.deepEqual((await listed(via)).forms, page.forms, what);
        return page.forms[0];
      };
      await matchesReads(app, 'first list');
      await matchesReads(second, 'first list, second server');

      await a.put(`/forms/${form.id}`, { name: 'Listed, renamed', settings: { language: 'de' } });
      let item = await matchesReads(second, 'renamed on the other server');
      assert.equal(item.name, 'Listed, renamed');
      assert.equal(item.settings.language, 'de');

      // Made on the first server; the second has served the form with no submissions.
      const created = await app.request('POST', `/api/v2025/forms/${form.id}/submissions`, {
        token: a.token,
        body: { fields: [{ id: form.fields[0].id, value: 'x' }] },
      });
      assert.equal(created.status, 200);
      item = await matchesReads(second, 'a submission made on the other server');
      assert.equal(item.submissionsCount, 1);
      // The count comes back to a value it had before: the list must not serve the record it had then.
      assert.equal((await a.delete(`/submissions/${created.body.id}`)).status, 200);
      item = await matchesReads(second, 'the submission deleted');
      assert.equal(item.submissionsCount, 0);

      await a.delete(`/forms/${form.id}`);
      assert.deepEqual(
        (await listed(second)).forms.map((f) => f.id),
        [other.id],
        'deleted',
      );
      const gone = (await listed(second, true)).forms;
      assert.equal(gone.length, 1);
      assert.match(gone[0].deleted, /Z$/);
      await a.post(`/forms/${form.id}/restore`);
      item = await matchesReads(second, 'restored');
      assert.equal(item.deleted, undefined);
    } finally {
      await second.close();
    }
  });

  it('serves /api/v2 paths with an optional .json suffix', async () => {
    const form = (await a.post('/forms', { name: 'Legacy' })).body;
    const legacy = await app.request('GET', `/api/v2/forms/${form.id}.json?withFields=true`, { token: a.token });
    assert.equal(legacy.status, 200);
    assert.equal(legacy.body.id, form.id);
    assert.equal((await app.request('GET', `/api/v2/forms/${form.id}`, { token: a.token })).status, 200);
    const created = await app.request('POST', '/api/v2/forms.json', { token: a.token, body: { name: 'Via v2' } });
    assert.equal(created.status, 200);
    assert.equal(created.body.name, 'Via v2');
    assert.equal((await app.request('GET', '/api/v2/forms.json')).status, 401);
  });
});
