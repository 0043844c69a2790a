import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { API_PREFIX } from '../src/app.js';
import { requestHash } from '../src/modules/idempotency/service.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import {
  assertHourBounds,
  body,
  createEveryFieldForm,
  ok,
  rowCounts,
  type EveryFieldForm,
} from './support/submission-fixtures.js';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function assertBadRequest(res: Reply, code: string, properties: string[], what: string): void {
  assert.equal(res.status, 400, `${what}: ${res.status} ${res.text.slice(0, 500)}`);
  assert.equal(res.body.status, 'error', what);
  assert.equal(res.body.code, code, `${what}: ${res.text.slice(0, 500)}`);
  assert.deepEqual(
    res.body.details.map((d: any) => d.property),
    properties,
    `${what}: ${JSON.stringify(res.body.details)}`,
  );
}

describe(`submissions (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let every: EveryFieldForm;
  let ids: EveryFieldForm['ids'];
  /** The smallest valid body of the Everything form: the required name. */
  const minimal = () => body(ids, { Name: { first: 'Min' } });

  before(async () => {
    app = await startTestApp();
    a = await app.account('A');
    every = await createEveryFieldForm(a);
    ids = every.ids;
  });
  after(() => app.close());

  const count = async (acc: TestAccount, formId: number) =>
    (await ok(acc.get(`/forms/${formId}`))).submissionsCount as number;

  describe('create and read', () => {
    it('takes every value shape, stores the request metadata and reads back the same record', async () => {
      const sent = {
        fields: [
          { id: ids.Name, value: { prefix: 'Dr', first: ' Ann ', last: 'Lee' } },
          { id: String(ids.Email), value: { value: 'ann@example.com' } },
          { id: ids.Phone, value: '(555) 123-4567' },
          { id: ids.Count, value: 7.5 },
          { id: ids.Day, value: { value: '2024-02-29' } },
          { id: ids.Clock, value: '23:59' },
          { id: ids.When, value: '2026-03-08T02:30' },
          { id: ids.Topic, value: { subvalues: [{ subvalue: 'support' }] } },
          { id: ids.Size, value: { value: 'm' } },
          { id: ids.Colours, value: { subvalues: [{ subvalue: 'red' }, { subvalue: 'blue' }, { subvalue: 'red' }] } },
          {
            id: ids.Address,
            value: { address: '1 Main St', city: 'Springfield', state: 'IL', zip: '62701', country: '' },
          },
          { id: ids.Note, value: 42 },
          { id: ids.Ticket, value: { value: 'Please call back' } },
        ],
        latitude: 40.7128,
        longitude: -74.006,
      };
      const started = Date.now();
      const created = await a.post(`/forms/${every.form.id}/submissions`, sent, {
        headers: { 'user-agent': 'FormworkTest/1.0' },
      });
      assert.equal(created.status, 200, created.text);
      const s = created.body;
      assert.equal(typeof s.id, 'number');
      assert.equal(s.formId, every.form.id);
      assert.match(s.timestamp, ISO);
      assert.ok(Date.parse(s.timestamp) >= started - 1000 && Date.parse(s.timestamp) <= Date.now() + 1000);
      assert.equal(s.updated, s.timestamp);
      assert.equal(s.userAgent, 'FormworkTest/1.0');
      assert.match(s.remoteAddr, /^(::ffff:)?127\.0\.0\.1$/);
      assert.equal(s.latitude, 40.7128);
      assert.equal(s.longitude, -74.006);
      assert.equal(s.prettyName, 'Dr Ann Lee');
      const byLabel = Object.fromEntries(s.data.map((e: any) => [e.label, e]));
      assert.deepEqual(
        s.data.map((e: any) => e.label),
        [
          'Name',
          'Email',
          'Phone',
          'Count',
          'Day',
          'Clock',
          'When',
          'Topic',
          'Size',
          'Colours',
          'Address',
          'Note',
          'Ticket',
        ],
        'in field order, input fields only',
      );
      assert.deepEqual(byLabel.Name, {
        field: ids.Name,
        label: 'Name',
        type: 'name',
        value: { prefix: 'Dr', first: 'Ann', last: 'Lee' },
        displayValue: 'Dr Ann Lee',
        parsedValue: { prefix: 'Dr', first: 'Ann', last: 'Lee' },
      });
      assert.equal(byLabel.Email.value, 'ann@example.com');
      assert.equal(byLabel.Phone.value, '(555) 123-4567');
      assert.equal(byLabel.Count.value, 7.5);
      assert.equal(byLabel.Count.displayValue, '7.5');
      assert.equal(byLabel.Day.value, '2024-02-29');
      assert.equal(byLabel.Clock.value, '23:59');
      assert.equal(byLabel.When.value, '2026-03-08 02:30');
      assert.deepEqual([byLabel.Topic.value, byLabel.Topic.displayValue], [['support'], 'Support']);
      assert.deepEqual([byLabel.Size.value, byLabel.Size.displayValue], ['m', 'Medium']);
      assert.deepEqual([byLabel.Colours.value, byLabel.Colours.displayValue], [['red', 'blue'], 'Red, Blue']);
      assert.deepEqual(byLabel.Address.value, { address: '1 Main St', city: 'Springfield', state: 'IL', zip: '62701' });
      assert.equal(byLabel.Address.displayValue, '1 Main St, Springfield, IL 62701');
      assert.equal(byLabel.Note.value, '42');
      assert.equal(byLabel.Ticket.value, 'Please call back');

      const read = await a.get(`/submissions/${s.id}`);
      assert.equal(read.status, 200);
      assert.deepEqual(read.body, s);
      // The legacy path reads the same.
      assert.deepEqual((await app.request('GET', `/api/v2/submissions/${s.id}.json`, { token: a.token })).body, s);
    });

    it('leaves latitude and longitude null when not sent and takes a bare string name', async () => {
      const s = await ok(
        a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'Solo', Email: 'solo@example.com' })),
      );
      assert.equal(s.latitude, null);
      assert.equal(s.longitude, null);
      assert.equal(s.prettyName, 'Solo');
      assert.deepEqual(s.data.find((e: any) => e.field === ids.Name).value, { first: 'Solo' });
    });

    it('derives prettyName from the email when there is no name', async () => {
      const form = await ok(
        a.post('/forms', {
          name: 'Email only',
          fields: [
            { type: 'email', label: 'Mail' },
            { type: 'text', label: 'T' },
          ],
        }),
      );
      const s = await ok(
        a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: 'x@example.org' }] }),
      );
      assert.equal(s.prettyName, 'x@example.org');
      const none = await ok(
        a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[1].id, value: 'hello' }] }),
      );
      assert.equal(none.prettyName, null);
      const empty = await ok(a.post(`/forms/${form.id}/submissions`, { fields: [] }));
      assert.deepEqual(empty.data, []);
    });

    it('rejects latitude and longitude out of range', async () => {
      const before = await rowCounts(app);
      for (const [extra, property] of [
        [{ latitude: 90.0001 }, 'body.latitude'],
        [{ latitude: -91 }, 'body.latitude'],
        [{ longitude: 180.5 }, 'body.longitude'],
        [{ longitude: -181 }, 'body.longitude'],
        [{ latitude: '40' }, 'body.latitude'],
      ] as const) {
        const res = await a.post(`/forms/${every.form.id}/submissions`, { ...minimal(), ...extra });
        assertBadRequest(res, 'validation_failed', [property], JSON.stringify(extra));
      }
      const edge = await ok(
        a.post(`/forms/${every.form.id}/submissions`, { ...minimal(), latitude: -90, longitude: 180 }),
      );
      assert.deepEqual([edge.latitude, edge.longitude], [-90, 180]);
      assert.equal((await rowCounts(app)).submissions, before.submissions + 1);
    });
  });

  describe('checks every value', () => {
    // [field, value sent, message pattern]
    const bad: [keyof EveryFieldForm['ids'], unknown, RegExp][] = [
      ['Email', 'not-an-email', /must be an email address/],
      ['Email', 'a@b', /must be an email address/],
      ['Email', 'a b@example.com', /must be an email address/],
      ['Email', { value: 42 }, /must be an email address/],
      ['Phone', 'call me', /must be a phone number/],
      ['Phone', '12345', /must be a phone number/],
      ['Phone', '+44 20 7946 0958', /10-digit US phone number/],
      ['Count', -0.1, /at least 0/],
      ['Count', 10.1, /at most 10/],
      ['Count', 1.25, /at most 1 decimals/],
      ['Count', 'abc', /must be a number/],
      ['Count', true, /must be a number/],
      ['Count', ' ', /must be a number/],
      ['Day', '2026-02-29', /must be a date as YYYY-MM-DD/],
      ['Day', '2026/01/01', /must be a date/],
      ['Day', '01-01-2026', /must be a date/],
      ['Day', '2019-12-31', /must not be before 2020-01-01/],
      ['Day', '2031-01-01', /must not be after 2030-12-31/],
      ['Day', 20260101, /must be a date/],
      ['Clock', '24:00', /must be a time/],
      ['Clock', '12:60', /must be a time/],
      ['Clock', '7:30', /must be a time/],
      ['Clock', '12:00:60', /must be a time/],
      ['When', '2026-01-01', /must be a datetime/],
      ['When', '2026-01-01 25:00', /must be a datetime/],
      ['When', '2026-13-01 10:00', /must be a datetime/],
      ['Topic', 'billing', /"billing" is not one of the options \(sales, support\)/],
      ['Topic', 'Sales', /is not one of the options/],
      ['Topic', { subvalues: [{ subvalue: 'sales' }, { subvalue: 'support' }] }, /takes one option/],
      ['Topic', { subvalues: 'sales' }, /subvalues must be a list/],
      ['Topic', { subvalues: [{ value: 'sales' }] }, /each subvalue must be/],
      ['Topic', { subvalues: [{ subvalue: 'sales', extra: 1 }] }, /each subvalue must be/],
      ['Size', 'xl', /"xl" is not one of the options/],
      ['Size', { subvalues: [{ subvalue: 's' }, { subvalue: 'm' }] }, /takes one option/],
      ['Colours', { subvalues: [{ subvalue: 'purple' }] }, /"purple" is not one of the options/],
      [
        'Colours',
        { subvalues: [{ subvalue: 'red' }, { subvalue: 'green' }, { subvalue: 'blue' }] },
        /at most 2 options/,
      ],
      ['Colours', { subvalues: [{ subvalue: { deep: 'red' } }] }, /must be a string/],
      ['Name', { nickname: 'Al' }, /has no subfield "nickname"/],
      ['Name', { first: { deep: 1 } }, /must be a string/],
      ['Name', { first: 'x'.repeat(501) }, /at most 500 characters/],
      ['Name', 42, /must be an object of prefix, first/],
      ['Address', '1 Main St', /must be an object of address, address2, city/],
      ['Address', { street: '1 Main St' }, /has no subfield "street"/],
      ['Note', 'x', /at least 2 characters/],
      ['Note', 'x'.repeat(21), /at most 20 characters/],
      ['Note', { text: 'hello' }, /must be \{"value": \.\.\.\}/],
      ['Note', { value: 'hi', extra: true }, /must be \{"value": \.\.\.\}/],
      ['Note', true, /must be a string/],
      ['Note', ['hi', 'there'], /must be a string/],
      ['Note', { value: { value: 'hi' } }, /must be a string/],
      ['Intro', 'anything', /a section field takes no value/],
      ['Blurb', { value: '<b>x</b>' }, /a richtext field takes no value/],
      ['Intro', null, /a section field takes no value/],
    ];

    it('answers 400 naming the field for each bad value, and stores nothing', async () => {
      const before = await rowCounts(app);
      const countBefore = await count(a, every.form.id);
      for (const [label, value, message] of bad) {
        const what = `${label} = ${JSON.stringify(value)}`;
        const res = await a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'Someone', [label]: value }));
        const property = `body.fields[${label === 'Name' ? 0 : 1}].value`;
        assertBadRequest(res, 'invalid_submission', [property], what);
        assert.match(res.body.details[0].message, new RegExp(`^${label} \\(${ids[label]}\\): `), what);
        assert.match(res.body.details[0].message, message, what);
        assert.equal(res.body.error, `${property}: ${res.body.details[0].message}`, what);
      }
      assert.deepEqual(await rowCounts(app), before);
      assert.equal(await count(a, every.form.id), countBefore);
    });

    it('accepts the boundary values next to the rejected ones', async () => {
      const good: [keyof EveryFieldForm['ids'], unknown, unknown][] = [
        ['Count', 0, 0],
        ['Count', 10, 10],
        ['Count', '9.5', 9.5],
        ['Count', { value: 0.1 }, 0.1],
        ['Day', '2020-01-01', '2020-01-01'],
        ['Day', '2030-12-31', '2030-12-31'],
        ['Clock', '00:00:59', '00:00:59'],
        ['When', '2026-11-01 01:30:00', '2026-11-01 01:30:00'],
        ['Phone', '+1 555 123 4567', '+1 555 123 4567'],
        ['Phone', '555.123.4567', '555.123.4567'],
        ['Email', ' Padded@Example.com ', 'Padded@Example.com'],
        ['Topic', 'sales', ['sales']],
        ['Topic', { value: 'sales' }, ['sales']],
        ['Size', { subvalues: [{ subvalue: 'l' }] }, 'l'],
        ['Colours', 'green', ['green']],
        ['Colours', { subvalues: [] }, undefined],
        ['Note', 'xy', 'xy'],
        ['Note', 'x'.repeat(20), 'x'.repeat(20)],
        ['Note', '', undefined],
        ['Note', { value: null }, undefined],
        ['Address', { city: 'Paris', country: 'FR' }, { city: 'Paris', country: 'FR' }],
        ['Address', {}, undefined],
      ];
      for (const [label, value, stored] of good) {
        const what = `${label} = ${JSON.stringify(value)}`;
        const res = await a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'Someone', [label]: value }));
        assert.equal(res.status, 200, `${what}: ${res.text}`);
        assert.deepEqual(res.body.data.find((e: any) => e.field === ids[label])?.value, stored, what);
      }
    });

    it('names every offending field in one answer: unknown ids, repeated ids, bad values, fields that take no value', async () => {
      const other = await ok(a.post('/forms', { name: 'Other', fields: [{ type: 'text', label: 'Elsewhere' }] }));
      const before = await rowCounts(app);
      const res = await a.post(`/forms/${every.form.id}/submissions`, {
        fields: [
          { id: ids.Name, value: 'Ok' },
          { id: 2_000_000_000, value: 'x' },
          { id: ids.Email, value: 'nope' },
          { id: other.fields[0].id, value: 'x' },
          { id: ids.Intro, value: 'x' },
          { id: ids.Name, value: 'Again' },
          { id: String(ids.Count), value: 99 },
        ],
      });
      assertBadRequest(
        res,
        'invalid_submission',
        [
          'body.fields[1].id',
          'body.fields[2].value',
          'body.fields[3].id',
          'body.fields[4].value',
          'body.fields[5].id',
          'body.fields[6].value',
        ],
        'several problems',
      );
      const messages = res.body.details.map((d: any) => d.message);
      assert.equal(messages[0], 'this form has no field 2000000000');
      assert.equal(
        messages[2],
        `this form has no field ${other.fields[0].id}`,
        'a field of another form is no field of this one',
      );
      assert.equal(messages[4], `field ${ids.Name} is given twice`);
      assert.deepEqual(await rowCounts(app), before);
    });

    it('rejects bodies of the wrong shape with validation_failed', async () => {
      const before = await rowCounts(app);
      const cases: [unknown, string][] = [
        [{}, 'body.fields'],
        [{ fields: {} }, 'body.fields'],
        [{ fields: [{ value: 'x' }] }, 'body.fields[0].id'],
        [{ fields: [{ id: ids.Note }] }, 'body.fields[0].value'],
        [{ fields: [{ id: ids.Note, value: 'x', label: 'Note' }] }, 'body.fields[0].label'],
        [{ fields: [{ id: 0, value: 'x' }] }, 'body.fields[0].id'],
        [{ fields: [{ id: 'abc', value: 'x' }] }, 'body.fields[0].id'],
        [{ fields: [{ id: '012', value: 'x' }] }, 'body.fields[0].id'],
        [{ fields: [{ id: 1.5, value: 'x' }] }, 'body.fields[0].id'],
        [{ fields: ['x'] }, 'body.fields[0]'],
        [{ fields: [], extra: 1 }, 'body.extra'],
      ];
      for (const [sent, property] of cases) {
        const res = await a.post(`/forms/${every.form.id}/submissions`, sent);
        assert.equal(res.status, 400, JSON.stringify(sent));
        assert.equal(res.body.code, 'validation_failed', JSON.stringify(sent));
        assert.ok(
          res.body.details.some((d: any) => d.property === property),
          `${JSON.stringify(sent)} should name ${property}: ${JSON.stringify(res.body.details)}`,
        );
      }
      assert.deepEqual(await rowCounts(app), before);
    });

    it('rejects file uploads, which are not taken yet', async () => {
      const form = await ok(a.post('/forms', { name: 'Files', fields: [{ type: 'file', label: 'Upload' }] }));
      const res = await a.post(`/forms/${form.id}/submissions`, {
        fields: [{ id: form.fields[0].id, value: { subvalues: [{ subvalue: 'key' }] } }],
      });
      assertBadRequest(res, 'invalid_submission', ['body.fields[0].value'], 'file');
    });
  });

  describe('required fields and logic', () => {
    it('names every missing required field', async () => {
      const res = await a.post(`/forms/${every.form.id}/submissions`, body(ids, { Topic: 'support' }));
      assertBadRequest(
        res,
        'required_field_missing',
        [`body.fields(id=${ids.Name})`, `body.fields(id=${ids.Ticket})`],
        'two missing',
      );
      assert.equal(res.body.details[0].message, `Name (${ids.Name}) is required`);
    });

    it('treats empty values as missing', async () => {
      for (const empty of [
        '',
        null,
        { value: null },
        { value: '' },
        {},
        { first: '' },
        { first: null, last: '' },
        [],
      ]) {
        const res = await a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: empty }));
        assertBadRequest(res, 'required_field_missing', [`body.fields(id=${ids.Name})`], JSON.stringify(empty));
      }
    });

    it('does not require a field that its logic hides', async () => {
      // Ticket shows only when Topic is support.
      await ok(a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'N' })), 'no topic');
      await ok(a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'N', Topic: 'sales' })), 'sales');
      const missing = await a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'N', Topic: 'support' }));
      assertBadRequest(missing, 'required_field_missing', [`body.fields(id=${ids.Ticket})`], 'support without ticket');
      await ok(
        a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'N', Topic: 'support', Ticket: 'Help' })),
        'support with ticket',
      );
    });

    it('follows hide logic and chains of logic', async () => {
      const form = await ok(
        a.post('/forms', {
          name: 'Chain',
          fields: [
            {
              type: 'radio',
              label: 'Member',
              options: [
                { label: 'Yes', value: 'yes' },
                { label: 'No', value: 'no' },
              ],
            },
            { type: 'number', label: 'Age' },
          ],
        }),
      );
      const [member, age] = form.fields;
      // Number: required unless hidden, hidden when Member is no.
      const number = await ok(
        a.post(`/forms/${form.id}/fields`, {
          type: 'text',
          label: 'Number',
          required: true,
          logic: {
            action: 'hide',
            conditional: 'any',
            checks: [{ field: member.id, condition: 'equals', option: 'no' }],
          },
        }),
      );
      // Card: shown when Number is not empty and Age is greater than 17; required.
      const card = await ok(
        a.post(`/forms/${form.id}/fields`, {
          type: 'text',
          label: 'Card',
          required: true,
          logic: {
            action: 'show',
            conditional: 'all',
            checks: [
              { field: number.id, condition: 'notempty' },
              { field: age.id, condition: 'greaterthan', option: '17' },
            ],
          },
        }),
      );
      const post = (values: [number, unknown][]) =>
        a.post(`/forms/${form.id}/submissions`, { fields: values.map(([id, value]) => ({ id, value })) });
      await ok(post([[member.id, 'no']]), 'Number hidden, so Card hidden');
      await ok(
        post([
          [member.id, 'no'],
          [number.id, 'N1'],
          [age.id, 30],
        ]),
        'a value in hidden Number counts as empty for Card',
      );
      assertBadRequest(
        await post([[member.id, 'yes']]),
        'required_field_missing',
        [`body.fields(id=${number.id})`],
        'Number shown',
      );
      await ok(
        post([
          [member.id, 'yes'],
          [number.id, 'N1'],
          [age.id, 17],
        ]),
        'Card hidden at 17',
      );
      assertBadRequest(
        await post([
          [member.id, 'yes'],
          [number.id, 'N1'],
          [age.id, 18],
        ]),
        'required_field_missing',
        [`body.fields(id=${card.id})`],
        'Card shown at 18',
      );
      await ok(
        post([
          [member.id, 'yes'],
          [number.id, 'N1'],
          [age.id, 18],
          [card.id, 'C'],
        ]),
        'all given',
      );
    });
  });

  describe('unique fields', () => {
    it('refuses a value already submitted, without regard to case or surrounding space', async () => {
      const first = await ok(
        a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'U1', Email: 'unique@example.com' })),
      );
      const before = await rowCounts(app);
      for (const email of ['unique@example.com', 'UNIQUE@example.COM', '  unique@example.com ']) {
        const res = await a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'U2', Email: email }));
        assertBadRequest(res, 'not_unique', [`body.fields(id=${ids.Email})`], email);
        assert.match(res.body.details[0].message, /must be unique/);
      }
      assert.deepEqual(await rowCounts(app), before);

      // The same value in another form is fine.
      const other = await createEveryFieldForm(a, 'Other unique');
      await ok(
        a.post(`/forms/${other.form.id}/submissions`, body(other.ids, { Name: 'U3', Email: 'unique@example.com' })),
      );

      // Editing: another submission may not take it; the holder may keep it.
      const second = await ok(
        a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'U4', Email: 'second@example.com' })),
      );
      assertBadRequest(
        await a.put(`/submissions/${second.id}`, body(ids, { Email: 'Unique@Example.com' })),
        'not_unique',
        [`body.fields(id=${ids.Email})`],
        'edit',
      );
      await ok(
        a.put(`/submissions/${first.id}`, body(ids, { Email: 'UNIQUE@example.com', Note: 'kept' })),
        'holder keeps its value',
      );

      // Deleted, the value is free again.
      await ok(a.delete(`/submissions/${first.id}`));
      await ok(a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'U5', Email: 'unique@example.com' })));
    });
  });

  describe('edit', () => {
    it('changes only the fields named, checked as on create', async () => {
      const s = await ok(
        a.post(
          `/forms/${every.form.id}/submissions`,
          body(ids, { Name: { first: 'Edit', last: 'Me' }, Note: 'before', Count: 3, Topic: 'sales' }),
        ),
      );
      await new Promise((r) => setTimeout(r, 5));
      const edited = await a.put(`/submissions/${s.id}`, body(ids, { Note: 'after', Count: null }));
      assert.equal(edited.status, 200, edited.text);
      const values = Object.fromEntries(edited.body.data.map((e: any) => [e.label, e.value]));
      assert.deepEqual(values, { Name: { first: 'Edit', last: 'Me' }, Note: 'after', Topic: ['sales'] });
      assert.equal(edited.body.timestamp, s.timestamp);
      assert.ok(edited.body.updated > s.updated, 'updated moves on');
      assert.equal(edited.body.userAgent, s.userAgent);
      assert.deepEqual((await a.get(`/submissions/${s.id}`)).body, edited.body);

      // Each of these fails and changes nothing.
      const cases: [unknown, string, string[]][] = [
        [body(ids, { Name: null }), 'required_field_missing', [`body.fields(id=${ids.Name})`]],
        [body(ids, { Topic: 'support' }), 'required_field_missing', [`body.fields(id=${ids.Ticket})`]],
        [body(ids, { Note: 'ok', Count: 11 }), 'invalid_submission', ['body.fields[1].value']],
        [{ fields: [{ id: 2_000_000_000, value: 'x' }] }, 'invalid_submission', ['body.fields[0].id']],
        [body(ids, { Intro: 'x' }), 'invalid_submission', ['body.fields[0].value']],
        [{ fields: [] }, 'validation_failed', ['body.fields']],
        [{ fields: [{ id: ids.Note, value: 'x' }], latitude: 1 }, 'validation_failed', ['body.latitude']],
      ];
      for (const [sent, code, properties] of cases)
        assertBadRequest(await a.put(`/submissions/${s.id}`, sent), code, properties, JSON.stringify(sent));
      assert.deepEqual((await a.get(`/submissions/${s.id}`)).body, edited.body);

      // Showing Ticket by logic requires it; given together it passes.
      const support = await ok(a.put(`/submissions/${s.id}`, body(ids, { Topic: 'support', Ticket: 'now needed' })));
      assert.deepEqual(support.data.find((e: any) => e.label === 'Ticket').value, 'now needed');
    });

    it('does not change the submission count', async () => {
      const before = await count(a, every.form.id);
      const s = await ok(a.post(`/forms/${every.form.id}/submissions`, minimal()));
      await ok(a.put(`/submissions/${s.id}`, body(ids, { Note: 'edited' })));
      assert.equal(await count(a, every.form.id), before + 1);
    });
  });

  describe('delete', () => {
    it('deletes permanently, with its index rows, and the count follows', async () => {
      const s = await ok(
        a.post(
          `/forms/${every.form.id}/submissions`,
          body(ids, { Name: 'Gone', Email: 'gone@example.com', Topic: 'sales' }),
        ),
      );
      const before = await rowCounts(app);
      const countBefore = await count(a, every.form.id);
      const res = await a.delete(`/submissions/${s.id}`);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { id: s.id, formId: every.form.id, deleted: true });
      const afterCounts = await rowCounts(app);
      assert.equal(afterCounts.submissions, before.submissions - 1);
      assert.equal(afterCounts.uniqueValues, before.uniqueValues - 1, 'the unique email is gone');
      if (dialectName === 'sqlite') assert.equal(afterCounts.fts, before.fts - 1);
      const db = app.server.db.kysely;
      assert.equal(
        (
          await db
            .selectFrom('submission_unique_values')
            .select('submission_id')
            .where('submission_id', '=', s.id)
            .execute()
        ).length,
        0,
      );
      assert.equal(await count(a, every.form.id), countBefore - 1);

      for (const [method, path] of [
        ['GET', `/submissions/${s.id}`],
        ['PUT', `/submissions/${s.id}`],
        ['DELETE', `/submissions/${s.id}`],
      ] as const) {
        const r = await app.request(method, `${API_PREFIX}${path}`, {
          token: a.token,
          body: method === 'PUT' ? body(ids, { Note: 'xx' }) : undefined,
        });
        assert.equal(r.status, 404, `${method} ${path}`);
        assert.equal(r.body.code, 'submission_not_found');
      }
      assert.equal((await ok(a.get(`/forms/${every.form.id}/submissions?keyword=gone`))).total, 0);
      assert.equal(await count(a, every.form.id), countBefore - 1, 'a second delete changes nothing');
    });
  });

  describe('form states', () => {
    it('answers 409 form_inactive for an inactive form and stores nothing; other routes still work', async () => {
      const { form, ids: fids } = await createEveryFieldForm(a, 'Inactive');
      const s = await ok(a.post(`/forms/${form.id}/submissions`, body(fids, { Name: 'Before' })));
      await ok(a.put(`/forms/${form.id}`, { inactive: true }));
      const before = await rowCounts(app);
      const res = await a.post(`/forms/${form.id}/submissions`, body(fids, { Name: 'During' }));
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'form_inactive');
      // Even a bad body: the form's state is the first answer.
      assert.equal(
        (await a.post(`/forms/${form.id}/submissions`, body(fids, { Count: 'x' }))).body.code,
        'form_inactive',
      );
      assert.deepEqual(await rowCounts(app), before);
      assert.equal(await count(a, form.id), 1);
      assert.equal((await a.get(`/submissions/${s.id}`)).status, 200);
      assert.equal((await ok(a.get(`/forms/${form.id}/submissions`))).total, 1);
      await ok(a.put(`/forms/${form.id}`, { inactive: false }));
      await ok(a.post(`/forms/${form.id}/submissions`, body(fids, { Name: 'After' })));
      assert.equal(await count(a, form.id), 2);
    });

    it('answers 409 form_full at the submission limit', async () => {
      const form = await ok(
        a.post('/forms', { name: 'Limited', settings: { submissionLimit: 2 }, fields: [{ type: 'text', label: 'T' }] }),
      );
      const post = () => a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: 'x' }] });
      await ok(post());
      const second = await ok(post());
      const full = await post();
      assert.equal(full.status, 409);
      assert.equal(full.body.code, 'form_full');
      await ok(a.delete(`/submissions/${second.id}`));
      await ok(post(), 'room again after a delete');
      // A limited form's creates are made in a transaction: their hours bound their ids too.
      await assertHourBounds(app.server.db.kysely, form.id);
    });

    it('answers 404 for every submission route of a deleted form, and serves them again once restored', async () => {
      const { form, ids: fids } = await createEveryFieldForm(a, 'To delete');
      const s = await ok(a.post(`/forms/${form.id}/submissions`, body(fids, { Name: 'Kept', Note: 'findme' })));
      await ok(a.delete(`/forms/${form.id}`));
      const before = await rowCounts(app);
      const routes: [string, string, unknown?][] = [
        ['POST', `/forms/${form.id}/submissions`, body(fids, { Name: 'New' })],
        ['GET', `/forms/${form.id}/submissions`],
        ['GET', `/forms/${form.id}/submissions/count`],
        ['GET', `/forms/${form.id}/submissions/export`],
        ['GET', `/submissions/${s.id}`],
        ['PUT', `/submissions/${s.id}`, body(fids, { Note: 'changed' })],
        ['DELETE', `/submissions/${s.id}`],
      ];
      for (const [method, path, sent] of routes) {
        const res = await app.request(method, `${API_PREFIX}${path}`, { token: a.token, body: sent });
        assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
        assert.match(res.body.code, /^(form|submission)_not_found$/);
      }
      assert.equal((await ok(a.get('/submissions?search=findme'))).total, 0, 'the account search skips deleted forms');
      assert.deepEqual(await rowCounts(app), before);

      await ok(a.post(`/forms/${form.id}/restore`));
      assert.deepEqual(
        (await ok(a.get(`/submissions/${s.id}`))).data.find((e: any) => e.label === 'Note').value,
        'findme',
      );
      assert.equal((await ok(a.get('/submissions?search=findme'))).total, 1);
      assert.equal(await count(a, form.id), 1);
    });

    // A create first tries the definition the process kept for the form, unread (see
    // createSubmission): each step below changes the form after a create has kept its
    // definition, so that the next create meets one that is out of date.
    it('checks each create against the form as it is now, after its fields change', async () => {
      const form = await ok(a.post('/forms', { name: 'Changing', fields: [{ type: 'text', label: 'T' }] }));
      const t = form.fields[0].id as number;
      const post = (fields: { id: number; value: string }[]) => a.post(`/forms/${form.id}/submissions`, { fields });
      await ok(post([{ id: t, value: 'first' }]));

      const r = (await ok(a.post(`/forms/${form.id}/fields`, { type: 'text', label: 'R', required: true })))
        .id as number;
      assertBadRequest(
        await post([{ id: t, value: 'without R' }]),
        'required_field_missing',
        [`body.fields(id=${r})`],
        'R is now required',
      );
      await ok(
        post([
          { id: t, value: 'with R' },
          { id: r, value: 'r' },
        ]),
      );

      await ok(a.put(`/forms/${form.id}/fields/${r}`, { required: false, unique: true }));
      await ok(
        post([
          { id: t, value: 'unique r' },
          { id: r, value: 'once' },
        ]),
      );
      const again = await post([
        { id: t, value: 'unique r again' },
        { id: r, value: 'once' },
      ]);
      assertBadRequest(again, 'not_unique', [`body.fields(id=${r})`], 'a value taken under the kept definition');

      await ok(a.delete(`/forms/${form.id}/fields/${t}`));
      const gone = await post([{ id: t, value: 'to a deleted field' }]);
      assert.equal(gone.status, 400, `a value for a field deleted since: ${gone.text}`);

      await ok(a.put(`/forms/${form.id}`, { settings: { submissionLimit: 3 } }));
      const full = await post([{ id: r, value: 'over the limit' }]);
      assert.equal(full.status, 409, full.text);
      assert.equal(full.body.code, 'form_full');
      await ok(a.put(`/forms/${form.id}`, { settings: {} }));
      await ok(post([{ id: r, value: 'no limit now' }]));

      const list = await ok(a.get(`/forms/${form.id}/submissions`));
      assert.equal(list.total, 4);
      assert.equal(await count(a, form.id), 4);
    });
  });

  describe('submissionsCount', () => {
    it('matches the stored rows after creates, failures, replays and deletes', async () => {
      const form = await ok(
        a.post('/forms', {
          name: 'Counted',
          fields: [{ type: 'number', label: 'N', required: true, attributes: { max: 100 } }],
        }),
      );
      const fid = form.fields[0].id;
      const post = (n: unknown, headers?: Record<string, string>) =>
        a.post(`/forms/${form.id}/submissions`, { fields: [{ id: fid, value: n }] }, { headers });
      const made: number[] = [];
      for (let i = 0; i < 6; i++) made.push((await ok(post(i))).id);
      assert.equal((await post(101)).status, 400);
      assert.equal((await post(null)).status, 400);
      await ok(post(50, { 'idempotency-key': 'count-1' }));
      await ok(post(50, { 'idempotency-key': 'count-1' }));
      await ok(a.delete(`/submissions/${made[0]}`));
      await ok(a.delete(`/submissions/${made[3]}`));
      // Concurrent creates and deletes.
      const concurrent = await Promise.all([...Array(8).keys()].map((i) => post(i)));
      for (const r of concurrent) assert.equal(r.status, 200);
      await Promise.all([made[1], made[2]].map((id) => ok(a.delete(`/submissions/${id}`))));
      const rows = await app.server.db.kysely
        .selectFrom('submissions')
        .select('id')
        .where('form_id', '=', form.id)
        .execute();
      assert.equal(rows.length, 6 - 2 + 1 + 8 - 2);
      assert.equal(await count(a, form.id), rows.length);
      assert.equal((await ok(a.get(`/forms/${form.id}/submissions`))).total, rows.length);
      assert.equal((await ok(a.get(`/forms/${form.id}/submissions/count`))).count, rows.length);
    });
  });

  describe('cross-account', () => {
    it("answers 404 to another account on every submission route and changes nothing of A's", async () => {
      const b = await app.account('B');
      const bForm = await ok(b.post('/forms', { name: 'B form', fields: [{ type: 'text', label: 'B text' }] }));
      const s = await ok(
        a.post(`/forms/${every.form.id}/submissions`, body(ids, { Name: 'Private', Note: 'zebrafish' })),
      );
      const snapshot = async () => ({
        s: await ok(a.get(`/submissions/${s.id}`)),
        list: await ok(a.get(`/forms/${every.form.id}/submissions?expandData=true&pageSize=100`)),
        count: await count(a, every.form.id),
      });
      const before = await snapshot();
      const routes: [string, string, unknown?][] = [
        ['GET', `/submissions/${s.id}`],
        ['PUT', `/submissions/${s.id}`, body(ids, { Note: 'hacked' })],
        ['DELETE', `/submissions/${s.id}`],
        ['POST', `/forms/${every.form.id}/submissions`, body(ids, { Name: 'Intruder' })],
        ['GET', `/forms/${every.form.id}/submissions`],
        ['GET', `/forms/${every.form.id}/submissions?keyword=zebrafish&data=true`],
        ['GET', `/forms/${every.form.id}/submissions/count`],
        ['GET', `/forms/${every.form.id}/submissions/count?lookbackPeriod=7`],
        ['GET', `/forms/${every.form.id}/submissions/export`],
        ['GET', `/forms/${every.form.id}/submissions/export?format=ndjson`],
      ];
      for (const [method, path, sent] of routes) {
        for (const prefix of [API_PREFIX, '/api/v2']) {
          const res = await app.request(method, `${prefix}${path}`, { token: b.token, body: sent });
          assert.equal(res.status, 404, `${method} ${prefix}${path}: ${res.text}`);
          assert.ok(
            !res.text.includes('zebrafish') && !res.text.includes('Private'),
            `${method} ${path} leaks A's data`,
          );
        }
      }
      const search = await ok(b.get('/submissions?search=zebrafish'));
      assert.deepEqual([search.total, search.submissions], [0, []]);
      assert.equal((await ok(a.get('/submissions?search=zebrafish'))).total, 1);

      // A's field ids in B's own form are just not fields of it: the same answer as ids that exist nowhere.
      const withA = await b.post(`/forms/${bForm.id}/submissions`, { fields: [{ id: ids.Note, value: 'x' }] });
      const withNone = await b.post(`/forms/${bForm.id}/submissions`, { fields: [{ id: 2_000_000_000, value: 'x' }] });
      assert.equal(withA.status, 400);
      assert.equal(withA.body.details[0].message, `this form has no field ${ids.Note}`);
      assert.equal(withNone.body.details[0].message, 'this form has no field 2000000000');
      const searchA = await b.get(
        `/forms/${bForm.id}/submissions?search[0][fieldId]=${ids.Note}&search[0][value]=zebrafish`,
      );
      assert.equal(searchA.status, 400);
      assert.ok(!searchA.text.includes('zebrafish'));

      assert.deepEqual(await snapshot(), before);
    });
  });

  describe('Idempotency-Key', () => {
    const path = () => `/forms/${every.form.id}/submissions`;
    const post = (sent: unknown, key?: string, acc: TestAccount = a, to = path()) =>
      acc.post(to, sent, key === undefined ? undefined : { headers: { 'idempotency-key': key } });
    const submissionsOf = async (formId: number) =>
      (await app.server.db.kysely.selectFrom('submissions').select('id').where('form_id', '=', formId).execute())
        .length;

    it('refuses a value nested thousands deep with a 400, with a key or without, and stores nothing', async () => {
      const before = await submissionsOf(every.form.id);
      // Deeper than JSON.stringify goes (JSON.parse takes it): the key's hash once made it a 500.
      const deep = '['.repeat(20_000) + ']'.repeat(20_000);
      const raw = `{"fields":[{"id":${ids.Note},"value":${deep}}]}`;
      for (const key of ['key-deep', undefined]) {
        const res = await a.post(path(), undefined, { raw, headers: key ? { 'idempotency-key': key } : {} });
        assert.equal(res.status, 400, `${key}: ${res.text.slice(0, 200)}`);
      }
      assert.equal(await submissionsOf(every.form.id), before);
    });

    it('replays the first response for the same key and body, without a second submission', async () => {
      const sent = body(ids, { Name: 'Idem', Note: 'once' });
      const before = await submissionsOf(every.form.id);
      const first = await post(sent, 'key-replay');
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      for (let i = 0; i < 2; i++) {
        const again = await post(sent, 'key-replay');
        assert.equal(again.status, 200);
        assert.equal(again.headers.get('idempotent-replayed'), 'true');
        assert.match(again.headers.get('content-type') ?? '', /^application\/json/);
        assert.deepEqual(again.body, first.body);
      }
      // The legacy path is the same request.
      const legacy = await app.request('POST', `/api/v2${path()}.json`, {
        token: a.token,
        body: sent,
        headers: { 'idempotency-key': 'key-replay' },
      });
      assert.equal(legacy.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(legacy.body, first.body);
      assert.equal(await submissionsOf(every.form.id), before + 1);
      // Without a key, the same body makes a new submission.
      assert.notEqual((await ok(post(sent))).id, first.body.id);
    });

    it('answers 422 for the same key with another body or another form', async () => {
      const sent = body(ids, { Name: 'Idem', Note: 'first' });
      await ok(post(sent, 'key-other'));
      const before = await rowCounts(app);
      const other = await post(body(ids, { Name: 'Idem', Note: 'second' }), 'key-other');
      assert.equal(other.status, 422);
      assert.equal(other.body.code, 'idempotency_key_reused');
      const otherForm = await ok(a.post('/forms', { name: 'Elsewhere', fields: [{ type: 'text', label: 'T' }] }));
      const elsewhere = await post({ fields: [] }, 'key-other', a, `/forms/${otherForm.id}/submissions`);
      assert.equal(elsewhere.status, 422);
      assert.deepEqual(await rowCounts(app), before);
    });

    it('keeps keys apart per account', async () => {
      const b = await app.account('B idem');
      const bForm = await ok(b.post('/forms', { name: 'B', fields: [{ type: 'text', label: 'T' }] }));
      const mine = await ok(post(minimal(), 'shared-key'));
      const theirs = await post(
        { fields: [{ id: bForm.fields[0].id, value: 'b' }] },
        'shared-key',
        b,
        `/forms/${bForm.id}/submissions`,
      );
      assert.equal(theirs.status, 200);
      assert.equal(theirs.headers.get('idempotent-replayed'), null);
      assert.notEqual(theirs.body.id, mine.id);
    });

    it('answers 409 while the first request with the key is still running, and takes over a stale claim', async () => {
      const db = app.server.db.kysely;
      const clock = app.server.ctx.clock;
      const sent = body(ids, { Name: 'Running' });
      const hash = requestHash(app.config.secretKey, 'POST', `${API_PREFIX}${path()}`, sent);
      const before = await rowCounts(app);
      await db
        .insertInto('idempotency_keys')
        .values({
          account_id: a.accountId,
          idem_key: 'key-running',
          request_hash: hash,
          state: 'running',
          created_at: clock.now(),
        })
        .execute();
      const res = await post(sent, 'key-running');
      assert.equal(res.status, 409, res.text);
      assert.equal(res.body.code, 'idempotency_in_progress');
      // Another body with the key is still a 422.
      assert.equal((await post(body(ids, { Name: 'Other' }), 'key-running')).status, 422);
      assert.deepEqual(await rowCounts(app), before);

      // A claim left by a process that died more than a minute ago is taken over.
      clock.advance(61_000);
      const taken = await post(sent, 'key-running');
      assert.equal(taken.status, 200, taken.text);
      assert.equal(taken.headers.get('idempotent-replayed'), null);
      assert.equal((await rowCounts(app)).submissions, before.submissions + 1);
      assert.equal((await post(sent, 'key-running')).headers.get('idempotent-replayed'), 'true');
    });

    it('answers 409 or the first response to concurrent retries, with one submission in all', async () => {
      const sent = body(ids, { Name: 'Concurrent' });
      const before = await submissionsOf(every.form.id);
      const replies = await Promise.all([...Array(6).keys()].map(() => post(sent, 'key-concurrent')));
      const statuses = replies.map((r) => r.status);
      assert.ok(
        statuses.every((s) => s === 200 || s === 409),
        JSON.stringify(statuses),
      );
      const created = replies.filter((r) => r.status === 200);
      assert.ok(created.length >= 1);
      assert.equal(new Set(created.map((r) => r.body.id)).size, 1);
      for (const r of replies.filter((x) => x.status === 409)) assert.equal(r.body.code, 'idempotency_in_progress');
      assert.equal(await submissionsOf(every.form.id), before + 1);
    });

    it('replays for 24 hours, even once the form is inactive, then forgets the key', async () => {
      const sent = body(ids, { Name: 'Expiring' });
      const first = await ok(post(sent, 'key-expiring'));
      app.server.ctx.clock.advance(24 * 3_600_000 - 60_000);
      await ok(a.put(`/forms/${every.form.id}`, { inactive: true }));
      try {
        const replay = await post(sent, 'key-expiring');
        assert.equal(replay.status, 200, 'the stored response, not form_inactive');
        assert.equal(replay.headers.get('idempotent-replayed'), 'true');
        assert.deepEqual(replay.body, first);
      } finally {
        await ok(a.put(`/forms/${every.form.id}`, { inactive: false }));
      }
      app.server.ctx.clock.advance(61_000);
      const later = await post(sent, 'key-expiring');
      assert.equal(later.status, 200);
      assert.equal(later.headers.get('idempotent-replayed'), null);
      assert.notEqual(later.body.id, first.id);
    });

    it('releases the key when the first request fails, so a corrected retry goes through', async () => {
      const before = await rowCounts(app);
      const failed = await post(body(ids, { Name: 'Retry', Count: 99 }), 'key-failing');
      assert.equal(failed.status, 400);
      assert.deepEqual(await rowCounts(app), before);
      const fixed = await post(body(ids, { Name: 'Retry', Count: 9 }), 'key-failing');
      assert.equal(fixed.status, 200, fixed.text);
      // An inactive form fails too, and does not keep the key.
      const { form, ids: fids } = await createEveryFieldForm(a, 'Idem inactive');
      await ok(a.put(`/forms/${form.id}`, { inactive: true }));
      const closed = await post(body(fids, { Name: 'x' }), 'key-inactive', a, `/forms/${form.id}/submissions`);
      assert.equal(closed.status, 409);
      await ok(a.put(`/forms/${form.id}`, { inactive: false }));
      const open = await post(body(fids, { Name: 'x' }), 'key-inactive', a, `/forms/${form.id}/submissions`);
      assert.equal(open.status, 200);
      assert.equal(open.headers.get('idempotent-replayed'), null);
    });

    it('rejects keys that are empty, too long or not visible ASCII', async () => {
      const before = await rowCounts(app);
      for (const key of ['', 'x'.repeat(256), 'with space', 'tab\there']) {
        const res = await post(minimal(), key);
        assert.equal(res.status, 400, JSON.stringify(key));
        assert.equal(res.body.code, 'invalid_idempotency_key');
      }
      assert.deepEqual(await rowCounts(app), before);
      assert.equal((await post(minimal(), 'x'.repeat(255))).status, 200);
    });
  });
});
