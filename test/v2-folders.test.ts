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
