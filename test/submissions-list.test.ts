import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { at, body, createEveryFieldForm, ok, setCreated, type EveryFieldForm } from './support/submission-fixtures.js';

const BASE_KEYS = ['formId', 'id', 'latitude', 'longitude', 'remoteAddr', 'timestamp', 'updated', 'userAgent'];

function assertInvalid(res: Reply, property: string, what: string): void {
  assert.equal(res.status, 400, `${what}: ${res.status} ${res.text.slice(0, 300)}`);
  assert.equal(res.body.code, 'validation_failed', what);
  const properties = res.body.details.map((d: any) => d.property);
  assert.ok(
    properties.some((p: string) => p === property || p.startsWith(`${property}.`) || p.startsWith(`${property}[`)),
    `${what}: details should name ${property}, got ${JSON.stringify(properties)}`,
  );
}

/**
 * Instants around the 2026 daylight saving changes in America/New_York, in id order.
 * Spring: 2026-03-08 02:00 EST becomes 03:00 EDT (07:00Z). Autumn: 2026-11-01 02:00 EDT
 * becomes 01:00 EST (06:00Z), so 01:00 to 01:59:59 happen twice.
 */
const TIMES = {
  springDayBefore: '2026-03-08T04:59:59.999Z', // 2026-03-07 23:59:59.999 EST
  springDayStart: '2026-03-08T05:00:00.000Z', // 2026-03-08 00:00 EST
  beforeSkip: '2026-03-08T06:59:59.999Z', // 01:59:59.999 EST
  afterSkip: '2026-03-08T07:00:00.000Z', // 03:00 EDT
  skipped0230: '2026-03-08T07:30:00.000Z', // 03:30 EDT: where 02:30 is read
  skipped0230End: '2026-03-08T07:30:00.999Z',
  skipped0230Next: '2026-03-08T07:30:01.000Z',
  springDayEnd: '2026-03-09T03:59:59.999Z', // 2026-03-08 23:59:59.999 EDT
  springDayAfter: '2026-03-09T04:00:00.000Z', // 2026-03-09 00:00 EDT
  autumnDayBefore: '2026-11-01T03:59:59.999Z', // 2026-10-31 23:59:59.999 EDT
  autumnDayStart: '2026-11-01T04:00:00.000Z', // 2026-11-01 00:00 EDT
  before0130: '2026-11-01T05:29:59.999Z', // 01:29:59.999 EDT
  first0130: '2026-11-01T05:30:00.000Z', // 01:30 EDT
  second0100: '2026-11-01T06:00:00.000Z', // 01:00 EST
  second0130: '2026-11-01T06:30:00.000Z', // 01:30 EST
  second0130End: '2026-11-01T06:30:00.999Z',
  second0130Next: '2026-11-01T06:30:01.000Z',
  autumnDayEnd: '2026-11-02T04:59:59.999Z', // 2026-11-01 23:59:59.999 EST
  autumnDayAfter: '2026-11-02T05:00:00.000Z', // 2026-11-02 00:00 EST
} as const;
type TimeName = keyof typeof TIMES;

