import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

/** One sensible definition of every field type. */
const everyType = [
  {
    type: 'text',
    label: 'Text',
    attributes: { placeholder: 'Say', minLength: 1, maxLength: 80 },
    defaultValue: 'hi',
    unique: true,
  },
  { type: 'textarea', label: 'Textarea', attributes: { rows: 4, maxLength: 2000 } },
  {
    type: 'name',
    label: 'Name',
    attributes: { showPrefix: true, showMiddle: false },
    defaultValue: { first: 'Ada', last: 'Lovelace' },
    required: true,
  },
  {
    type: 'address',
    label: 'Address',
    attributes: { format: 'international', showCountry: true, defaultCountry: 'US' },
    defaultValue: { city: 'Boston' },
  },
  { type: 'email', label: 'Email', attributes: { confirm: true }, unique: true },
  { type: 'phone', label: 'Phone', attributes: { format: 'us' } },
  { type: 'creditcard', label: 'Card', attributes: { cardTypes: ['visa', 'amex'] } },
  {
    type: 'datetime',
    label: 'When',
    attributes: { format: 'date', minDate: '2026-01-01', maxDate: '2026-12-31' },
    defaultValue: '2026-06-01',
  },
  { type: 'file', label: 'Upload', attributes: { maxFiles: 3, maxFileSize: 5_000_000, allowedTypes: ['pdf', 'png'] } },
  { type: 'signature', label: 'Sign here' },
  { type: 'number', label: 'Age', attributes: { min: 0, max: 130, decimals: 0 }, defaultValue: 30 },
  {
    type: 'select',
    label: 'Plan',
    options: [
      { label: 'Free', value: 'free' },
      { label: 'Pro', value: 'pro' },
    ],
    defaultValue: 'free',
  },
  {
    type: 'radio',
    label: 'Size',
    options: [
      { label: 'S', value: 's' },
      { label: 'M', value: 'm' },
    ],
    attributes: { layout: 'horizontal' },
  },
  {
    type: 'checkbox',
    label: 'Extras',
    options: [
      { label: 'A', value: 'a' },
      { label: 'B', value: 'b' },
    ],
    attributes: { maxSelected: 2 },
    defaultValue: ['a'],
  },
  {
    type: 'matrix',
    label: 'Rate',
    attributes: { rows: ['Speed', 'Price'], columns: ['Bad', 'Good'], multiple: false },
  },
  { type: 'richtext', label: 'Intro', attributes: { html: '<p>Welcome</p>' } },
  { type: 'embed', label: 'Video', attributes: { html: '<iframe src="https://example.com"></iframe>' } },
  { type: 'product', label: 'T-shirt', attributes: { price: 19.5, currency: 'EUR', maxQuantity: 5 } },
  { type: 'section', label: 'Part two', attributes: { text: 'More questions' }, columnSpan: 6, hideLabel: true },
];

