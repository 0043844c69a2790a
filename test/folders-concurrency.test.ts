/**
 * Changes of one account's folder tree at once (on PostgreSQL they run on connections of their
 * own, and each must check the tree with the other's change in it), and a tree whose stored
 * parents already hold a loop (a database damaged before that, or edited by hand).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { openDatabase, type Db } from '../src/db/database.js';
import { MAX_FOLDER_DEPTH } from '../src/modules/folders/schemas.js';
import {
  dialectName,
  expectStatus,
  startTestApp,
  type Reply,
  type TestAccount,
  type TestApp,
} from './support/helpers.js';
import { ProcessSet, type Served } from './support/processes.js';

type Parents = Map<number, number | null>;

async function storedParents(db: Db, accountId: number): Promise<Parents> {
  const rows = await db.kysely
    .selectFrom('folders')
    .select(['id', 'parent_id'])
    .where('account_id', '=', accountId)
    .execute();
  return new Map(rows.map((r) => [r.id, r.parent_id]));
}

/** The folders whose stored parents lead back to themselves (walked at most once round). */
function loopsIn(parents: Parents): number[] {
  return [...parents.keys()].filter((start) => {
    let at = parents.get(start) ?? null;
    for (let steps = 0; at !== null && steps <= parents.size; steps++) {
      if (at === start) return true;
      at = parents.get(at) ?? null;
    }
    return false;
  });
}

/** The deepest folder's level by the stored parents (1: top level); call after loopsIn found none. */
function deepestLevel(parents: Parents): number {
  let deepest = 0;
  for (const id of parents.keys()) {
    let level = 0;
    for (let at: number | null = id; at !== null; at = parents.get(at) ?? null) level++;
    deepest = Math.max(deepest, level);
  }
  return deepest;
}

/** Exactly one of two answers is a 200 and the other the 400 with code; answers the 200's body. */
function oneWinner(answers: Reply[], code: string, what: string): any {
  const summary = answers.map((r) => `${r.status} ${r.text.slice(0, 200)}`).join(' | ');
  const ok = answers.filter((r) => r.status === 200);
  const refused = answers.filter((r) => r.status === 400 && r.body?.code === code);
  assert.ok(ok.length === 1 && refused.length === 1, `${what}: one 200 and one 400 ${code}, got ${summary}`);
  return ok[0]!.body;
}

