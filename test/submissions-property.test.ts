/**
 * Random bodies for POST and PUT: every one is answered 200 or 400 (never 500; 413 only
 * for a body over the limit), a refusal leaves every table as it was, and a 200 adds exactly
 * one submission, whose stored values are then found by field search and keyword search.
 * Text with NUL or a lone surrogate, anywhere in the body, is always 400 invalid_characters.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { words } from '../src/modules/submissions/keywords.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { brokenPaths, hostileString, wireSize } from './support/hostile-text.js';
import { body, createEveryFieldForm, ok, rowCounts, type EveryFieldForm } from './support/submission-fixtures.js';

const RUNS = Number(process.env.FORMWORK_PROPERTY_RUNS ?? 150);

/** Strings that some field takes, and near misses. */
const PLAUSIBLE = [
  'Ann',
  'a@b.co',
  'ann@example.com',
  'not an email',
  '(555) 123-4567',
  '+1 555 123 4567',
  '12',
  '7.5',
  '-1',
  '2024-02-29',
  '2026-02-29',
  '23:59',
  '24:00',
  '2026-03-08 02:30',
  '2026-03-08T02:30:00',
  'sales',
  'support',
  'Sales',
  's',
  'm',
  'l',
  'red',
  'green',
  'blue',
  'purple',
  '',
  ' ',
  'x'.repeat(21),
  'Café crème',
  'Zoë Ångström',
  'ĳssel ﬁnance',
  'İstanbul',
  'straße',
  '日本語のテキスト',
  '١٢٣ عربي',
  'emoji 😀 text',
  'a*',
  '"quoted" \'single\'',
  'AND OR NOT NEAR',
  '-minus +plus',
  "O'Brien & co:* | !",
];
const SUBFIELDS = [
  'prefix',
  'first',
  'middle',
  'initial',
  'last',
  'suffix',
  'address',
  'address2',
  'city',
  'state',
  'zip',
  'country',
  'value',
  'subvalues',
  'other',
  'fir\u0000st',
  '\ud800',
];