describe(`fields (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let formId: number;

  before(async () => {
    app = await startTestApp();
    a = await app.account();
    formId = (await a.post('/forms', { name: 'Fields' })).body.id;
  });
  after(() => app.close());

  it('creates, reads and lists every field type, with attribute defaults filled in', async () => {
    const created = [];
    for (const def of everyType) {
      const res = await a.post(`/forms/${formId}/fields`, def);
      assert.equal(res.status, 200, `${def.type}: ${res.text}`);
      assert.equal(res.body.type, def.type);
      assert.equal(res.body.formId, formId);
      for (const key of [
        'label',
        'defaultValue',
        'options',
        'required',
        'unique',
        'columnSpan',
        'hideLabel',
      ] as const) {
        if (key in def) assert.deepEqual(res.body[key], (def as any)[key], `${def.type}.${key}`);
      }
      for (const [k, v] of Object.entries(def.attributes ?? {}))
        assert.deepEqual(res.body.attributes[k], v, `${def.type}.attributes.${k}`);
      created.push(res.body);
    }
    assert.deepEqual(
      created.map((f) => f.displayOrder),
      everyType.map((_, i) => i),
      'appended in order',
    );
    assert.equal(created.find((f) => f.type === 'file').attributes.maxFiles, 3);
    assert.deepEqual(created.find((f) => f.type === 'signature').attributes, { maxFileSize: 1024 * 1024 });
    assert.equal(created.find((f) => f.type === 'product').attributes.currency, 'EUR');

    const list = await a.get(`/forms/${formId}/fields`);
    assert.equal(list.status, 200);
    assert.equal(list.body.total, everyType.length);
    assert.equal(list.body.pages, 1);
    assert.deepEqual(list.body.fields, created);

    const one = await a.get(`/forms/${formId}/fields/${created[0].id}`);
    assert.deepEqual(one.body, created[0]);
    const unknownQuery = await a.get(`/forms/${formId}/fields?pageSize=5`);
    assert.equal(unknownQuery.status, 400, 'routes without query parameters refuse unknown ones');
    assert.equal(unknownQuery.body.details[0].property, 'query.pageSize');
  });

  it('answers definitions that make no sense with 400 naming the property', async () => {
    const other = (await a.post('/forms', { name: 'Other', fields: [{ type: 'text', label: 'Elsewhere' }] })).body;
    const plan = (await a.get(`/forms/${formId}/fields`)).body.fields.find((f: any) => f.label === 'Plan');
    const section = (await a.get(`/forms/${formId}/fields`)).body.fields.find((f: any) => f.type === 'section');
    const logic = (checks: unknown[]) => ({ action: 'show', conditional: 'all', checks });
    const cases: [unknown, string][] = [
      [{ type: 'hologram', label: 'x' }, 'body.type'],
      [{ label: 'x' }, 'body.type'],
      [{ type: 'text' }, 'body.label'],
      [{ type: 'text', label: 'x', options: [{ label: 'a', value: 'a' }] }, 'body.options'],
      [{ type: 'select', label: 'x' }, 'body.options'],
      [
        {
          type: 'select',
          label: 'x',
          options: [
            { label: 'a', value: 'a' },
            { label: 'b', value: 'a' },
          ],
        },
        'body.options[1].value',
      ],
      [{ type: 'select', label: 'x', options: [{ label: 'a', value: 'a' }], defaultValue: 'zzz' }, 'body.defaultValue'],
      [
        { type: 'checkbox', label: 'x', options: [{ label: 'a', value: 'a' }], defaultValue: ['a', 'q'] },
        'body.defaultValue',
      ],
      [{ type: 'text', label: 'x', attributes: { colour: 'red' } }, 'body.attributes.colour'],
      [{ type: 'text', label: 'x', attributes: { maxLength: 'long' } }, 'body.attributes.maxLength'],
      [{ type: 'text', label: 'x', attributes: { minLength: 10, maxLength: 5 } }, 'body.attributes.minLength'],
      [{ type: 'number', label: 'x', attributes: { min: 10, max: 1 } }, 'body.attributes.min'],
      [{ type: 'number', label: 'x', defaultValue: 'ten' }, 'body.defaultValue'],
      [{ type: 'datetime', label: 'x', attributes: { minDate: '2026-02-30' } }, 'body.attributes.minDate'],
      [
        { type: 'datetime', label: 'x', attributes: { minDate: '2026-05-01', maxDate: '2026-01-01' } },
        'body.attributes.minDate',
      ],
      // Not read by attributes their schema refused: a 400 naming them, not a 500.
      [
        { type: 'datetime', label: 'x', attributes: { format: 'week' }, defaultValue: '2026-01-01' },
        'body.attributes.format',
      ],
      [{ type: 'number', label: 'x', attributes: { max: 'ten' }, defaultValue: 11 }, 'body.attributes.max'],
      [{ type: 'matrix', label: 'x' }, 'body.attributes.rows'],
      [{ type: 'product', label: 'x', attributes: { price: -1 } }, 'body.attributes.price'],
      [{ type: 'file', label: 'x', attributes: { maxFiles: 0 } }, 'body.attributes.maxFiles'],
      [{ type: 'file', label: 'x', defaultValue: 'a.pdf' }, 'body.defaultValue'],
      [{ type: 'name', label: 'x', defaultValue: { nickname: 'Al' } }, 'body.defaultValue'],
      [{ type: 'section', label: 'x', required: true }, 'body.required'],
      [{ type: 'richtext', label: 'x', unique: true }, 'body.unique'],
      [{ type: 'checkbox', label: 'x', options: [{ label: 'a', value: 'a' }], unique: true }, 'body.unique'],
      [{ type: 'text', label: 'x', columnSpan: 13 }, 'body.columnSpan'],
      [
        { type: 'text', label: 'x', logic: logic([{ field: other.fields[0].id, condition: 'equals', option: 'y' }]) },
        'body.logic.checks[0].field',
      ],
      [
        { type: 'text', label: 'x', logic: logic([{ field: 999999, condition: 'equals', option: 'y' }]) },
        'body.logic.checks[0].field',
      ],
      [
        { type: 'text', label: 'x', logic: logic([{ field: section.id, condition: 'empty' }]) },
        'body.logic.checks[0].field',
      ],
      [
        { type: 'text', label: 'x', logic: logic([{ field: plan.id, condition: 'equals', option: 'platinum' }]) },
        'body.logic.checks[0].option',
      ],
      [
        { type: 'text', label: 'x', logic: logic([{ field: plan.id, condition: 'sounds-like', option: 'free' }]) },
        'body.logic.checks[0].condition',
      ],
      [{ type: 'text', label: 'x', logic: logic([]) }, 'body.logic.checks'],
      [{ type: 'text', label: 'x', logic: { action: 'explode', conditional: 'all', checks: [] } }, 'body.logic.action'],
    ];
    const before = (await a.get(`/forms/${formId}/fields`)).body.total;
    for (const [body, property] of cases) {
      const res = await a.post(`/forms/${formId}/fields`, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)} → ${res.status} ${res.text}`);
      assert.equal(res.body.status, 'error');
      assert.ok(
        res.body.details.some((d: any) => d.property === property),
        `${JSON.stringify(body)} should name ${property}, got ${JSON.stringify(res.body.details)}`,
      );
    }
    assert.equal((await a.get(`/forms/${formId}/fields`)).body.total, before, 'no field was written');
  });

  it('takes a default value if and only if the field would take it as a submitted value', async () => {
    const own = (await a.post('/forms', { name: 'Defaults' })).body;
    const abc = [
      { label: 'A', value: 'a' },
      { label: 'B', value: 'b' },
      { label: 'C', value: 'c' },
    ];
    // [definition, default]: each default in its type's shape, some of them not what the field takes.
    const cases: [Record<string, unknown>, unknown][] = [
      [{ type: 'datetime' }, '2026-06-01'],
      [{ type: 'datetime' }, 'soon'],
      [{ type: 'datetime' }, '2026-02-30'],
      [{ type: 'datetime' }, '2026-06-01 10:00'],
      [{ type: 'datetime', attributes: { minDate: '2026-01-01', maxDate: '2026-12-31' } }, '2027-01-01'],
      [{ type: 'datetime', attributes: { format: 'time' } }, '10:30'],
      [{ type: 'datetime', attributes: { format: 'time' } }, '25:00'],
      [{ type: 'datetime', attributes: { format: 'datetime' } }, '2026-06-01 10:30'],
      [{ type: 'datetime', attributes: { format: 'datetime' } }, '2026-06-01'],
      [{ type: 'email' }, 'ada@example.com'],
      [{ type: 'email' }, 'not an email'],
      [{ type: 'email' }, 'ada@example'],
      [{ type: 'phone' }, '+1 (555) 123-4567'],
      [{ type: 'phone' }, 'call me'],
      [{ type: 'phone', attributes: { format: 'us' } }, '+44 20 7946 0958'],
      [{ type: 'number', attributes: { min: 0, max: 130 } }, 30],
      [{ type: 'number', attributes: { min: 0, max: 130 } }, 131],
      [{ type: 'number', attributes: { min: 18 } }, 17],
      [{ type: 'number', attributes: { decimals: 1 } }, 2.5],
      [{ type: 'number', attributes: { decimals: 1 } }, 2.25],
      [{ type: 'text', attributes: { maxLength: 5 } }, 'short'],
      [{ type: 'text', attributes: { maxLength: 5 } }, 'too long'],
      [{ type: 'text', attributes: { minLength: 3 } }, 'ab'],
      [{ type: 'textarea', attributes: { maxLength: 3 } }, 'four'],
      [{ type: 'text' }, ''],
      [{ type: 'checkbox', options: abc, attributes: { maxSelected: 1 } }, ['a', 'b']],
      [{ type: 'checkbox', options: abc, attributes: { minSelected: 2 } }, ['a']],
      [{ type: 'checkbox', options: abc, attributes: { minSelected: 2 } }, ['a', 'c']],
      [{ type: 'select', options: abc }, 'b'],
      [{ type: 'name' }, { first: 'Ada', last: 'Lovelace' }],
      [{ type: 'address' }, { city: 'Boston', zip: '02101' }],
    ];
    let refused = 0;
    for (const [i, [def, value]] of cases.entries()) {
      const what = `${JSON.stringify(def)} with ${JSON.stringify(value)}`;
      const plain = (await a.post(`/forms/${own.id}/fields`, { ...def, label: `Plain ${i}` })).body;
      const submitted = await a.post(`/forms/${own.id}/submissions`, { fields: [{ id: plain.id, value }] });
      assert.ok([200, 400].includes(submitted.status), `${what}: ${submitted.text}`);
      const made = await a.post(`/forms/${own.id}/fields`, { ...def, label: `Default ${i}`, defaultValue: value });
      assert.equal(made.status, submitted.status, `${what}: submitted ${submitted.status}, as a default ${made.text}`);
      if (made.status === 400) {
        refused++;
        assert.equal(made.body.status, 'error');
        assert.equal(made.body.code, 'invalid_field');
        assert.deepEqual(
          made.body.details.map((d: any) => d.property),
          ['body.defaultValue'],
          what,
        );
        // And on a PUT of a field that has none, and in the fields of a new form.
        const put = await a.put(`/forms/${own.id}/fields/${plain.id}`, { defaultValue: value });
        assert.equal(put.status, 400, `${what}: ${put.text}`);
        assert.equal(put.body.code, 'invalid_field');
        assert.equal(put.body.details[0].property, 'body.defaultValue');
        const inForm = await a.post('/forms', { name: 'F', fields: [{ ...def, label: 'x', defaultValue: value }] });
        assert.equal(inForm.status, 400, `${what}: ${inForm.text}`);
        assert.equal(inForm.body.details[0].property, 'body.fields[0].defaultValue');
      } else {
        assert.deepEqual(made.body.defaultValue, value, what);
      }
    }
    assert.equal(refused, 18, 'the cases refuse what they were written to');
    assert.equal(
      (await a.get(`/forms/${own.id}/fields`)).body.fields.filter((f: any) => f.defaultValue !== null).length,
      13,
    );
  });

  it('checks a default against attributes sent alone when it fit the ones before; a stored default that fit no more refuses no other edit', async () => {
    const own = (await a.post('/forms', { name: 'Stale defaults' })).body;
    const age = (
      await a.post(`/forms/${own.id}/fields`, {
        type: 'number',
        label: 'Age',
        attributes: { min: 0, max: 130 },
        defaultValue: 30,
      })
    ).body;
    const lowered = await a.put(`/forms/${own.id}/fields/${age.id}`, { attributes: { min: 0, max: 20 } });
    assert.equal(lowered.status, 400, lowered.text);
    assert.deepEqual(
      lowered.body.details.map((d: any) => d.property),
      ['body.defaultValue'],
    );
    assert.deepEqual((await a.get(`/forms/${own.id}/fields/${age.id}`)).body.attributes, { min: 0, max: 130 });
    const both = await a.put(`/forms/${own.id}/fields/${age.id}`, { attributes: { max: 20 }, defaultValue: 18 });
    assert.equal(both.status, 200, both.text);

    // A default stored before defaults were checked as values (written here as the database held it).
    const email = (await a.post(`/forms/${own.id}/fields`, { type: 'email', label: 'Email' })).body;
    await app.server.ctx.db
      .updateTable('fields')
      .set({ default_value: JSON.stringify('not an email') })
      .where('id', '=', email.id)
      .execute();
    for (const body of [
      { label: 'Your email' },
      { required: true },
      { attributes: { placeholder: 'you@example.com' } },
    ]) {
      const res = await a.put(`/forms/${own.id}/fields/${email.id}`, body);
      assert.equal(res.status, 200, `${JSON.stringify(body)} was refused for a default it did not send: ${res.text}`);
      assert.equal(res.body.defaultValue, 'not an email', 'the stored default stays as it was');
    }
    const resent = await a.put(`/forms/${own.id}/fields/${email.id}`, { defaultValue: 'not an email' });
    assert.equal(resent.status, 400, resent.text);
    assert.equal(resent.body.details[0].property, 'body.defaultValue');
    assert.equal((await a.put(`/forms/${own.id}/fields/${email.id}`, { defaultValue: null })).status, 200);
  });

  it('updates only what is sent, checks the merged definition, and resets type-specific parts on a type change', async () => {
    const field = (
      await a.post(`/forms/${formId}/fields`, {
        type: 'select',
        label: 'Colour',
        options: [{ label: 'Red', value: 'red' }],
      })
    ).body;
    const renamed = await a.put(`/forms/${formId}/fields/${field.id}`, { label: 'Favourite colour', required: true });
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.label, 'Favourite colour');
    assert.equal(renamed.body.required, true);
    assert.deepEqual(renamed.body.options, field.options);

    const bad = await a.put(`/forms/${formId}/fields/${field.id}`, { options: [] });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.details[0].property, 'body.options');

    const retyped = await a.put(`/forms/${formId}/fields/${field.id}`, { type: 'number', attributes: { min: 1 } });
    assert.equal(retyped.status, 200, retyped.text);
    assert.deepEqual(retyped.body.options, []);
    assert.deepEqual(retyped.body.attributes, { min: 1 });
    assert.equal(retyped.body.label, 'Favourite colour');
    assert.equal(retyped.body.required, true, 'flags not sent keep their values');
    const described = await a.put(`/forms/${formId}/fields/${field.id}`, { description: 'Pick one' });
    assert.equal(described.body.required, true);
    assert.equal(described.body.description, 'Pick one');

    for (const body of [{}, { id: 5 }, { formId: 9 }, { created: 'x' }, { label: '' }, { displayOrder: -1 }]) {
      const res = await a.put(`/forms/${formId}/fields/${field.id}`, body);
      assert.equal(res.status, 400, JSON.stringify(body));
    }
    assert.equal((await a.put(`/forms/${formId}/fields/999999`, { label: 'x' })).status, 404);
  });

  it('keeps logic consistent: refers to siblings, cannot refer to itself, and loses checks on a deleted field', async () => {
    const f = (
      await a.post('/forms', {
        name: 'Logic',
        fields: [
          { type: 'radio', label: 'Q1', options: [{ label: 'Yes', value: 'yes' }] },
          { type: 'number', label: 'Q2' },
          { type: 'text', label: 'Q3' },
        ],
      })
    ).body;
    const [q1, q2, q3] = f.fields;
    const self = await a.put(`/forms/${f.id}/fields/${q3.id}`, {
      logic: { action: 'show', conditional: 'all', checks: [{ field: q3.id, condition: 'empty' }] },
    });
    assert.equal(self.status, 400);
    assert.equal(self.body.details[0].property, 'body.logic.checks[0].field');
    const notNumber = await a.put(`/forms/${f.id}/fields/${q3.id}`, {
      logic: {
        action: 'show',
        conditional: 'all',
        checks: [{ field: q2.id, condition: 'greaterthan', option: 'many' }],
      },
    });
    assert.equal(notNumber.status, 400);

    const logic = {
      action: 'hide',
      conditional: 'any',
      checks: [
        { field: q1.id, condition: 'equals', option: 'yes' },
        { field: q2.id, condition: 'greaterthan', option: '3' },
      ],
    };
    const set = await a.put(`/forms/${f.id}/fields/${q3.id}`, { logic });
    assert.equal(set.status, 200);
    assert.deepEqual(set.body.logic, logic);

    const del = await a.delete(`/forms/${f.id}/fields/${q1.id}`);
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { id: q1.id, formId: f.id, type: 'radio', label: 'Q1' });
    assert.deepEqual((await a.get(`/forms/${f.id}/fields/${q3.id}`)).body.logic.checks, [logic.checks[1]]);
    await a.delete(`/forms/${f.id}/fields/${q2.id}`);
    assert.equal(
      (await a.get(`/forms/${f.id}/fields/${q3.id}`)).body.logic,
      null,
      'logic with no checks left is removed',
    );

    assert.equal((await a.get(`/forms/${f.id}/fields/${q1.id}`)).status, 404, 'deleted for good');
    assert.equal((await a.delete(`/forms/${f.id}/fields/${q1.id}`)).status, 404);
    // A field is addressed through its own form only.
    assert.equal((await a.get(`/forms/${formId}/fields/${q3.id}`)).status, 404);
  });

  it('orders by displayOrder and caps a form at 500 fields', async () => {
    const f = (await a.post('/forms', { name: 'Order' })).body;
    await a.post(`/forms/${f.id}/fields`, { type: 'text', label: 'second', displayOrder: 20 });
    await a.post(`/forms/${f.id}/fields`, { type: 'text', label: 'first', displayOrder: 10 });
    await a.post(`/forms/${f.id}/fields`, { type: 'text', label: 'third' });
    assert.deepEqual(
      (await a.get(`/forms/${f.id}/fields`)).body.fields.map((x: any) => [x.label, x.displayOrder]),
      [
        ['first', 10],
        ['second', 20],
        ['third', 21],
      ],
    );

    const many = Array.from({ length: 500 }, (_, i) => ({ type: 'text', label: `Q${i}` }));
    const full = await a.post('/forms', { name: 'Full', fields: many });
    assert.equal(full.status, 200);
    const more = await a.post(`/forms/${full.body.id}/fields`, { type: 'text', label: 'one too many' });
    assert.equal(more.status, 400);
    assert.equal(more.body.code, 'too_many_fields');
    assert.equal(
      (await a.post('/forms', { name: 'Too full', fields: [...many, { type: 'text', label: 'x' }] })).status,
      400,
    );
  });

  it('appends after a field at the largest position at that position, so every field reads back as it can be sent', async () => {
    const f = (await a.post('/forms', { name: 'Last place' })).body;
    const last = await a.post(`/forms/${f.id}/fields`, { type: 'text', label: 'last', displayOrder: 100_000 });
    assert.equal(last.status, 200, last.text);
    const appended = [];
    for (const label of ['after', 'after that']) {
      const res = await a.post(`/forms/${f.id}/fields`, { type: 'text', label });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.displayOrder, 100_000, `${label}: past the largest displayOrder a request may send`);
      appended.push(res.body);
    }
    assert.deepEqual(
      (await a.get(`/forms/${f.id}/fields`)).body.fields.map((x: any) => x.label),
      ['last', 'after', 'after that'],
      'appended fields still come last',
    );
    // A field's record, sent back as it was read, is taken.
    const back = await a.put(`/forms/${f.id}/fields/${appended[0].id}`, { displayOrder: appended[0].displayOrder });
    assert.equal(back.status, 200, back.text);
  });

  it('places a field made with its form without a displayOrder after the fields before it', async () => {
    const made = await a.post('/forms', {
      name: 'Inline order',
      fields: [
        { type: 'text', label: 'A', displayOrder: 10 },
        { type: 'text', label: 'B' },
        { type: 'text', label: 'C' },
        { type: 'text', label: 'D', displayOrder: 5 },
        { type: 'text', label: 'E' },
      ],
    });
    assert.equal(made.status, 200, made.text);
    const expected = [
      ['D', 5],
      ['A', 10],
      ['B', 11],
      ['C', 12],
      ['E', 13],
    ];
    assert.deepEqual(
      made.body.fields.map((x: any) => [x.label, x.displayOrder]),
      expected,
    );
    assert.deepEqual(
      (await a.get(`/forms/${made.body.id}/fields`)).body.fields.map((x: any) => [x.label, x.displayOrder]),
      expected,
    );
  });

  it('marks the form as updated when its fields change', async () => {
    const f = (await a.post('/forms', { name: 'Touch' })).body;
    await new Promise((r) => setTimeout(r, 5));
    await a.post(`/forms/${f.id}/fields`, { type: 'text', label: 'x' });
    assert.ok((await a.get(`/forms/${f.id}`)).body.updated > f.updated);
  });
});
