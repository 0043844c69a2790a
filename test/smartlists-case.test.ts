import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { engineOf } from '../src/db/engine.js';
import { lowerText } from '../src/db/sqlite-engine.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

/**
 * Smart lists match and sort "without regard to case" for every letter, not ASCII alone, and
 * both databases answer the same: SQLite's own LIKE and lower() fold ASCII letters only.
 */
describe(`smart lists without regard to case, beyond ASCII (${dialectName})`, () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  async function newList(acc: TestAccount, name: string): Promise<{ id: number; name: string }> {
    const res = await acc.post('/smartlists', { name });
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  async function names(acc: TestAccount, path: string): Promise<{ names: string[]; total: number }> {
    const res = await acc.get(path);
    assert.equal(res.status, 200, res.text);
    return { names: res.body.smartLists.map((l: { name: string }) => l.name), total: res.body.total };
  }

  async function labels(acc: TestAccount, path: string): Promise<{ labels: string[]; total: number }> {
    const res = await acc.get(path);
    assert.equal(res.status, 200, res.text);
    return { labels: res.body.options.map((o: { label: string }) => o.label), total: res.body.total };
  }

  it('finds lists by name whatever the case of their letters', async () => {
    const acc = await app.account();
    for (const name of ['zeta', 'Ünïcode', 'Éz', 'éa', 'ΟΔΟΣ', 'İstanbul', 'alpha']) await newList(acc, name);

    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('ü')}`), {
      names: ['Ünïcode'],
      total: 1,
    });
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('Ü')}`), {
      names: ['Ünïcode'],
      total: 1,
    });
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('ÜNÏ')}`), {
      names: ['Ünïcode'],
      total: 1,
    });
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('é')}`), {
      names: ['éa', 'Éz'],
      total: 2,
    });
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('É')}`), {
      names: ['éa', 'Éz'],
      total: 2,
    });
    // Letter by letter, as PostgreSQL's lower(): a capital sigma is σ at a word's end too,
    // and İ is i.
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('οσ')}`), {
      names: ['ΟΔΟΣ'],
      total: 1,
    });
    assert.deepEqual(await names(acc, '/smartlists?query=ist'), { names: ['İstanbul'], total: 1 });
    assert.deepEqual(await names(acc, '/smartlists?query=ZET'), { names: ['zeta'], total: 1 });
  });

  it('sorts lists by their lower-cased names, by code point, and equal names by id', async () => {
    const acc = await app.account();
    const created: { id: number; name: string }[] = [];
    for (const name of ['zeta', 'Ünïcode', 'éa', 'Éz', 'Same', 'alpha', 'SAME', 'same', 'éA']) {
      created.push(await newList(acc, name));
    }
    const expected = ['alpha', 'Same', 'SAME', 'same', 'zeta', 'éa', 'éA', 'Éz', 'Ünïcode'];
    assert.deepEqual(await names(acc, '/smartlists'), { names: expected, total: expected.length });
    // Pages follow the same order, ties included.
    const paged: string[] = [];
    for (let page = 1; page <= 5; page++)
      paged.push(...(await names(acc, `/smartlists?pageSize=2&pageNumber=${page}`)).names);
    assert.deepEqual(paged, expected);
    const same = (await acc.get('/smartlists?query=same')).body.smartLists.map((l: { id: number }) => l.id);
    const ids = created.filter((l) => l.name.toLowerCase() === 'same').map((l) => l.id);
    assert.deepEqual(
      same,
      [...ids].sort((x, y) => x - y),
    );
  });

  it('still matches %, _ and \\ in a query literally', async () => {
    const acc = await app.account();
    for (const name of ['100% Ünïque', '100 Ünïque', 'É_x', 'Éyx', 'back\\SLASH', 'backslash'])
      await newList(acc, name);
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('0% ü')}`), {
      names: ['100% Ünïque'],
      total: 1,
    });
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('%')}`), {
      names: ['100% Ünïque'],
      total: 1,
    });
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('é_')}`), {
      names: ['É_x'],
      total: 1,
    });
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('_')}`), {
      names: ['É_x'],
      total: 1,
    });
    assert.deepEqual(await names(acc, `/smartlists?query=${encodeURIComponent('k\\s')}`), {
      names: ['back\\SLASH'],
      total: 1,
    });
  });

  it('finds options by label whatever the case of their letters, in list order', async () => {
    const acc = await app.account();
    const list = await newList(acc, 'Pastries');
    const bulk = await acc.post(`/smartlists/${list.id}/bulkoptions`, {
      options: [
        { label: 'Éclair', value: '1' },
        { label: 'eclair plain', value: '2' },
        { label: 'Ünder', value: '3' },
        { label: 'ÉCLAIR au café', value: '4' },
        { label: 'éclair', value: '5' },
        { label: '50% ÉCLAIR', value: '6' },
      ],
    });
    assert.equal(bulk.status, 200, bulk.text);
    const base = `/smartlists/${list.id}/options`;
    assert.deepEqual(await labels(acc, `${base}?query=${encodeURIComponent('éclair')}`), {
      labels: ['Éclair', 'ÉCLAIR au café', 'éclair', '50% ÉCLAIR'],
      total: 4,
    });
    assert.deepEqual(await labels(acc, `${base}?query=${encodeURIComponent('ÉCLAIR')}`), {
      labels: ['Éclair', 'ÉCLAIR au café', 'éclair', '50% ÉCLAIR'],
      total: 4,
    });
    assert.deepEqual(await labels(acc, `${base}?query=${encodeURIComponent('ü')}`), { labels: ['Ünder'], total: 1 });
    assert.deepEqual(await labels(acc, `${base}?query=${encodeURIComponent('AU CAFÉ')}`), {
      labels: ['ÉCLAIR au café'],
      total: 1,
    });
    assert.deepEqual(await labels(acc, `${base}?query=${encodeURIComponent('% é')}`), {
      labels: ['50% ÉCLAIR'],
      total: 1,
    });
    assert.deepEqual(await labels(acc, `${base}?query=${encodeURIComponent('é')}&pageSize=2&pageNumber=2`), {
      labels: ['éclair', '50% ÉCLAIR'],
      total: 4,
    });
  });

  it('lists options of one order by id, on both databases', async () => {
    const acc = await app.account();
    const list = await newList(acc, 'Ties');
    const ids: number[] = [];
    for (const label of ['Öl', 'öl', 'ÖL']) {
      const res = await acc.post(`/smartlists/${list.id}/options`, { label, order: 7 });
      assert.equal(res.status, 201, res.text);
      ids.push(res.body.id);
    }
    const res = await acc.get(`/smartlists/${list.id}/options?query=${encodeURIComponent('ö')}`);
    assert.deepEqual(
      res.body.options.map((o: { id: number }) => o.id),
      ids,
    );
  });

  it('finds forms by name whatever the case of their letters (the same search)', async () => {
    const acc = await app.account();
    for (const name of ['Ünïcode form', 'Éz form', 'éa form', 'plain']) {
      const res = await acc.post('/forms', { name });
      assert.equal(res.status, 200, res.text);
    }
    const found = async (search: string) => {
      const res = await acc.get(`/forms?search=${encodeURIComponent(search)}`);
      assert.equal(res.status, 200, res.text);
      return (res.body.forms as { name: string }[]).map((f) => f.name).sort();
    };
    assert.deepEqual(await found('ü'), ['Ünïcode form']);
    assert.deepEqual(await found('é'), ['Éz form', 'éa form']);
    assert.deepEqual(await found('% f'), []);
  });

  it("lowerCase orders by code point whatever the column's collation", async () => {
    const { db } = app.server.ctx;
    const engine = engineOf(db);
    // A linguistic collation would put é beside e; the engine's order is the same on both databases.
    const collated = dialectName === 'postgres' ? sql.raw(' COLLATE "und-x-icu"') : sql.raw('');
    const r = await sql<{
      v: string;
    }>`SELECT v FROM (SELECT 'f' AS v UNION ALL SELECT 'Éa' UNION ALL SELECT 'e' UNION ALL SELECT 'Z' UNION ALL SELECT 'Ü') t ORDER BY ${engine.lowerCase(sql`v${collated}`)}`.execute(
      db,
    );
    assert.deepEqual(
      r.rows.map((row) => row.v),
      ['e', 'f', 'Z', 'Éa', 'Ü'],
    );
    const lowered = await sql<{
      v: string;
    }>`SELECT ${engine.lowerCase(sql<string>`${'ÜNÏCODE ΟΔΟΣ İSTANBUL ẞ Ǆ'}`)} AS v`.execute(db);
    assert.equal(lowered.rows[0]!.v, 'ünïcode οδοσ istanbul ß ǆ');
  });

  it('lowerText lowers letter by letter', () => {
    assert.equal(lowerText('ÜNÏCODE'), 'ünïcode');
    assert.equal(lowerText('ΟΔΟΣ'), 'οδοσ');
    assert.equal(lowerText('İstanbul'), 'istanbul');
    assert.equal(lowerText('ς'), 'ς');
    assert.equal(lowerText('𐐀'), '𐐨');
  });
});