/** RFC 4180, as spreadsheets read it. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c === '"' && cell === '') {
      quoted = true;
    } else if (c === ',') {
      row.push(cell);
      cell = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
      i++;
    } else {
      cell += c;
    }
  }
  assert.equal(cell, '', 'the CSV ends with CRLF');
  assert.deepEqual(row, []);
  return rows;
}

describe(`submission listing, search, count and export (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let every: EveryFieldForm;
  let ids: EveryFieldForm['ids'];
  /** Alice, Bob and Carol in the Everything form, in id order. */
  let s1: any, s2: any, s3: any;
  /** A form whose submissions sit at the TIMES above, by name. */
  let timed: { form: any; byName: Record<TimeName, number> };

  const list = async (formId: number, query: string) =>
    ok(a.get(`/forms/${formId}/submissions?${query}`), query) as Promise<any>;
  const listIds = async (formId: number, query: string) =>
    (await list(formId, `pageSize=100&${query}`)).submissions.map((s: any) => s.id) as number[];
  const everyIds = (query: string) => listIds(every.form.id, query);
  const timedIds = (query: string) => listIds(timed.form.id, `order=asc&${query}`);
  const named = (...names: TimeName[]) => names.map((n) => timed.byName[n]);
  const crit = (n: number, fieldId: number, value: string) =>
    `search[${n}][fieldId]=${fieldId}&search[${n}][value]=${encodeURIComponent(value)}`;

  before(async () => {
    app = await startTestApp();
    a = await app.account('Lister');
    every = await createEveryFieldForm(a);
    ids = every.ids;
    const post = (values: Parameters<typeof body>[1]) =>
      ok(a.post(`/forms/${every.form.id}/submissions`, body(ids, values)));
    s1 = await post({
      Name: { first: 'Alice', last: 'Anderson' },
      Email: 'alice@example.com',
      Topic: 'sales',
      Colours: { subvalues: [{ subvalue: 'red' }, { subvalue: 'green' }] },
      Address: { city: 'Boston', state: 'MA' },
      Note: 'Café crème',
      Count: 7.5,
    });
    s2 = await post({
      Name: { first: 'Bob', last: 'Brown' },
      Email: 'bob@example.org',
      Topic: 'support',
      Ticket: 'Printer on fire',
      Colours: 'blue',
      Address: { city: 'New York' },
      Note: 'hello world',
    });
    s3 = await post({
      Name: { first: 'Carol', last: 'Anderson' },
      Email: 'carol@example.com',
      Topic: 'sales',
      Size: 'l',
      Note: 'ALICE knows',
    });

    const form = await ok(a.post('/forms', { name: 'Timed', fields: [{ type: 'text', label: 'Label' }] }));
    const names = (Object.keys(TIMES) as TimeName[]).sort((x, y) => at(TIMES[x]) - at(TIMES[y]));
    const byName = {} as Record<TimeName, number>;
    for (const name of names) {
      const s = await ok(a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: name }] }));
      await setCreated(app, s.id, at(TIMES[name]));
      byName[name] = s.id;
    }
    timed = { form, byName };
  });
  after(() => app.close());

  describe('paging and order', () => {
    let form: any;
    let made: number[];
    before(async () => {
      form = await ok(a.post('/forms', { name: 'Paged', fields: [{ type: 'number', label: 'N' }] }));
      made = [];
      for (let i = 0; i < 30; i++)
        made.push(
          (await ok(a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: i }] }))).id,
        );
    });

    it('pages 25 at a time, newest first, by default', async () => {
      const first = await list(form.id, '');
      assert.deepEqual(
        { ...first, submissions: first.submissions.map((s: any) => s.id) },
        { submissions: made.slice(5).reverse(), total: 30, pages: 2, pageNumber: 1, pageSize: 25 },
      );
      for (const s of first.submissions)
        assert.deepEqual(Object.keys(s).sort(), BASE_KEYS, 'no data or prettyName unless asked for');
      assert.deepEqual(
        (await list(form.id, 'pageNumber=2')).submissions.map((s: any) => s.id),
        made.slice(0, 5).reverse(),
      );
      const beyond = await list(form.id, 'pageNumber=3');
      assert.deepEqual([beyond.submissions, beyond.total, beyond.pages], [[], 30, 2]);
    });

    it('takes pageSize up to 100 and refuses 101', async () => {
      const hundred = await list(form.id, 'pageSize=100');
      assert.equal(hundred.submissions.length, 30);
      assert.deepEqual([hundred.pageSize, hundred.pages], [100, 1]);
      const one = await list(form.id, 'pageSize=1&pageNumber=30');
      assert.deepEqual([one.submissions.map((s: any) => s.id), one.pages], [[made[0]], 30]);
      for (const q of ['pageSize=101', 'pageSize=0', 'pageSize=-1', 'pageSize=ten', 'pageSize=2.5'])
        assertInvalid(await a.get(`/forms/${form.id}/submissions?${q}`), 'query.pageSize', q);
      for (const q of ['pageNumber=0', 'pageNumber=x'])
        assertInvalid(await a.get(`/forms/${form.id}/submissions?${q}`), 'query.pageNumber', q);
    });

    it('orders ascending or descending, in either case', async () => {
      for (const order of ['asc', 'ASC']) assert.deepEqual(await listIds(form.id, `order=${order}`), made, order);
      for (const order of ['desc', 'DESC'])
        assert.deepEqual(await listIds(form.id, `order=${order}`), [...made].reverse(), order);
      assert.deepEqual(
        (await list(form.id, 'order=asc&pageSize=7&pageNumber=3')).submissions.map((s: any) => s.id),
        made.slice(14, 21),
      );
      for (const q of ['order=up', 'order=', 'order=asc&order=desc'])
        assertInvalid(await a.get(`/forms/${form.id}/submissions?${q}`), 'query.order', q);
    });
  });

  describe('data, expandData, prettyName and dataFormat', () => {
    const itemOf = async (query: string) =>
      (await list(every.form.id, `${query}${query ? '&' : ''}order=asc&pageSize=1`)).submissions[0];

    it('adds nothing by default or with the flags false', async () => {
      for (const q of ['', 'data=false', 'data=false&expandData=false&prettyName=false', 'dataFormat=legacy']) {
        assert.deepEqual(Object.keys(await itemOf(q)).sort(), BASE_KEYS, q);
      }
    });

    it('data gives the legacy object keyed by field id', async () => {
      const item = await itemOf('data=true');
      assert.deepEqual(Object.keys(item).sort(), [...BASE_KEYS, 'data'].sort());
      const expected = Object.fromEntries(
        s1.data.map((e: any) => [String(e.field), { field: e.field, value: e.value }]),
      );
      assert.deepEqual(item.data, expected);
      assert.deepEqual((await itemOf('data=true&dataFormat=legacy')).data, expected);
      assert.deepEqual(item.data[String(ids.Colours)], { field: ids.Colours, value: ['red', 'green'] });
    });

    it('expandData gives the legacy object with labels, types and displayed values', async () => {
      const expected = Object.fromEntries(s1.data.map((e: any) => [String(e.field), e]));
      assert.deepEqual((await itemOf('expandData=true')).data, expected);
      assert.deepEqual((await itemOf('data=true&expandData=true')).data, expected);
      assert.deepEqual((await itemOf('data=false&expandData=true')).data, expected);
    });

    it('prettyName adds the name, from the name field', async () => {
      const item = await itemOf('prettyName=true');
      assert.deepEqual(Object.keys(item).sort(), [...BASE_KEYS, 'prettyName'].sort());
      assert.equal(item.prettyName, 'Alice Anderson');
    });

    it('dataFormat=standardized gives the list of the detailed submission', async () => {
      const detail = await ok(a.get(`/submissions/${s1.id}`));
      for (const q of [
        'dataFormat=standardized',
        'dataFormat=standardized&data=true',
        'dataFormat=standardized&expandData=true',
      ]) {
        assert.deepEqual((await itemOf(q)).data, detail.data, q);
      }
      // All of it: the list item is the detailed record.
      assert.deepEqual(await itemOf('dataFormat=standardized&prettyName=true&data=true&expandData=true'), detail);
    });

    it('rejects other values', async () => {
      for (const [q, property] of [
        ['dataFormat=xml', 'query.dataFormat'],
        ['data=maybe', 'query.data'],
        ['expandData=2', 'query.expandData'],
        ['prettyName=yes', 'query.prettyName'],
        ['colour=red', 'query.colour'],
      ] as const) {
        assertInvalid(await a.get(`/forms/${every.form.id}/submissions?${q}`), property, q);
      }
    });
  });

  describe('keyword', () => {
    const kw = (k: string, more = '') => everyIds(`keyword=${encodeURIComponent(k)}&order=asc${more}`);

    it('matches words of any field, in any case, as word prefixes, all of them', async () => {
      assert.deepEqual(await kw('alice'), [s1.id, s3.id], 'a name and a note');
      assert.deepEqual(await kw('ANDERSON'), [s1.id, s3.id]);
      assert.deepEqual(await kw('ande'), [s1.id, s3.id], 'a prefix of a word');
      assert.deepEqual(await kw('nderson'), [], 'not the middle of a word');
      assert.deepEqual(await kw('Alice Anderson'), [s1.id, s3.id]);
      assert.deepEqual(await kw('alice brown'), [], 'every word must appear');
      assert.deepEqual(await kw('bob, BROWN!'), [s2.id]);
      assert.deepEqual(await kw('example.org'), [s2.id], 'an email address');
      assert.deepEqual(await kw('support'), [s2.id], 'the label of the chosen option');
      assert.deepEqual(await kw('green'), [s1.id], 'a checkbox option');
      assert.deepEqual(await kw('boston'), [s1.id], 'an address part');
      assert.deepEqual(await kw('new york'), [s2.id]);
      assert.deepEqual(await kw('7.5'), [s1.id], 'a number');
      assert.deepEqual(await kw('fire'), [s2.id], 'a field shown by logic');
      assert.deepEqual(await kw('cafe creme'), [s1.id], 'without accents');
      assert.deepEqual(await kw('CAFÉ'), [s1.id], 'with accents');
      assert.deepEqual(await kw('zzzz'), []);
    });

    it('counts the matches in total and pages them', async () => {
      const page = await list(every.form.id, 'keyword=anderson&pageSize=1&pageNumber=2');
      assert.deepEqual([page.submissions.map((s: any) => s.id), page.total, page.pages], [[s1.id], 2, 2]);
    });

    it('matches nothing for a keyword with no words, and refuses empty or over-long ones', async () => {
      const none = await list(every.form.id, 'keyword=%21%3F%21');
      assert.deepEqual([none.submissions, none.total], [[], 0]);
      for (const q of ['keyword=', `keyword=${'x'.repeat(201)}`, 'keyword=a&keyword=b'])
        assertInvalid(await a.get(`/forms/${every.form.id}/submissions?${q}`), 'query.keyword', q.slice(0, 30));
    });

    it('finds a very long word by its start', async () => {
      const form = await ok(a.post('/forms', { name: 'Long words', fields: [{ type: 'textarea', label: 'T' }] }));
      const long = `${'abc'.repeat(1000)} ${'ж'.repeat(1500)}`;
      const s = await ok(
        a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: long }] }),
        'a 3000-character word',
      );
      assert.deepEqual(await listIds(form.id, `keyword=${'abc'.repeat(60)}`), [s.id]);
      assert.deepEqual(await listIds(form.id, `keyword=${encodeURIComponent('ж'.repeat(200))}`), [s.id]);
    });

    it('follows edits and deletes', async () => {
      const s = await ok(a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'Dora', Note: 'oldword' })));
      assert.deepEqual(await kw('oldword'), [s.id]);
      await ok(a.put(`/submissions/${s.id}`, body(ids, { Note: 'newword' })));
      assert.deepEqual(await kw('oldword'), []);
      assert.deepEqual(await kw('newword'), [s.id]);
      assert.deepEqual(await kw('dora'), [s.id], 'fields not named in the edit stay searchable');
      await ok(a.delete(`/submissions/${s.id}`));
      assert.deepEqual(await kw('newword'), []);
      assert.deepEqual(await kw('dora'), []);
    });
  });

  describe('field search', () => {
    const find = (...criteria: string[]) => everyIds(`order=asc&${criteria.join('&')}`);

    it('matches whole values in any case, or their start with *', async () => {
      assert.deepEqual(await find(crit(0, ids.Email, 'ALICE@Example.com')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Email, ' alice@example.com ')), [s1.id], 'surrounding space is ignored');
      assert.deepEqual(await find(crit(0, ids.Email, 'alice')), [], 'a part of a value is not the value');
      assert.deepEqual(await find(crit(0, ids.Email, 'alice*')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Email, 'example.com')), []);
      assert.deepEqual(await find(crit(0, ids.Email, '*')), [s1.id, s2.id, s3.id], 'any value at all');
      assert.deepEqual(await find(crit(0, ids.Ticket, '*')), [s2.id]);
      assert.deepEqual(await find(crit(0, ids.Note, 'café crème')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Note, 'cafe creme')), [], 'whole values keep their accents');
      assert.deepEqual(await find(crit(0, ids.Count, '7.5')), [s1.id]);
    });

    it('matches the whole shown value or any part of names, addresses and option lists', async () => {
      assert.deepEqual(await find(crit(0, ids.Name, 'anderson')), [s1.id, s3.id]);
      assert.deepEqual(await find(crit(0, ids.Name, 'Alice Anderson')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Name, 'Ali*')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Address, 'boston')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Address, 'Boston, MA')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Topic, 'sales')), [s1.id, s3.id]);
      assert.deepEqual(await find(crit(0, ids.Topic, 'Support')), [s2.id]);
      assert.deepEqual(await find(crit(0, ids.Colours, 'green')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Colours, 'Red, Green')), [s1.id]);
      assert.deepEqual(await find(crit(0, ids.Size, 'Large')), [s3.id], 'an option by its label');
      assert.deepEqual(await find(crit(0, ids.Size, 'l')), [s3.id], 'and by its value');
      assert.deepEqual(await find(crit(0, ids.Note, 'anderson')), [], 'only in the field named');
    });

    it('needs every criterion to hold', async () => {
      assert.deepEqual(await find(crit(0, ids.Name, 'anderson'), crit(1, ids.Topic, 'sales')), [s1.id, s3.id]);
      assert.deepEqual(await find(crit(0, ids.Name, 'anderson'), crit(1, ids.Size, 'large')), [s3.id]);
      assert.deepEqual(
        await find(crit(3, ids.Name, 'anderson'), crit(7, ids.Email, 'carol*'), crit(1, ids.Topic, 'sales')),
        [s3.id],
      );
      assert.deepEqual(await find(crit(0, ids.Name, 'anderson'), crit(1, ids.Topic, 'support')), []);
    });

    it('takes indexes 0 to 9 and refuses 10', async () => {
      assert.deepEqual(await find(crit(9, ids.Topic, 'support')), [s2.id]);
      const ten = [...Array(10).keys()].map((n) => crit(n, n % 2 ? ids.Name : ids.Topic, n % 2 ? 'anderson' : 'sales'));
      assert.deepEqual(await find(...ten), [s1.id, s3.id], 'ten criteria');
      const url = (q: string) => `/forms/${every.form.id}/submissions?${q}`;
      const tenth = await a.get(url(crit(10, ids.Topic, 'sales')));
      assertInvalid(tenth, 'query.search', 'index 10');
      // Named as the search's other details name an index: in brackets.
      assert.deepEqual(
        tenth.body.details.map((d: any) => d.property),
        ['query.search[10]'],
      );
      assertInvalid(
        await a.get(url([...ten, crit(10, ids.Topic, 'sales')].join('&'))),
        'query.search',
        'eleven criteria',
      );
      for (const q of [
        crit(11, ids.Topic, 'sales'),
        'search[01][fieldId]=1&search[01][value]=x',
        'search[a][fieldId]=1&search[a][value]=x',
        'search[-1][fieldId]=1&search[-1][value]=x',
      ]) {
        assertInvalid(await a.get(url(q)), 'query.search', q);
      }
    });

    it('refuses incomplete or malformed criteria', async () => {
      const url = (q: string) => `/forms/${every.form.id}/submissions?${q}`;
      for (const q of [
        `search[0][fieldId]=${ids.Topic}`,
        'search[0][value]=sales',
        'search[0][fieldId]=abc&search[0][value]=x',
        'search[0][fieldId]=0&search[0][value]=x',
        `search[0][fieldId]=${ids.Topic}&search[0][value]=${'x'.repeat(201)}`,
        `search[0][fieldId]=${ids.Topic}&search[0][value]=x&search[0][mode]=exact`,
        'search[0]=x',
        'search=x',
        `search[0][fieldId]=${ids.Topic}&search[0][value]=a&search[0][value]=b`,
      ]) {
        assertInvalid(await a.get(url(q)), 'query.search', q.slice(0, 60));
      }
      const foreign = await a.get(url(crit(0, 2_000_000_000, 'x')));
      assert.equal(foreign.status, 400);
      assert.deepEqual(foreign.body.details, [
        { property: 'query.search[0].fieldId', message: 'this form has no field 2000000000' },
      ]);
    });

    it('follows edits', async () => {
      const s = await ok(
        a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'Eve', Email: 'eve@example.com' })),
      );
      assert.deepEqual(await find(crit(0, ids.Email, 'eve@example.com')), [s.id]);
      await ok(a.put(`/submissions/${s.id}`, body(ids, { Email: 'eve@example.net' })));
      assert.deepEqual(await find(crit(0, ids.Email, 'eve@example.com')), []);
      assert.deepEqual(await find(crit(0, ids.Email, 'eve@example.net')), [s.id]);
      await ok(a.delete(`/submissions/${s.id}`));
      assert.deepEqual(await find(crit(0, ids.Email, 'eve*')), []);
    });
  });

  describe('minTime and maxTime (America/New_York)', () => {
    it('cover whole Eastern days, 23 hours in spring and 25 in autumn', async () => {
      assert.deepEqual(
        await timedIds('minTime=2026-03-08&maxTime=2026-03-08'),
        named(
          'springDayStart',
          'beforeSkip',
          'afterSkip',
          'skipped0230',
          'skipped0230End',
          'skipped0230Next',
          'springDayEnd',
        ),
      );
      assert.deepEqual(
        await timedIds('minTime=2026-11-01&maxTime=2026-11-01'),
        named(
          'autumnDayStart',
          'before0130',
          'first0130',
          'second0100',
          'second0130',
          'second0130End',
          'second0130Next',
          'autumnDayEnd',
        ),
      );
    });

    it('are inclusive to the millisecond, alone or together', async () => {
      const all = (Object.keys(TIMES) as TimeName[]).sort((x, y) => at(TIMES[x]) - at(TIMES[y]));
      const from = (name: TimeName) => named(...all.slice(all.indexOf(name)));
      const upTo = (name: TimeName) => named(...all.slice(0, all.indexOf(name) + 1));
      assert.deepEqual(await timedIds('minTime=2026-03-08'), from('springDayStart'));
      assert.deepEqual(await timedIds('maxTime=2026-03-08'), upTo('springDayEnd'));
      assert.deepEqual(await timedIds('minTime=2026-03-08 01:59:59'), from('beforeSkip'));
      assert.deepEqual(await timedIds('maxTime=2026-03-08 01:59:59'), upTo('beforeSkip'));
      assert.deepEqual(await timedIds('minTime=2026-11-02 00:00:00'), from('autumnDayAfter'));
      assert.deepEqual(await timedIds('maxTime=2026-10-31'), upTo('autumnDayBefore'));
      assert.deepEqual(await timedIds('minTime=2026-03-09&maxTime=2026-03-08'), [], 'an empty range');
    });

    it('read a time that the spring change skips (2026-03-08 02:30) as one hour later', async () => {
      assert.deepEqual(
        await timedIds('minTime=2026-03-08 02:30:00&maxTime=2026-03-08 02:30:00'),
        named('skipped0230', 'skipped0230End'),
      );
      assert.deepEqual(
        await timedIds('minTime=2026-03-08 03:30:00&maxTime=2026-03-08 03:30:00'),
        named('skipped0230', 'skipped0230End'),
      );
      assert.deepEqual(
        await timedIds('minTime=2026-03-08 02:00:00&maxTime=2026-03-08 02:59:59'),
        named('afterSkip', 'skipped0230', 'skipped0230End', 'skipped0230Next'),
      );
      assert.deepEqual(await timedIds('minTime=2026-03-08 02:30:01&maxTime=2026-03-08 03:00:00'), []);
    });

    it('cover both occurrences of a time that the autumn change repeats (2026-11-01 01:30)', async () => {
      assert.deepEqual(
        await timedIds('minTime=2026-11-01 01:30:00&maxTime=2026-11-01 01:30:00'),
        named('first0130', 'second0100', 'second0130', 'second0130End'),
      );
      assert.deepEqual(
        await timedIds('minTime=2026-11-01 01:30:01&maxTime=2026-11-01 01:59:59'),
        named('second0100', 'second0130', 'second0130End', 'second0130Next'),
      );
      assert.deepEqual(
        await timedIds('minTime=2026-11-01 00:00:00&maxTime=2026-11-01 01:29:59'),
        named('autumnDayStart', 'before0130', 'first0130', 'second0100'),
      );
    });

    it('refuse other formats and dates that do not exist', async () => {
      const bad = [
        '2026-03-08T02:30:00',
        '2026-03-08 02:30',
        '2026-03-08 02:30:00Z',
        '2026-03-08 02:30:00.000',
        '2026-03-08 2:30:00',
        '2026-3-8',
        '03/08/2026',
        '20260308',
        '2026-02-30',
        '2025-02-29',
        '2026-13-01',
        '2026-03-08 24:00:00',
        '2026-03-08 12:60:00',
        '2026-03-08 12:00:60',
        '',
        'yesterday',
      ];
      for (const name of ['minTime', 'maxTime']) {
        for (const value of bad) {
          assertInvalid(
            await a.get(`/forms/${timed.form.id}/submissions?${name}=${encodeURIComponent(value)}`),
            `query.${name}`,
            `${name}=${value}`,
          );
        }
        assertInvalid(
          await a.get(`/forms/${timed.form.id}/submissions?${name}=2026-01-01&${name}=2026-01-02`),
          `query.${name}`,
          `${name} twice`,
        );
      }
      assert.deepEqual(await timedIds('minTime=2024-02-29&maxTime=2024-02-29'), [], 'a leap day exists');
    });
  });

  describe('every parameter together', () => {
    it('applies keyword, field search, time range, order, paging and the data flags at once', async () => {
      const form = await createEveryFieldForm(a, 'Combined');
      const made: any[] = [];
      const when = [
        '2026-03-08T06:00:00Z',
        '2026-03-08T07:15:00Z',
        '2026-03-08T08:00:00Z',
        '2026-03-08T09:00:00Z',
        '2026-03-10T12:00:00Z',
      ];
      for (const [i, t] of when.entries()) {
        const s = await ok(
          a.post(
            `/forms/${form.form.id}/submissions`,
            body(form.ids, {
              Name: { first: `Zed${i}`, last: i % 2 ? 'Odd' : 'Even' },
              Topic: 'sales',
              Note: `combo ${i}`,
            }),
          ),
        );
        await setCreated(app, s.id, at(t));
        made.push(s);
      }
      // Even ones after the skipped hour on 2026-03-08: Zed2 (08:00Z), then Zed4 is on 03-10.
      const q = [
        'keyword=combo',
        crit(0, form.ids.Name, 'even'),
        crit(9, form.ids.Topic, 'sales'),
        'minTime=2026-03-08 02:30:00',
        'maxTime=2026-03-10',
        'order=asc',
        'pageSize=1',
        'pageNumber=2',
        'data=true',
        'expandData=true',
        'prettyName=true',
        'dataFormat=standardized',
      ].join('&');
      const res = await list(form.form.id, q);
      assert.deepEqual([res.total, res.pages, res.pageNumber, res.pageSize], [2, 2, 2, 1]);
      const detail = await ok(a.get(`/submissions/${made[4].id}`));
      assert.deepEqual(res.submissions, [{ ...detail, timestamp: new Date(at(when[4]!)).toISOString() }]);
      const all = await list(
        form.form.id,
        q.replace('pageSize=1&pageNumber=2', 'pageSize=100').replace('order=asc', 'order=desc'),
      );
      assert.deepEqual(
        all.submissions.map((s: any) => s.id),
        [made[4].id, made[2].id],
      );
    });
  });

  describe('count', () => {
    const countOf = async (query: string) => ok(a.get(`/forms/${timed.form.id}/submissions/count?${query}`), query);

    it('counts all without parameters and from startDate on with it alone', async () => {
      assert.deepEqual(await countOf(''), {
        formId: timed.form.id,
        count: Object.keys(TIMES).length,
        from: null,
        to: null,
      });
      assert.deepEqual(await countOf('startDate=2026-11-01'), {
        formId: timed.form.id,
        count: 9,
        from: '2026-11-01T04:00:00.000Z',
        to: null,
      });
      assert.deepEqual(await countOf('startDate=2026-11-01 01:30:00'), {
        formId: timed.form.id,
        count: 7,
        from: TIMES.first0130,
        to: null,
      });
      assert.deepEqual(await countOf('startDate=2026-03-08 02:30:00'), {
        formId: timed.form.id,
        count: 15,
        from: TIMES.skipped0230,
        to: null,
      });
    });

    it('counts whole Eastern days backwards from startDate with lookbackPeriod', async () => {
      assert.deepEqual(await countOf('startDate=2026-03-08&lookbackPeriod=1'), {
        formId: timed.form.id,
        count: 7,
        from: TIMES.springDayStart,
        to: TIMES.springDayEnd,
      });
      assert.deepEqual(await countOf('startDate=2026-11-01&lookbackPeriod=1'), {
        formId: timed.form.id,
        count: 8,
        from: TIMES.autumnDayStart,
        to: TIMES.autumnDayEnd,
      });
      assert.deepEqual(await countOf('startDate=2026-11-01&lookbackPeriod=2'), {
        formId: timed.form.id,
        count: 9,
        from: '2026-10-31T04:00:00.000Z',
        to: TIMES.autumnDayEnd,
      });
      assert.deepEqual(await countOf('startDate=2026-03-10&lookbackPeriod=7'), {
        formId: timed.form.id,
        count: 9,
        from: '2026-03-04T05:00:00.000Z',
        to: '2026-03-11T03:59:59.999Z',
      });
      assert.deepEqual(await countOf('startDate=2026-03-09&lookbackPeriod=1'), {
        formId: timed.form.id,
        count: 1,
        from: TIMES.springDayAfter,
        to: '2026-03-10T03:59:59.999Z',
      });
      // With a time, the last day ends at that second (its last occurrence).
      assert.deepEqual(await countOf('startDate=2026-11-01 01:30:00&lookbackPeriod=1'), {
        formId: timed.form.id,
        count: 6,
        from: TIMES.autumnDayStart,
        to: TIMES.second0130End,
      });
    });

    it('refuses times before 1900 and answers the end of 9999 as the last ISO instant', async () => {
      for (const query of ['startDate=0100-01-03&lookbackPeriod=7', 'startDate=0100-01-01', 'startDate=1899-12-31'])
        assertInvalid(await a.get(`/forms/${timed.form.id}/submissions/count?${query}`), 'query.startDate', query);
      for (const name of ['minTime', 'maxTime'])
        assertInvalid(await a.get(`/forms/${timed.form.id}/submissions?${name}=0099-12-31`), `query.${name}`, name);
      assert.deepEqual(await countOf('startDate=9999-12-31&lookbackPeriod=7'), {
        formId: timed.form.id,
        count: 0,
        from: '9999-12-25T05:00:00.000Z',
        to: '9999-12-31T23:59:59.999Z',
      });
      assert.deepEqual(await timedIds('minTime=1900-01-01&maxTime=9999-12-31'), await timedIds(''));
    });

    it('counts back from today with lookbackPeriod alone', async () => {
      const form = await ok(a.post('/forms', { name: 'Recent', fields: [{ type: 'text', label: 'T' }] }));
      const clock = app.server.ctx.clock;
      const make = () => ok(a.post(`/forms/${form.id}/submissions`, { fields: [] }));
      // Made 8 days ago, 3 days ago and today.
      await make();
      clock.advance(5 * 86_400_000);
      await make();
      clock.advance(3 * 86_400_000);
      await make();
      const now = clock.now();
      const c = async (q: string) => ok(a.get(`/forms/${form.id}/submissions/count?${q}`));
      const week = await c('lookbackPeriod=7');
      assert.equal(week.count, 2);
      assert.ok(Date.parse(week.to) >= now && Date.parse(week.to) - now < 86_400_000, 'to the end of today');
      const days = (Date.parse(week.to) + 1 - Date.parse(week.from)) / 3_600_000;
      assert.ok(days >= 7 * 24 - 1 && days <= 7 * 24 + 1, `seven days of hours: ${days}`);
      assert.equal((await c('lookbackPeriod=1')).count, 1);
      assert.equal((await c('')).count, 3);
    });

    it('takes lookbackPeriod 7 and refuses 8 and other values', async () => {
      assert.equal((await countOf('lookbackPeriod=7')).formId, timed.form.id);
      for (const q of [
        'lookbackPeriod=8',
        'lookbackPeriod=0',
        'lookbackPeriod=-1',
        'lookbackPeriod=1.5',
        'lookbackPeriod=week',
      ]) {
        assertInvalid(await a.get(`/forms/${timed.form.id}/submissions/count?${q}`), 'query.lookbackPeriod', q);
      }
      for (const q of [
        'startDate=2026-02-30',
        'startDate=2026-03-08T00:00:00',
        'startDate=03/08/2026',
        'startDate=2026-03-08 25:00:00',
        'startDate=',
      ]) {
        assertInvalid(await a.get(`/forms/${timed.form.id}/submissions/count?${q}`), 'query.startDate', q);
      }
      assertInvalid(
        await a.get(`/forms/${timed.form.id}/submissions/count?keyword=x`),
        'query.keyword',
        'list filters are not count filters',
      );
    });
  });

  describe('search across forms', () => {
    it('finds keyword matches in every live form of the account, newest first, with their data', async () => {
      const other = await ok(a.post('/forms', { name: 'Another', fields: [{ type: 'name', label: 'Who' }] }));
      const s4 = await ok(
        a.post(`/forms/${other.id}/submissions`, {
          fields: [{ id: other.fields[0].id, value: { first: 'Ann', last: 'Anderson' } }],
        }),
      );
      const res = await ok(a.get('/submissions?search=anderson'));
      assert.deepEqual(
        res.submissions.map((s: any) => s.id),
        [s4.id, s3.id, s1.id],
      );
      assert.deepEqual([res.total, res.pages, res.pageNumber, res.pageSize], [3, 1, 1, 25]);
      assert.deepEqual(
        res.submissions[0],
        await ok(a.get(`/submissions/${s4.id}`)),
        'standardized data and prettyName',
      );
      const page = await ok(a.get('/submissions?search=ANDERSON&pageSize=1&pageNumber=2'));
      assert.deepEqual([page.submissions.map((s: any) => s.id), page.total, page.pages], [[s3.id], 3, 3]);
      assert.deepEqual(
        (await ok(a.get('/submissions?search=ann%20anderson'))).submissions.map((s: any) => s.id),
        [s4.id],
      );
      assert.deepEqual((await ok(a.get('/submissions?search=%2A%2A'))).submissions, []);
    });

    it('needs search and refuses bad paging', async () => {
      for (const [q, property] of [
        ['', 'query.search'],
        ['?search=', 'query.search'],
        [`?search=${'x'.repeat(201)}`, 'query.search'],
        ['?search=a&pageSize=101', 'query.pageSize'],
        ['?search=a&pageNumber=0', 'query.pageNumber'],
        ['?search=a&keyword=b', 'query.keyword'],
      ] as const) {
        assertInvalid(await a.get(`/submissions${q}`), property, q);
      }
      assert.equal((await ok(a.get('/submissions?search=a&pageSize=100'))).pageSize, 100);
    });
  });

  describe('export', () => {
    let form: any;
    let made: any[];
    const tricky = [
      'plain',
      'with, comma',
      'with "quotes"',
      'two\nlines',
      'cr\rhere',
      '=1+2',
      '+SUM(A1)',
      '-3',
      '@cmd',
      '\tTabbed',
      ' =spaced',
      'ünïcødé ✓',
    ];

    before(async () => {
      form = await ok(
        a.post('/forms', {
          name: 'Export',
          fields: [
            { type: 'text', label: '=Label, "quoted"' },
            { type: 'section', label: 'Not a column' },
            {
              type: 'checkbox',
              label: 'Picks',
              options: [
                { label: 'One', value: '1' },
                { label: '=Two', value: '2' },
              ],
            },
            { type: 'number', label: 'N' },
          ],
        }),
      );
      const [text, , picks, n] = form.fields;
      made = [];
      for (const [i, value] of tricky.entries()) {
        const fields = [
          { id: text.id, value },
          ...(i % 3 === 0 ? [{ id: picks.id, value: { subvalues: [{ subvalue: '1' }, { subvalue: '2' }] } }] : []),
          ...(i % 2 === 0 ? [{ id: n.id, value: -i }] : []),
        ];
        made.push(
          await ok(
            a.post(
              `/forms/${form.id}/submissions`,
              { fields },
              { headers: { 'user-agent': i === 0 ? '=HYPERLINK("x")' : 'agent' } },
            ),
          ),
        );
      }
    });

    const exportOf = (query: string) => a.get(`/forms/${form.id}/submissions/export?${query}`);

    it('writes CSV with one column per input field, escaped, with formulas defused', async () => {
      const res = await exportOf('format=csv&order=asc');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'text/csv; charset=utf-8');
      assert.equal(res.headers.get('content-disposition'), `attachment; filename="form-${form.id}-submissions.csv"`);
      assert.ok(
        res.text.startsWith(`id,timestamp,remoteAddr,userAgent,"'=Label, ""quoted""",Picks,N\r\n`),
        res.text.slice(0, 100),
      );
      const rows = parseCsv(res.text);
      assert.deepEqual(rows[0], ['id', 'timestamp', 'remoteAddr', 'userAgent', `'=Label, "quoted"`, 'Picks', 'N']);
      // OWASP's signs, also after leading blanks and line breaks and in full-width form.
      const defuse = (v: string) => (/^(?:[\t\r]|\s*[=+\-@＝＋－＠])/.test(v) ? `'${v}` : v);
      assert.deepEqual(
        rows.slice(1),
        made.map((s, i) => [
          String(s.id),
          s.timestamp,
          s.remoteAddr,
          i === 0 ? `'=HYPERLINK("x")` : 'agent',
          defuse(tricky[i]!),
          i % 3 === 0 ? 'One, =Two' : '',
          i % 2 === 0 ? defuse(String(-i)) : '',
        ]),
      );
      // Spot checks on the raw text.
      assert.ok(res.text.includes(`,"with, comma",`));
      assert.ok(res.text.includes(`,"with ""quotes""",`));
      assert.ok(res.text.includes(`,"two\nlines",`));
      assert.ok(res.text.includes(`,'=1+2,`));
      assert.ok(res.text.includes(`,'-3,`));
      assert.ok(res.text.includes(`,'\tTabbed,`));
      assert.ok(res.text.includes(`,"cr\rhere",`));
      assert.ok(res.text.includes(`,' =spaced,`));
      // CSV is the default format, newest first.
      const byDefault = parseCsv((await exportOf('')).text);
      assert.deepEqual(
        byDefault.slice(1).map((r) => Number(r[0])),
        made.map((s) => s.id).reverse(),
      );
    });

    it('defuses formulas behind leading blanks and line breaks, and in full-width signs', async () => {
      const defused = [
        '\n=HYPERLINK("http://x")',
        '\r\n\t @SUM(1)',
        '  +1',
        '\u3000-2',
        '\u00a0=1',
        '＝1+1',
        '＋1',
        '－1',
        '＠x',
        '\v=1',
      ];
      const kept = ['a=b', 'x\n=y', '1-2', 'mail@example.com', ' plain'];
      const target = await ok(a.post('/forms', { name: 'Formulas', fields: [{ type: 'textarea', label: 'Cell' }] }));
      for (const value of [...defused, ...kept])
        await ok(
          a.post(`/forms/${target.id}/submissions`, { fields: [{ id: target.fields[0].id, value }] }),
          JSON.stringify(value),
        );
      const rows = parseCsv((await a.get(`/forms/${target.id}/submissions/export?format=csv&order=asc`)).text).slice(1);
      assert.deepEqual(
        rows.map((r) => r.at(-1)),
        [...defused.map((v) => `'${v}`), ...kept],
      );
    });

    it('writes NDJSON of the detailed records', async () => {
      const res = await exportOf('format=ndjson&order=asc');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/x-ndjson; charset=utf-8');
      assert.equal(res.headers.get('content-disposition'), `attachment; filename="form-${form.id}-submissions.ndjson"`);
      assert.ok(res.text.endsWith('\n'));
      const lines = res.text
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l));
      assert.equal(lines.length, made.length);
      for (const [i, line] of lines.entries()) assert.deepEqual(line, await ok(a.get(`/submissions/${made[i].id}`)));
    });

    it('takes the list filters', async () => {
      const [text, , picks] = form.fields;
      const idsOf = async (query: string) =>
        (await exportOf(`format=ndjson&${query}`)).text
          .trimEnd()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l).id);
      const csvIds = async (query: string) =>
        parseCsv((await exportOf(`format=csv&${query}`)).text)
          .slice(1)
          .map((r) => Number(r[0]));
      for (const query of [
        'keyword=comma',
        'keyword=two',
        `${crit(0, picks.id, 'one')}`,
        `${crit(0, text.id, 'with*')}&order=asc`,
        `${crit(0, text.id, 'with*')}&keyword=quotes`,
        'order=asc',
      ]) {
        const expected = (await list(form.id, `pageSize=100&${query}`)).submissions.map((s: any) => s.id);
        assert.deepEqual(await idsOf(query), expected, query);
        assert.deepEqual(await csvIds(query), expected, query);
      }
      assert.deepEqual(await idsOf('keyword=lines'), [made[3].id]);
      assert.deepEqual(
        await idsOf('keyword=two&order=asc'),
        [made[0].id, made[3].id, made[6].id, made[9].id],
        'an option label is searched too',
      );

      await setCreated(app, made[1].id, at('2026-03-08T07:30:00Z'));
      assert.deepEqual(await idsOf('minTime=2026-03-08 02:30:00&maxTime=2026-03-08 02:30:00'), [made[1].id]);
      assert.deepEqual(await csvIds('minTime=2026-03-08&maxTime=2026-03-08'), [made[1].id]);

      assert.equal((await exportOf('keyword=nomatch&format=ndjson')).text, '');
      assert.deepEqual(parseCsv((await exportOf('keyword=nomatch')).text).length, 1, 'the header alone');
    });

    it('checks the query before sending anything', async () => {
      for (const [q, property] of [
        ['format=xml', 'query.format'],
        ['minTime=2026-02-30', 'query.minTime'],
        ['maxTime=tomorrow', 'query.maxTime'],
        ['search[10][fieldId]=1&search[10][value]=x', 'query.search'],
        ['pageSize=10', 'query.pageSize'],
        ['keyword=', 'query.keyword'],
        ['order=sideways', 'query.order'],
      ] as const) {
        const res = await exportOf(q);
        assert.match(res.headers.get('content-type') ?? '', /^application\/json/, q);
        assertInvalid(res, property, q);
      }
      const foreign = await exportOf(crit(0, 2_000_000_000, 'x'));
      assert.equal(foreign.status, 400);
    });
  });
});