describe(`folder tree changes at once (${dialectName})`, () => {
  let app: TestApp;
  // A second instance on the same database, as another process behind a balancer.
  let second: TestApp;

  before(async () => {
    app = await startTestApp();
    second = await startTestApp({}, app);
  });
  after(async () => {
    await second.close();
    await app.close();
  });

  const api = (target: TestApp, a: TestAccount, method: string, path: string, body?: unknown) =>
    target.request(method, `/api/v2025${path}`, { token: a.token, body });

  it('two opposite moves at once: one moves, the other is refused as a loop, and no loop is stored', async () => {
    const a = await app.account();
    for (let round = 0; round < 30; round++) {
      const first = expectStatus(await a.post('/folders', { name: `A${round}` }), 200, 'create A');
      const other = expectStatus(await a.post('/folders', { name: `B${round}` }), 200, 'create B');
      const answers = await Promise.all([
        api(app, a, 'PUT', `/folders/${first.id}`, { parent: other.id }),
        api(second, a, 'PUT', `/folders/${other.id}`, { parent: first.id }),
      ]);
      oneWinner(answers, 'folder_cycle', `round ${round}`);
      const parents = await storedParents(app.server.db, a.accountId);
      assert.deepEqual(loopsIn(parents), [], `round ${round}: a loop stored`);
      const moved = [parents.get(first.id), parents.get(other.id)];
      assert.ok(
        (moved[0] === other.id && moved[1] === null) || (moved[0] === null && moved[1] === first.id),
        `round ${round}: exactly one moved, stored ${JSON.stringify(moved)}`,
      );
    }
  });

  it(`a move and a create at once cannot nest past ${MAX_FOLDER_DEPTH} levels`, async () => {
    const a = await app.account();
    const create = async (name: string, parent: number | null = null): Promise<number> =>
      expectStatus(await a.post('/folders', { name, parent }), 200, `create ${name}`).id;
    for (let round = 0; round < 12; round++) {
      const a1 = await create(`a1-${round}`);
      const a2 = await create(`a2-${round}`, a1);
      const a3 = await create(`a3-${round}`, a2);
      const b1 = await create(`b1-${round}`);
      const b2 = await create(`b2-${round}`, b1);
      // b1 under a3 puts b2 at level 5, and c would be at 6; c first makes b1's subtree 3 high.
      const answers = await Promise.all([
        api(app, a, 'PUT', `/folders/${b1}`, { parent: a3 }),
        api(second, a, 'POST', '/folders', { name: `c-${round}`, parent: b2 }),
      ]);
      oneWinner(answers, 'folder_too_deep', `round ${round}`);
      const parents = await storedParents(app.server.db, a.accountId);
      assert.deepEqual(loopsIn(parents), [], `round ${round}: a loop stored`);
      assert.ok(deepestLevel(parents) <= MAX_FOLDER_DEPTH, `round ${round}: ${deepestLevel(parents)} levels stored`);
    }
  });

  it('moves, creates and deletes all at once in one account leave a tree without loops', async () => {
    const a = await app.account();
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) ids.push(expectStatus(await a.post('/folders', { name: `F${i}` }), 200, 'create').id);
    const pick = (n: number) => ids[(n * 7 + 3) % ids.length]!;
    for (let round = 0; round < 6; round++) {
      const requests: Promise<Reply>[] = [];
      for (let i = 0; i < 8; i++) {
        const target = i % 2 ? app : second;
        requests.push(api(target, a, 'PUT', `/folders/${pick(round + i)}`, { parent: pick(round * 3 + i + 1) }));
      }
      const doomed = pick(round * 5 + 2);
      requests.push(api(second, a, 'DELETE', `/folders/${doomed}`));
      requests.push(api(app, a, 'POST', '/folders', { name: `new-${round}`, parent: pick(round) }));
      const answers = await Promise.all(requests);
      for (const r of answers) {
        const what = `round ${round}: ${r.status} ${r.text.slice(0, 200)}`;
        if (r.status === 400) assert.ok(['folder_cycle', 'folder_too_deep'].includes(r.body.code), what);
        // A move into the folder being deleted, or of it, finds it gone.
        else if (r.status === 404) assert.equal(r.body.code, 'folder_not_found', what);
        else assert.equal(r.status, 200, what);
      }
      expectStatus(answers.at(-2)!, 200, `round ${round}: delete`);
      ids.splice(ids.indexOf(doomed), 1);
      const created = answers.at(-1)!;
      if (created.status === 200) ids.push(created.body.id);
      const parents = await storedParents(app.server.db, a.accountId);
      assert.deepEqual(loopsIn(parents), [], `round ${round}: a loop stored`);
      assert.ok(deepestLevel(parents) <= MAX_FOLDER_DEPTH, `round ${round}: too deep`);
    }
    const list = expectStatus(await a.get('/folders?perPage=100'), 200, 'list');
    const count = (folders: any[]): number => folders.reduce((n, f) => n + 1 + count(f.subfolders), 0);
    assert.equal(count(list.folders), ids.length, 'every folder is in the listing once');
  });

  it("a form put in a folder as the folder is deleted: moves up with the folder's other forms, or finds the folder gone (404), whichever ran first", async () => {
    const a = await app.account();
    const parent = expectStatus(await a.post('/folders', { name: 'Parent' }), 200, 'create parent').id;
    for (let round = 0; round < 20; round++) {
      const doomed = expectStatus(await a.post('/folders', { name: `X${round}`, parent }), 200, 'create X').id;
      const form = expectStatus(await a.post('/forms', { name: `F${round}` }), 200, 'create form').id;
      const source = expectStatus(await a.post('/forms', { name: `S${round}` }), 200, 'create source').id;
      const [moved, copied, created, removed] = await Promise.all([
        api(app, a, 'PUT', `/forms/${form}`, { folder: doomed }),
        api(app, a, 'POST', `/forms/${source}/copy?folder=${doomed}`),
        api(second, a, 'POST', '/forms', { name: `N${round}`, folder: doomed }),
        api(second, a, 'DELETE', `/folders/${doomed}`),
      ]);
      expectStatus(removed, 200, `round ${round}: delete`);
      for (const [what, res, id] of [
        ['move', moved, form],
        ['copy', copied, copied.body?.id],
        ['create', created, created.body?.id],
      ] as const) {
        const at = `round ${round}: ${what} answered ${res.status} ${res.text.slice(0, 200)}`;
        if (res.status === 404) {
          assert.equal(res.body.code, 'folder_not_found', at);
          continue;
        }
        assert.equal(res.status, 200, at);
        const stored = expectStatus(await a.get(`/forms/${id}`), 200, `round ${round}: read ${what}`);
        assert.equal(stored.folder, parent, `${at}: the form is not in the parent its folder's delete moved forms to`);
      }
    }
  });
});

