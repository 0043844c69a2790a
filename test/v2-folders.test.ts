/** The v2 folder paths (docs/v2.md): parent 0 is the top level. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { assertDeleted, assertShape, assertV2Error, FOLDER_SHAPE, LIST_SHAPE, ok, v2 } from './support/v2.js';

describe(`v2 folders (${dialectName})`, () => {
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

  it('creates, nests, lists, moves and deletes folders, form-encoded and JSON', async () => {
    const top = ok(await call('POST', '/folder.json', { name: 'Top', parent: '0' }), 201);
    assertShape(top, FOLDER_SHAPE, 'folder');
    assert.equal(top.parent, '0');
    const child = ok(await call('POST', '/folder', { name: 'Child', parent: Number(top.id) }, 'json'), 201);
    assert.equal(child.parent, top.id);
    const list = ok(await call('GET', '/folder.json'));
    assertShape(list, LIST_SHAPE, 'list');
    assert.deepEqual(
      list.folders.map((x: any) => x.name),
      ['Top'],
    );
    assert.deepEqual(
      list.folders[0].subfolders.map((x: any) => x.id),
      [child.id],
    );
    // Round trip with v2025.
    assert.equal(ok(await a.get(`/folders/${child.id}`)).parent, Number(top.id));
    const moved = ok(await call('PUT', `/folder/${child.id}.json`, { parent: '0', name: 'Moved' }));
    assert.equal(moved.parent, '0');
    assert.equal(ok(await call('GET', `/folder/${child.id}`)).name, 'Moved');
    assertV2Error(await v2(app, b.token)('GET', `/folder/${child.id}`), 404);
    assertV2Error(await v2(app, b.token)('DELETE', `/folder/${child.id}`), 404);
    assertDeleted(await call('DELETE', `/folder/${child.id}.json`), child.id);
    assertV2Error(await call('GET', `/folder/${child.id}.json`), 404);
    assertV2Error(await call('POST', '/folder', { name: '' }), 400);
  });
});

describe(`v2 list pages (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let call: ReturnType<typeof v2>;

  before(async () => {
    app = await startTestApp();
    a = await app.account('A');
    call = v2(app, a.token);
  });
  after(() => app.close());

  it('pages the folder list by any per_page from 1 to 100, as the original did (v2025 perPage starts at 10)', async () => {
    const names = ['Alpha', 'Beta', 'Gamma'];
    for (const name of names) ok(await call('POST', '/folder', { name }), 201);
    for (const [perPage, page, expected, pages] of [
      [1, 1, ['Alpha'], 3],
      [1, 3, ['Gamma'], 3],
      [2, 2, ['Gamma'], 2],
      [9, 1, names, 1],
      [100, 1, names, 1],
    ] as const) {
      for (const path of [
        `/folder.json?per_page=${perPage}&page=${page}`,
        `/folder?per_page=${perPage}&page_number=${page}`,
      ]) {
        const list = ok(await call('GET', path));
        assertShape(list, LIST_SHAPE, path);
        assert.deepEqual(
          list.folders.map((f: any) => f.name),
          expected,
          path,
        );
        assert.equal(list.total, 3, path);
        assert.equal(list.pages, pages, path);
      }
    }
    // In a form body too, as GET parameters may come.
    assert.equal(ok(await call('GET', '/folder', { per_page: '1', page: '2' })).folders[0].name, 'Beta');
    for (const bad of ['0', '101', '-1', 'x']) assertV2Error(await call('GET', `/folder?per_page=${bad}`), 400);
    // The v2025 list keeps its own bounds.
    assert.equal((await a.get('/folders?perPage=9')).status, 400);
  });

  it('takes per_page=1 on every v2 list that pages', async () => {
    const form = ok(await call('POST', '/form', { name: 'One' }), 201);
    ok(await call('POST', '/form', { name: 'Two' }), 201);
    const field = ok(await call('POST', `/form/${form.id}/field`, { field_type: 'text', label: 'Note' }), 201);
    for (const note of ['a', 'b'])
      ok(await call('POST', `/form/${form.id}/submission`, { [`field_${field.id}`]: note }), 201);
    const list = ok(await call('POST', '/smartlist', { name: 'L' }), 201);
    ok(await call('POST', `/smartlist/${list.id}/bulkoptions`, { options: [{ label: 'x' }, { label: 'y' }] }));
    ok(await call('POST', '/smartlist', { name: 'M' }), 201);
    for (const name of ['P', 'Q']) ok(await call('POST', '/portal', { name }), 201);
    for (const [path, key] of [
      ['/form', 'forms'],
      [`/form/${form.id}/submission`, 'submissions'],
      [`/form/${form.id}/partialsubmission`, 'partial_submissions'],
      ['/portal', 'portals'],
      ['/smartlist', 'smart_lists'],
      [`/smartlist/${list.id}/option`, 'options'],
    ] as const) {
      const page = ok(await call('GET', `${path}.json?per_page=1&page=2`));
      assert.ok(page[key].length <= 1, `${path}: ${JSON.stringify(page).slice(0, 300)}`);
      if (key !== 'partial_submissions') {
        assert.equal(page[key].length, 1, path);
        assert.equal(page.pages, page.total, path);
      }
    }
  });
});