const scalar = fc.oneof(
  fc.constantFrom(...PLAUSIBLE),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  hostileString,
  fc.integer({ min: -20, max: 20 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
);

const value = fc.oneof(
  { weight: 4, arbitrary: scalar },
  { weight: 3, arbitrary: scalar.map((v) => ({ value: v })) },
  {
    weight: 2,
    arbitrary: fc.array(scalar, { maxLength: 4 }).map((vs) => ({ subvalues: vs.map((v) => ({ subvalue: v })) })),
  },
  { weight: 2, arbitrary: fc.dictionary(fc.constantFrom(...SUBFIELDS), scalar, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.constant({ subvalues: 'red' }),
      fc.constant({ subvalues: [{ value: 'red' }] }),
      fc.constant({ value: 'x', extra: 1 }),
      fc.jsonValue({ maxDepth: 2 }).map((v) => ({ subvalues: [{ subvalue: v }] })),
    ),
  },
);

function entryOf(idChoices: fc.Arbitrary<unknown>) {
  return fc.oneof(
    { weight: 8, arbitrary: fc.record({ id: idChoices, value }) },
    { weight: 1, arbitrary: fc.record({ id: idChoices }) },
    { weight: 1, arbitrary: fc.record({ id: idChoices, value, label: fc.string() }) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  );
}

describe(`random submission bodies (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let every: EveryFieldForm;
  let ids: EveryFieldForm['ids'];
  let idChoices: fc.Arbitrary<unknown>;
  let bodies: fc.Arbitrary<unknown>;

  before(async () => {
    app = await startTestApp();
    a = await app.account('Random');
    every = await createEveryFieldForm(a);
    ids = every.ids;
    const other = await ok(a.post('/forms', { name: 'Other', fields: [{ type: 'text', label: 'Elsewhere' }] }));
    const real = Object.values(ids);
    idChoices = fc.oneof(
      { weight: 10, arbitrary: fc.constantFrom(...real) },
      { weight: 3, arbitrary: fc.constantFrom(...real).map(String) },
      { weight: 1, arbitrary: fc.constant(other.fields[0].id as number) },
      { weight: 1, arbitrary: fc.integer({ min: -3, max: 3_000_000_000 }) },
      { weight: 1, arbitrary: fc.constantFrom('0', '01', '1.0', 'abc', '', '99999999999', ' 1') },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }) },
    );
    const fields = fc.array(entryOf(idChoices), { maxLength: 8 });
    // Values each field takes, with random text where text is free.
    const good: [keyof typeof ids, fc.Arbitrary<unknown>][] = [
      [
        'Name',
        fc.constantFrom<unknown>(
          'Ann',
          { first: 'Zoë', last: 'Ångström' },
          { value: 'İstanbul' },
          { first: '日本語', suffix: 'Jr' },
        ),
      ],
      ['Email', fc.emailAddress()],
      ['Phone', fc.constantFrom('(555) 123-4567', '555.123.4567', { value: '+1 555 123 4567' })],
      ['Count', fc.constantFrom<unknown>(0, 10, 7.5, '3', { value: 9.9 })],
      ['Day', fc.constantFrom('2024-02-29', '2030-12-31', '2020-01-01')],
      ['Clock', fc.constantFrom('00:00', '23:59:59')],
      ['When', fc.constantFrom('2026-03-08 02:30', '2026-11-01T01:30:00')],
      ['Topic', fc.constantFrom<unknown>('sales', { subvalues: [{ subvalue: 'support' }] })],
      ['Size', fc.constantFrom<unknown>('s', { value: 'm' }, { subvalues: [{ subvalue: 'l' }] })],
      ['Colours', fc.constantFrom<unknown>('red', { subvalues: [{ subvalue: 'green' }, { subvalue: 'blue' }] })],
      [
        'Address',
        fc.record(
          {
            city: fc.oneof(
              { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
              { weight: 1, arbitrary: hostileString },
            ),
            country: fc.constantFrom('BR', 'Deutschland'),
          },
          { requiredKeys: [] },
        ),
      ],
      ['Note', fc.string({ unit: 'grapheme', minLength: 2, maxLength: 12 })],
      [
        'Ticket',
        fc.oneof(
          { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 60 }) },
          { weight: 1, arbitrary: hostileString },
        ),
      ],
    ];
    const goodEntry = fc.oneof(...good.map(([label, v]) => v.map((x) => ({ id: ids[label], value: x }))));
    const mostlyGood = fc
      .tuple(
        fc.uniqueArray(goodEntry, { selector: (e) => e.id, maxLength: 7 }),
        fc.oneof({ weight: 2, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: entryOf(idChoices) }),
      )
      .map(([entries, odd]) => [
        { id: ids.Name, value: 'Someone' },
        ...entries.filter((e) => e.id !== ids.Name),
        ...(odd === null ? [] : [odd]),
      ]);
    // Mostly well-formed bodies (with the required name, so that values decide), some not.
    bodies = fc.oneof(
      { weight: 6, arbitrary: mostlyGood.map((f) => ({ fields: f })) },
      { weight: 2, arbitrary: fields.map((f) => ({ fields: [{ id: ids.Name, value: 'Someone' }, ...f] })) },
      { weight: 3, arbitrary: fc.record({ fields }, { requiredKeys: [] }) },
      {
        weight: 2,
        arbitrary: fc.record(
          {
            fields,
            latitude: fc.double({ noNaN: true, min: -200, max: 200 }),
            longitude: fc.oneof(fc.double({ noNaN: true, min: -200, max: 200 }), fc.string()),
          },
          { requiredKeys: ['fields'] },
        ),
      },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    );
  });
  after(() => app.close());

  /** After a 200: each stored value is found by a field search for it and by a keyword search for its first word. */
  async function assertFindable(submission: any, formId: number): Promise<void> {
    for (const entry of submission.data) {
      const shown: string = entry.displayValue;
      const norm = shown.trim().toLowerCase();
      if (norm !== '' && norm.length <= 200) {
        const q = `search[0][fieldId]=${entry.field}&search[0][value]=${encodeURIComponent(shown.endsWith('*') ? `${shown}*` : shown)}&pageSize=100`;
        const found = await ok(a.get(`/forms/${formId}/submissions?${q}`), q);
        assert.ok(
          found.submissions.some((s: any) => s.id === submission.id),
          `field search for ${JSON.stringify(shown)} misses submission ${submission.id}`,
        );
      }
      const word = words(shown)[0];
      if (word !== undefined) {
        const q = `keyword=${encodeURIComponent(word)}&search[0][fieldId]=${entry.field}&search[0][value]=*&pageSize=100`;
        const found = await ok(a.get(`/forms/${formId}/submissions?${q}`), q);
        assert.ok(
          found.submissions.some((s: any) => s.id === submission.id),
          `keyword ${JSON.stringify(word)} misses submission ${submission.id}`,
        );
      }
    }
  }

  /** Checks the answer as far as the body's size and text decide it; otherwise that it is 200 or 400. */
  function assertTextRule(sent: unknown, res: { status: number; text: string; body: any }): void {
    const what = `${res.status} for ${JSON.stringify(sent)?.slice(0, 300)}: ${res.text.slice(0, 300)}`;
    if (wireSize(sent) > app.config.bodyLimit) {
      assert.equal(res.status, 413, what);
      return;
    }
    const broken = brokenPaths(sent);
    if (broken.length > 0) {
      assert.equal(res.status, 400, what);
      assert.equal(res.body.code, 'invalid_characters', what);
      for (const d of res.body.details)
        assert.ok(broken.includes(d.property), `${d.property} is not one of ${JSON.stringify(broken)}: ${what}`);
      return;
    }
    assert.ok(res.status === 200 || res.status === 400, what);
  }

  it('answers POST with 200 or 400; a 400 stores nothing and a 200 one submission', async (t) => {
    const seen = { 200: 0, 400: 0, 413: 0, invalidCharacters: 0 };
    await fc.assert(
      fc.asyncProperty(bodies, async (sent) => {
        const before = await rowCounts(app);
        const countBefore = (await ok(a.get(`/forms/${every.form.id}`))).submissionsCount;
        const res = await a.post(`/forms/${every.form.id}/submissions`, sent);
        assertTextRule(sent, res);
        seen[res.status as 200 | 400 | 413]++;
        if (res.body?.code === 'invalid_characters') seen.invalidCharacters++;
        if (process.env.FORMWORK_PROPERTY_DEBUG && res.status === 400)
          console.log(res.body.code, JSON.stringify(res.body.details?.[0]));
        const afterCounts = await rowCounts(app);
        const countAfter = (await ok(a.get(`/forms/${every.form.id}`))).submissionsCount;
        if (res.status !== 200) {
          assert.equal(res.body.status, 'error');
          assert.ok(
            Array.isArray(res.body.details) || ['invalid_json', 'payload_too_large'].includes(res.body.code),
            res.text,
          );
          assert.deepEqual(afterCounts, before, `a 400 changed the tables: ${JSON.stringify(sent)}`);
          assert.equal(countAfter, countBefore);
        } else {
          const hasEmail = res.body.data.some((e: any) => e.field === ids.Email);
          assert.deepEqual(
            afterCounts,
            {
              submissions: before.submissions + 1,
              uniqueValues: before.uniqueValues + (hasEmail ? 1 : 0),
              fts: before.fts + (dialectName === 'sqlite' ? 1 : 0),
            },
            JSON.stringify(sent),
          );
          assert.equal(countAfter, countBefore + 1);
          assert.deepEqual(await ok(a.get(`/submissions/${res.body.id}`)), res.body);
          await assertFindable(res.body, every.form.id);
        }
      }),
      { numRuns: RUNS },
    );
    t.diagnostic(`outcomes: ${JSON.stringify(seen)}`);
    assert.ok(
      seen[200] > RUNS / 10 && seen[400] > RUNS / 10,
      `both outcomes should be common: ${JSON.stringify(seen)}`,
    );
    assert.ok(seen.invalidCharacters > 0, `no body with NUL or a lone surrogate was tried: ${JSON.stringify(seen)}`);
  });

  it('answers PUT with 200 or 400; a 400 changes nothing and a 200 adds no row', async (t) => {
    const target = await ok(
      a.post(
        `/forms/${every.form.id}/submissions`,
        body(ids, { Name: 'Target', Email: 'target@example.com', Topic: 'sales' }),
      ),
    );
    const seen = { 200: 0, 400: 0, 413: 0 };
    await fc.assert(
      fc.asyncProperty(bodies, async (sent) => {
        const before = await rowCounts(app);
        const stored = await ok(a.get(`/submissions/${target.id}`));
        const res = await a.put(`/submissions/${target.id}`, sent);
        assertTextRule(sent, res);
        seen[res.status as 200 | 400 | 413]++;
        const afterCounts = await rowCounts(app);
        if (res.status !== 200) {
          assert.deepEqual(afterCounts, before, `a 400 changed the tables: ${JSON.stringify(sent)}`);
          assert.deepEqual(await ok(a.get(`/submissions/${target.id}`)), stored);
        } else {
          assert.equal(afterCounts.submissions, before.submissions);
          assert.equal(afterCounts.fts, before.fts);
          assert.deepEqual(await ok(a.get(`/submissions/${target.id}`)), res.body);
          await assertFindable(res.body, every.form.id);
        }
      }),
      { numRuns: Math.ceil(RUNS / 2) },
    );
    t.diagnostic(`outcomes: ${JSON.stringify(seen)}`);
    assert.ok(seen[200] > 0 && seen[400] > 0, JSON.stringify(seen));
  });
});