describe(`folders whose stored parents hold a loop (${dialectName})`, () => {
  // A process of its own: a request that loops for ever in it (as before the fix) holds up its
  // process, which here is not the test's, and fails the test when its bound passes.
  const processes = new ProcessSet('folder-loops');
  let served: Served;
  let token: string;
  let db: Db;
  let accountId: number;

  before(async () => {
    await processes.open();
    token = await processes.createAccount('Loops', 'loops@example.com');
    served = await processes.serve({}, ['--no-worker']);
    db = openDatabase({ databaseUrl: processes.env.DATABASE_URL, dataDir: processes.dataDir });
    const account = await db.kysely.selectFrom('accounts').select('id').executeTakeFirstOrThrow();
    accountId = account.id;
  });
  after(async () => {
    await db?.close();
    await processes.close();
  });

  /** Answered within a second (after the route's first answer), or the test fails. */
  const BOUND_MS = 1_000;
  async function call(method: string, path: string, body?: unknown): Promise<Reply> {
    const what = `${method} ${path}`;
    let res: Response;
    try {
      res = await fetch(`${served.url}/api/v2025${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(BOUND_MS),
      });
    } catch (error) {
      throw new Error(`${what} did not answer within ${BOUND_MS} ms`, { cause: error });
    }
    const text = await res.text();
    assert.notEqual(res.status, 500, `${what}: ${text.slice(0, 300)}`);
    return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : undefined };
  }
  const setParent = (id: number, parent: number | null) =>
    db.kysely.updateTable('folders').set({ parent_id: parent }).where('id', '=', id).execute();
  const topIds = (list: any) => list.folders.map((f: any) => f.id).sort((x: number, y: number) => x - y);

  it('lists, reads, creates under, moves and deletes within a second, never a 500, and repairs the loop', async () => {
    const create = async (name: string, parent: number | null = null): Promise<number> =>
      expectStatus(await call('POST', '/folders', { name, parent }), 200, `create ${name}`).id;
    const a = await create('A');
    const b = await create('B');
    const c = await create('C', a);
    // Each route answers once on a sound tree: its first answer compiles its schemas.
    expectStatus(await call('GET', '/folders'), 200, 'list');
    expectStatus(await call('GET', `/folders/${a}`), 200, 'read');
    expectStatus(await call('PUT', `/folders/${c}`, { name: 'C' }), 200, 'rename');
    expectStatus(await call('DELETE', `/folders/${await create('warm-up')}`), 200, 'delete');
    const form = expectStatus(await call('POST', '/forms', { name: 'In B', folder: b }), 200, 'form');

    // The damage: A's parent is B and B's is A.
    await setParent(a, b);
    await setParent(b, a);
    assert.deepEqual(loopsIn(await storedParents(db, accountId)).sort(), [a, b].sort());

    const list = expectStatus(await call('GET', '/folders'), 200, 'list');
    assert.deepEqual(topIds(list), [a, b], 'both folders of the loop at the top level');
    for (const f of list.folders) assert.equal(f.parent, null);
    const readA = expectStatus(await call('GET', `/folders/${a}`), 200, 'read A');
    assert.equal(readA.parent, null);
    assert.deepEqual(
      readA.subfolders.map((f: any) => f.id),
      [c],
      'C stays under A, and B is not shown under A',
    );
    assert.equal(expectStatus(await call('GET', `/folders/${b}`), 200, 'read B').parent, null);

    const child = expectStatus(await call('POST', '/folders', { name: 'child', parent: a }), 200, 'create under A');
    assert.equal(child.parent, a);
    expectStatus(await call('PUT', `/folders/${b}`, { name: 'B renamed' }), 200, 'rename B');
    // A's stored parent sent again is a move back into the loop.
    expectStatus(await call('PUT', `/folders/${a}`, { parent: b }), 400, 'move A into B', 'folder_cycle');

    // Repaired by a move to the top level: B is A's subfolder again.
    const repaired = expectStatus(await call('PUT', `/folders/${a}`, { parent: null }), 200, 'move A to the top');
    assert.equal(repaired.parent, null);
    assert.deepEqual(repaired.subfolders.map((f: any) => f.id).sort(), [b, c, child.id].sort());
    let parents = await storedParents(db, accountId);
    assert.deepEqual(loopsIn(parents), []);
    assert.equal(parents.get(a), null);
    assert.equal(parents.get(b), a);
    assert.deepEqual(topIds(expectStatus(await call('GET', '/folders'), 200, 'list')), [a]);

    // Damaged again, and repaired by deleting one: its subfolders go to the top level, not
    // under the other (which would be a folder that is its own parent).
    await setParent(a, b);
    const deleted = expectStatus(await call('DELETE', `/folders/${b}`), 200, 'delete B');
    assert.deepEqual(deleted, { id: b });
    parents = await storedParents(db, accountId);
    assert.deepEqual(loopsIn(parents), []);
    assert.equal(parents.get(a), null);
    assert.equal(expectStatus(await call('GET', `/forms/${form.id}`), 200, 'the form').folder, null);
    assert.deepEqual(topIds(expectStatus(await call('GET', '/folders'), 200, 'list')), [a]);
  });

  it('shows a folder that is its own parent, or in a longer loop, at the top level until moved', async () => {
    const create = async (name: string, parent: number | null = null): Promise<number> =>
      expectStatus(await call('POST', '/folders', { name, parent }), 200, `create ${name}`).id;
    const self = await create('Self');
    const [x, y, z] = [await create('X'), await create('Y'), await create('Z')];
    const outside = await create('Outside');
    await setParent(self, self);
    await setParent(x, z);
    await setParent(y, x);
    await setParent(z, y);

    const list = expectStatus(await call('GET', '/folders?perPage=100'), 200, 'list');
    for (const id of [self, x, y, z]) assert.ok(topIds(list).includes(id), `${id} at the top level`);
    assert.equal(expectStatus(await call('GET', `/folders/${self}`), 200, 'read').parent, null);
    expectStatus(await call('PUT', `/folders/${self}`, { parent: self }), 400, 'into itself', 'folder_cycle');
    expectStatus(await call('PUT', `/folders/${x}`, { parent: y }), 400, 'X into Y', 'folder_cycle');
    const under = expectStatus(await call('POST', '/folders', { name: 'under Z', parent: z }), 200, 'under Z');
    assert.equal(under.parent, z);
    // A folder from outside the loop may move in; one of the loop may move out.
    expectStatus(await call('PUT', `/folders/${outside}`, { parent: y }), 200, 'Outside into Y');
    expectStatus(await call('PUT', `/folders/${x}`, { parent: outside }), 400, 'X under Outside', 'folder_cycle');
    expectStatus(await call('PUT', `/folders/${self}`, { parent: null }), 200, 'Self to the top');
    expectStatus(await call('PUT', `/folders/${y}`, { parent: null }), 200, 'Y to the top');
    assert.deepEqual(loopsIn(await storedParents(db, accountId)), []);
    const readY = expectStatus(await call('GET', `/folders/${y}`), 200, 'read Y');
    // Y's subfolders: Z (whose subfolder is X, then Under Z's folder) and Outside.
    assert.deepEqual(readY.subfolders.map((f: any) => f.id).sort(), [outside, z].sort());
    assert.deepEqual(
      readY.subfolders
        .find((f: any) => f.id === z)
        .subfolders.map((f: any) => f.id)
        .sort(),
      [x, under.id].sort(),
    );
  });
});
