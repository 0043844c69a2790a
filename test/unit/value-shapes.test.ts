/**
 * Values shown by a field whose type changed after they were stored (src/modules/submissions/
 * values.ts displayValue): a stored value keeps its shape, so a creditcard field may hold an
 * old matrix value and a name field an old card. Shown by the new type's parts they read
 * "undefined ending in undefined, expires undefined/undefined" or "" (a blank CSV cell though
 * the value is stored); a value that is not of its type's shape is shown part by part instead.
 * And the pretty name that such values make (indexing.ts derived): never "".
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SubmissionRow } from '../../src/db/schema.js';
import type { FieldType } from '../../src/modules/fields/types.js';
import type { FormDefinition } from '../../src/modules/submissions/definitions.js';
import { derived } from '../../src/modules/submissions/indexing.js';
import { prettyNameOf } from '../../src/modules/submissions/presentation.js';
import {
  displayValue,
  logicHolds,
  searchKeys,
  type FieldForValues,
  type StoredValue,
} from '../../src/modules/submissions/values.js';

let nextId = 1;
function field(type: FieldType): FieldForValues {
  return {
    id: nextId++,
    type,
    label: `A ${type}`,
    attributes: {},
    options: [],
    required: false,
    unique: false,
    logic: null,
  };
}

const CARD = { brand: 'visa', last4: '1111', expMonth: '01', expYear: '2030' };
const MATRIX = { Speed: 'Good', Price: 'Bad, Good' };
const NAME = { first: 'Ana', last: 'López' };
const ADDRESS = { address: '1 Main St', city: 'Springfield' };

describe('a value shown by a field of another type than it was stored under', () => {
  it('shows an old matrix value of a creditcard field by its rows', () => {
    assert.equal(displayValue(field('creditcard'), MATRIX), 'Speed: Good; Price: Bad, Good');
  });

  it('shows an old card value of a name field by its parts', () => {
    assert.equal(displayValue(field('name'), CARD), 'brand: visa; last4: 1111; expMonth: 01; expYear: 2030');
  });

  it('shows a name and an address each by its parts under the other type', () => {
    assert.equal(displayValue(field('address'), NAME), 'first: Ana; last: López');
    assert.equal(displayValue(field('name'), ADDRESS), 'address: 1 Main St; city: Springfield');
    assert.equal(displayValue(field('creditcard'), NAME), 'first: Ana; last: López');
  });

  it('shows a card that lacks a part, or has one more, by its parts', () => {
    assert.equal(
      displayValue(field('creditcard'), { brand: 'visa', last4: '1111', expMonth: '01' }),
      'brand: visa; last4: 1111; expMonth: 01',
    );
    assert.equal(
      displayValue(field('creditcard'), { ...CARD, name: 'Ana' }),
      'brand: visa; last4: 1111; expMonth: 01; expYear: 2030; name: Ana',
    );
  });

  it('shows an old object of a text or option field by its parts, and parts that are not text as JSON', () => {
    assert.equal(displayValue(field('text'), NAME), 'first: Ana; last: López');
    assert.equal(displayValue(field('radio'), CARD), 'brand: visa; last4: 1111; expMonth: 01; expYear: 2030');
    const odd = { rows: ['a', 'b'], n: 2 } as unknown as StoredValue;
    assert.equal(displayValue(field('matrix'), odd), 'rows: ["a","b"]; n: 2');
    assert.equal(displayValue(field('checkbox'), [{ x: 1 }] as unknown as StoredValue), '{"x":1}');
  });

  it('shows values of their own shape as before', () => {
    assert.equal(displayValue(field('creditcard'), CARD), 'visa ending in 1111, expires 01/2030');
    assert.equal(displayValue(field('name'), NAME), 'Ana López');
    assert.equal(displayValue(field('address'), ADDRESS), '1 Main St, Springfield');
    assert.equal(displayValue(field('matrix'), MATRIX), 'Speed: Good; Price: Bad, Good');
    // Blank parts are a name's own shape, shown as the nothing they are.
    assert.equal(displayValue(field('name'), { first: '' }), '');
  });

  it('searches and judges logic by what is shown', () => {
    const name = field('name');
    assert.deepEqual(searchKeys(name, CARD), [
      'brand: visa; last4: 1111; expmonth: 01; expyear: 2030',
      'visa',
      '1111',
      '01',
      '2030',
    ]);
    const card = field('creditcard');
    assert.deepEqual(searchKeys(card, MATRIX), ['speed: good; price: bad, good']);
    const check = {
      conditional: 'all' as const,
      checks: [{ field: card.id, condition: 'contains' as const, option: 'speed' }],
    };
    assert.equal(
      logicHolds(check, new Map([[card.id, card]]), () => MATRIX),
      true,
    );
  });
});

describe('the pretty name', () => {
  const form = (...types: FieldType[]) => {
    const fields = types.map(field);
    return { formId: 1, fields };
  };

  it('is null, not "", when the name shows as nothing', () => {
    const def = form('name');
    assert.equal(derived(def, new Map([[def.fields[0]!.id, { first: '' }]])).prettyName, null);
    assert.equal(derived(def, new Map([[def.fields[0]!.id, {}]])).prettyName, null);
    assert.equal(derived(def, new Map()).prettyName, null);
  });

  it('comes from the next name or the email when the first name shows as nothing', () => {
    const def = form('name', 'name', 'email');
    const [first, second, email] = def.fields.map((f) => f.id);
    const data = new Map<number, StoredValue>([
      [first!, { first: '' }],
      [email!, 'ana@example.com'],
    ]);
    assert.equal(derived(def, data).prettyName, 'ana@example.com');
    data.set(second!, NAME);
    assert.equal(derived(def, data).prettyName, 'Ana López');
  });

  it('is not an old value of another type that a name field holds, but may be old text', () => {
    const def = form('name', 'email');
    const [name, email] = def.fields.map((f) => f.id);
    assert.equal(derived(def, new Map([[name!, CARD]])).prettyName, null);
    assert.equal(derived(def, new Map([[name!, ADDRESS]])).prettyName, null);
    assert.equal(derived(def, new Map([[name!, ['a', 'b']]])).prettyName, null);
    assert.equal(
      derived(
        def,
        new Map<number, StoredValue>([
          [name!, CARD],
          [email!, 'ana@example.com'],
        ]),
      ).prettyName,
      'ana@example.com',
    );
    assert.equal(derived(def, new Map([[name!, 'Ana López']])).prettyName, 'Ana López');
  });

  it('reads as null from a row that stored ""', () => {
    const def = { formId: 1, fields: [] } as unknown as FormDefinition;
    const row = { id: 1, data: '{}', pretty_name: '' } as SubmissionRow;
    assert.equal(prettyNameOf(def, row, new Map()), null);
    assert.equal(prettyNameOf(def, { ...row, pretty_name: 'Ana' }, new Map()), 'Ana');
  });
});
