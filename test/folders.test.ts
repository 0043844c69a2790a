import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

describe(`folders (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;

  before(async () => {
    app = await startTestApp();
    a = await app.account();
  });
  after(() => app.close());

  it('nests subfolders and shows them in reads and listings', async () => {
    const top = (await a.post('/folders', { name: 'Clients' })).body;
    assert.equal(top.parent, null);
    assert.deepEqual(top.subfolders, []);
    const sub = (await a.post('/folders', { name: 'Acme', parent: top.id })).body;
    const subsub = (await a.post('/folders', { name: '2026', parent: sub.id })).body;
    await a.post('/forms', { name: 'Intake', folder: sub.id });

    const read = await a.get(`/folders/${top.id}`);
    assert.equal(read.status, 200);
    assert.equal(read.body.subfolders.length, 1);
    assert.equal(read.body.subfolders[0].id, sub.id);
    assert.equal(read.body.subfolders[0].formsCount, 1);
    assert.equal(read.body.subfolders[0].subfolders[0].id, subsub.id);

    const subRead = await a.get(`/folders/${sub.id}`);
    assert.equal(subRead.status, 200, 'a subfolder reads like any folder');
    assert.equal(subRead.body.parent, top.id);

    const list = await a.get('/folders');
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.folders.map((f: any) => f.id),
      [top.id],
      'only top-level folders at the top',
    );
    assert.equal(list.body.folders[0].subfolders[0].subfolders[0].name, '2026');
    assert.equal(list.body.total, 1);
    assert.equal(list.body.pageSize, 25);
  });

  it('pages with page (from 1) and perPage (at least 10)', async () => {
    const b = await app.account();
    for (let i = 0; i < 12; i++) await b.post('/folders', { name: `F${String(i).padStart(2, '0')}` });
    const p1 = await b.get('/folders?page=1&perPage=10');
    assert.deepEqual(
      [p1.body.folders.length, p1.body.total, p1.body.pages, p1.body.pageNumber, p1.body.pageSize],
      [10, 12, 2, 1, 10],
    );
    const p2 = await b.get('/folders?page=2&perPage=10');
    assert.deepEqual(
      p2.body.folders.map((f: any) => f.name),
      ['F10', 'F11'],
    );
    for (const q of ['perPage=9', 'perPage=0', 'perPage=101', 'page=0', 'page=x', 'perPage=ten', 'pageSize=10']) {
      const res = await b.get(`/folders?${q}`);
      assert.equal(res.status, 400, q);
      assert.equal(res.body.code, 'validation_failed');
    }
  });

  it('lists folders and subfolders by name without regard to case, as forms are, on both databases', async () => {
    const b = await app.account();
    const ids = new Map<string, number>();
    for (const name of ['zeta', 'Zulu', 'beta', 'Alpha', 'Éclair', 'ábc']) {
      const res = await b.post('/folders', { name });
      assert.equal(res.status, 200, res.text);
      ids.set(name, res.body.id);
    }
    for (const name of ['b', 'A', 'c']) await b.post('/folders', { name, parent: ids.get('beta') });
    const list = (await b.get('/folders?perPage=100')).body.folders;
    // Lower-cased letter by letter, then by code point (what GET /forms?orderBy=name does).
    const expected = ['Alpha', 'beta', 'zeta', 'Zulu', 'ábc', 'Éclair'];
    assert.deepEqual(
      list.map((f: any) => f.name),
      expected,
    );
    assert.deepEqual(
      list[1].subfolders.map((f: any) => f.name),
      ['A', 'b', 'c'],
    );
    for (const name of expected) await b.post('/forms', { name });
    assert.deepEqual(
      (await b.get('/forms?orderBy=name')).body.forms.map((f: any) => f.name),
      expected,
      'forms of the same names sort the same',
    );
  });

  it('renames and moves folders, refusing cycles and depth over 5', async () => {
    const x = (await a.post('/folders', { name: 'X' })).body;
    const y = (await a.post('/folders', { name: 'Y', parent: x.id })).body;
    const renamed = await a.put(`/folders/${y.id}`, { name: 'Why' });
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.name, 'Why');
    assert.equal(renamed.body.parent, x.id);

    const cycle = await a.put(`/folders/${x.id}`, { parent: y.id });
    assert.equal(cycle.status, 400);
    assert.equal(cycle.body.code, 'folder_cycle');
    assert.equal((await a.put(`/folders/${x.id}`, { parent: x.id })).body.code, 'folder_cycle');

    const moved = await a.put(`/folders/${y.id}`, { parent: null });
    assert.equal(moved.body.parent, null);

    let parent: number | null = null;
    const chain: number[] = [];
    for (let depth = 1; depth <= 5; depth++) {
      const res: any = await a.post('/folders', { name: `L${depth}`, parent });
      assert.equal(res.status, 200);
      parent = res.body.id;
      chain.push(res.body.id);
    }
    const tooDeep = await a.post('/folders', { name: 'L6', parent });
    assert.equal(tooDeep.status, 400);
    assert.equal(tooDeep.body.code, 'folder_too_deep');
    // Moving a two-level subtree under level 4 would reach level 6.
    const twoLevels = (await a.post('/folders', { name: 'T' })).body;
    await a.post('/folders', { name: 'T2', parent: twoLevels.id });
    assert.equal((await a.put(`/folders/${twoLevels.id}`, { parent: chain[3] })).body.code, 'folder_too_deep');
    assert.equal((await a.put(`/folders/${twoLevels.id}`, { parent: chain[2] })).status, 200);

    for (const body of [{}, { name: '' }, { name: 'x'.repeat(201) }, { parent: 'x' }, { id: 3 }]) {
      assert.equal((await a.put(`/folders/${x.id}`, body)).status, 400, JSON.stringify(body));
    }
    assert.equal((await a.put(`/folders/${x.id}`, { parent: 999999 })).status, 404);
    assert.equal((await a.post('/folders', { name: 'orphan', parent: 999999 })).status, 404);
  });

  it('deleting a folder moves its forms and subfolders up to its parent and deletes no form', async () => {
    const outer = (await a.post('/folders', { name: 'Outer' })).body;
    const doomed = (await a.post('/folders', { name: 'Doomed', parent: outer.id })).body;
    const child = (await a.post('/folders', { name: 'Child', parent: doomed.id })).body;
    const form = (await a.post('/forms', { name: 'Inside', folder: doomed.id })).body;

    const del = await a.delete(`/folders/${doomed.id}`);
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { id: doomed.id });
    assert.equal((await a.get(`/folders/${doomed.id}`)).status, 404);
    assert.equal((await a.get(`/folders/${child.id}`)).body.parent, outer.id);
    assert.equal((await a.get(`/forms/${form.id}`)).body.folder, outer.id);
    assert.equal((await a.delete(`/folders/${doomed.id}`)).status, 404);

    const top = (await a.post('/folders', { name: 'Top' })).body;
    const f2 = (await a.post('/forms', { name: 'At top', folder: top.id })).body;
    await a.delete(`/folders/${top.id}`);
    assert.equal(
      (await a.get(`/forms/${f2.id}`)).body.folder,
      null,
      'a top-level folder leaves its forms at the top level',
    );
  });

  it('keeps folder counts to live forms and lets a restored form come back at the top if its folder went away', async () => {
    const folder = (await a.post('/folders', { name: 'Counted' })).body;
    const f1 = (await a.post('/forms', { name: 'one', folder: folder.id })).body;
    await a.post('/forms', { name: 'two', folder: folder.id });
    await a.delete(`/forms/${f1.id}`);
    assert.equal((await a.get(`/folders/${folder.id}`)).body.formsCount, 1);
    await a.delete(`/folders/${folder.id}`);
    const restored = await a.post(`/forms/${f1.id}/restore`);
    assert.equal(restored.status, 200);
    assert.equal(restored.body.folder, null);
  });

  it('counts for a member only the forms the member holds a level on, in listings and reads', async () => {
    const b = await app.account('Counts');
    const top = (await b.post('/folders', { name: 'Team' })).body;
    const sub = (await b.post('/folders', { name: 'Hidden work', parent: top.id })).body;
    const shared = (await b.post('/forms', { name: 'Shared', folder: top.id })).body;
    await b.post('/forms', { name: 'Private 1', folder: top.id });
    await b.post('/forms', { name: 'Private 2', folder: sub.id });
    const unique = () => `${randomBytes(5).toString('hex')}@example.com`;
    const member = (await b.post('/users', { email: unique(), name: 'Member', role: 'member' })).body;
    const admin = (await b.post('/users', { email: unique(), name: 'Admin', role: 'admin' })).body;
    await b.put(`/users/${member.id}/permissions/${shared.id}`, { level: 'view' });
    const memberToken = (await createPersonalToken(app.server.ctx, member.id)).token;
    const adminToken = (await createPersonalToken(app.server.ctx, admin.id)).token;
    const get = (token: string, path: string) => app.request('GET', `/api/v2025${path}`, { token });

    const counts = async (token: string) => {
      const list = await get(token, '/folders');
      assert.equal(list.status, 200, list.text);
      const [listed] = list.body.folders;
      const read = await get(token, `/folders/${top.id}`);
      const subRead = await get(token, `/folders/${sub.id}`);
      assert.equal(read.status, 200, read.text);
      return {
        listed: [listed.formsCount, listed.subfolders[0].formsCount],
        read: [read.body.formsCount, read.body.subfolders[0].formsCount],
        sub: subRead.body.formsCount,
      };
    };
    assert.deepEqual(await counts(memberToken), { listed: [1, 0], read: [1, 0], sub: 0 });
    assert.deepEqual(await counts(adminToken), { listed: [2, 1], read: [2, 1], sub: 1 });
    assert.deepEqual(await counts(b.token), { listed: [2, 1], read: [2, 1], sub: 1 });
    // The /api/v2 paths are the same routes.
    const legacy = await app.request('GET', `/api/v2/folders/${top.id}.json`, { token: memberToken });
    assert.equal(legacy.body.formsCount, 1);

    // A form the member makes gives them a level, so it counts at once.
    await app.request('POST', '/api/v2025/forms', { token: memberToken, body: { name: 'Mine', folder: sub.id } });
    assert.deepEqual(await counts(memberToken), { listed: [1, 1], read: [1, 1], sub: 1 });
  });
});
