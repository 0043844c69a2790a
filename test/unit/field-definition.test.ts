/**
 * Building and checking field definitions (src/modules/fields/definition.ts) without a
 * server: defaults, the rules of each type, logic checks against the other fields of the
 * form, and the round trip through a database row.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FieldRow } from '../../src/db/schema.js';
import { BadRequestError, type ErrorDetail } from '../../src/errors.js';
import {
  checkDefinition,
  fieldsBytes,
  toDefinition,
  toField,
  toFieldColumns,
  toFieldRow,
  toSibling,
  withDefaults,
  type FieldDefinition,
  type Sibling,
} from '../../src/modules/fields/definition.js';
import type { FieldCreate } from '../../src/modules/fields/schemas.js';
import {
  DEFAULT_MAX_FILE_SIZE,
  DEFAULT_MAX_FILES,
  FIELD_TYPES,
  TYPE_RULES,
  type FieldType,
} from '../../src/modules/fields/types.js';

const none = new Map<number, Sibling>();

function check(input: FieldCreate, siblings = none, selfId?: number, path = 'body'): FieldDefinition {
  return checkDefinition(withDefaults(input), path, siblings, selfId);
}

/** The details of the one 400 that checkDefinition throws. */
function problems(input: FieldCreate, siblings = none, selfId?: number, path = 'body'): ErrorDetail[] {
  try {
    check(input, siblings, selfId, path);
  } catch (error) {
    assert.ok(error instanceof BadRequestError, `expected a BadRequestError, got ${String(error)}`);
    assert.equal(error.statusCode, 400);
    assert.equal(error.code, 'invalid_field');
    assert.ok(error.details && error.details.length > 0);
    assert.equal(error.message, `${error.details[0]!.property}: ${error.details[0]!.message}`);
    return error.details;
  }
  assert.fail(`${JSON.stringify(input)} should be refused`);
}

/** The smallest valid definition input of each type. */
function minimal(type: FieldType): FieldCreate {
  if (type === 'matrix') return { type, label: 'M', attributes: { rows: ['r'], columns: ['c'] } };
  if (type === 'product') return { type, label: 'P', attributes: { price: 1 } };
  if (TYPE_RULES[type].options) return { type, label: 'O', options: [{ label: 'A', value: 'a' }] };
  return { type, label: type };
}

describe('withDefaults', () => {
  it('fills every property that was not sent', () => {
    assert.deepEqual(withDefaults({ type: 'text', label: 'Name' }), {
      type: 'text',
      label: 'Name',
      hideLabel: false,
      description: '',
      defaultValue: null,
      required: false,
      readOnly: false,
      hidden: false,
      unique: false,
      columnSpan: 12,
      displayOrder: undefined,
      attributes: {},
      options: [],
      smartList: null,
      logic: null,
    });
  });

  it('keeps what was sent', () => {
    const input: FieldCreate = {
      type: 'select',
      label: 'Topic',
      hideLabel: true,
      description: 'Pick one',
      defaultValue: 'b',
      required: true,
      readOnly: true,
      hidden: true,
      unique: true,
      columnSpan: 6,
      displayOrder: 3,
      attributes: { placeholder: 'Choose' },
      options: [{ label: 'B', value: 'b' }],
      smartList: null,
      logic: null,
    };
    assert.deepEqual(withDefaults(input), input);
  });
});

describe('checkDefinition', () => {
  it('accepts the smallest definition of every type', () => {
    for (const type of FIELD_TYPES) assert.equal(check(minimal(type)).type, type);
  });

  it('fills attribute defaults without changing the definition it was given', () => {
    const def = withDefaults({ type: 'file', label: 'CV' });
    const checked = checkDefinition(def, 'body', none);
    assert.deepEqual(checked.attributes, { maxFiles: DEFAULT_MAX_FILES, maxFileSize: DEFAULT_MAX_FILE_SIZE });
    assert.deepEqual(def.attributes, {});
    assert.deepEqual(check({ type: 'signature', label: 'Sign' }).attributes, { maxFileSize: 1024 * 1024 });
    assert.deepEqual(check({ type: 'product', label: 'P', attributes: { price: 9.5 } }).attributes, {
      price: 9.5,
      currency: 'USD',
    });
  });

  it('refuses attributes the type does not know or values out of range, naming each under the path', () => {
    assert.deepEqual(problems({ type: 'text', label: 'x', attributes: { rows: 3 } }), [
      { property: 'body.attributes.rows', message: 'is not a known property' },
    ]);
    assert.deepEqual(
      problems(
        { type: 'text', label: 'x', attributes: { minLength: -1, placeholder: 5 } },
        none,
        undefined,
        'body.fields[2]',
      ).sort((a, b) => a.property.localeCompare(b.property)),
      [
        { property: 'body.fields[2].attributes.minLength', message: 'must be >= 0' },
        { property: 'body.fields[2].attributes.placeholder', message: 'must be string' },
      ],
    );
    assert.deepEqual(problems({ type: 'matrix', label: 'x' }), [
      { property: 'body.attributes.rows', message: 'is required' },
      { property: 'body.attributes.columns', message: 'is required' },
    ]);
    assert.deepEqual(problems({ type: 'datetime', label: 'x', attributes: { minDate: '2024-02-31' } }), [
      { property: 'body.attributes.minDate', message: 'must match format "date"' },
    ]);
    assert.deepEqual(problems({ type: 'phone', label: 'x', attributes: { format: 'uk' } }), [
      { property: 'body.attributes.format', message: 'must be one of us, international' },
    ]);
  });

  it('refuses attribute pairs out of order', () => {
    const cases: [FieldCreate, string, string][] = [
      [
        { type: 'text', label: 'x', attributes: { minLength: 5, maxLength: 2 } },
        'minLength',
        'must not be greater than maxLength',
      ],
      [
        { type: 'textarea', label: 'x', attributes: { minLength: 5, maxLength: 2 } },
        'minLength',
        'must not be greater than maxLength',
      ],
      [{ type: 'number', label: 'x', attributes: { min: 10, max: 1 } }, 'min', 'must not be greater than max'],
      [
        {
          type: 'checkbox',
          label: 'x',
          options: [{ label: 'A', value: 'a' }],
          attributes: { minSelected: 3, maxSelected: 2 },
        },
        'minSelected',
        'must not be greater than maxSelected',
      ],
      [
        { type: 'product', label: 'x', attributes: { price: 1, minQuantity: 5, maxQuantity: 4 } },
        'minQuantity',
        'must not be greater than maxQuantity',
      ],
      [
        { type: 'datetime', label: 'x', attributes: { minDate: '2024-02-01', maxDate: '2024-01-01' } },
        'minDate',
        'must not be after maxDate',
      ],
    ];
    for (const [input, attribute, message] of cases)
      assert.deepEqual(problems(input), [{ property: `body.attributes.${attribute}`, message }], input.type);
    // Equal bounds are fine.
    assert.ok(check({ type: 'number', label: 'x', attributes: { min: 1, max: 1 } }));
    assert.ok(check({ type: 'datetime', label: 'x', attributes: { minDate: '2024-01-01', maxDate: '2024-01-01' } }));
  });

  it('needs options on option types, each value once, and refuses them elsewhere', () => {
    for (const type of ['select', 'radio', 'checkbox'] as const) {
      assert.deepEqual(problems({ type, label: 'x' }), [
        { property: 'body.options', message: `a ${type} field needs at least one option` },
      ]);
    }
    assert.deepEqual(
      problems({
        type: 'radio',
        label: 'x',
        options: [
          { label: 'A', value: 'a' },
          { label: 'B', value: 'b' },
          { label: 'A again', value: 'a' },
        ],
      }),
      [{ property: 'body.options[2].value', message: '"a" is used twice' }],
    );
    assert.deepEqual(problems({ type: 'text', label: 'x', options: [{ label: 'A', value: 'a' }] }), [
      { property: 'body.options', message: 'a text field has no options' },
    ]);
  });

  it('refuses input flags on types that take no input, and unique where values cannot be compared', () => {
    for (const type of ['richtext', 'embed', 'section'] as const) {
      assert.deepEqual(problems({ type, label: 'x', required: true, unique: true, readOnly: true }), [
        { property: 'body.required', message: `a ${type} field takes no input` },
        { property: 'body.unique', message: `a ${type} field takes no input` },
        { property: 'body.readOnly', message: `a ${type} field takes no input` },
      ]);
    }
    for (const type of FIELD_TYPES.filter((t) => TYPE_RULES[t].input)) {
      const input = { ...minimal(type), unique: true };
      if (TYPE_RULES[type].uniqueAllowed) assert.equal(check(input).unique, true, type);
      else
        assert.deepEqual(
          problems(input),
          [{ property: 'body.unique', message: `values of a ${type} field cannot be kept unique` }],
          type,
        );
    }
  });

  it('takes a default value of the kind the type holds', () => {
    const options = [
      { label: 'A', value: 'a' },
      { label: 'B', value: 'b' },
    ];
    assert.equal(check({ type: 'text', label: 'x', defaultValue: 'hello' }).defaultValue, 'hello');
    assert.equal(check({ type: 'number', label: 'x', defaultValue: 3 }).defaultValue, 3);
    assert.equal(check({ type: 'radio', label: 'x', options, defaultValue: 'b' }).defaultValue, 'b');
    assert.deepEqual(check({ type: 'checkbox', label: 'x', options, defaultValue: ['a', 'b'] }).defaultValue, [
      'a',
      'b',
    ]);
    assert.deepEqual(check({ type: 'name', label: 'x', defaultValue: { first: 'Ana' } }).defaultValue, {
      first: 'Ana',
    });
    assert.deepEqual(check({ type: 'address', label: 'x', defaultValue: { country: 'US' } }).defaultValue, {
      country: 'US',
    });

    const refused: [FieldCreate, string][] = [
      [{ type: 'text', label: 'x', defaultValue: 3 }, 'must be a string'],
      [{ type: 'number', label: 'x', defaultValue: '3' }, 'must be a number'],
      [{ type: 'select', label: 'x', options, defaultValue: 'c' }, 'must be the value of one of the options'],
      [{ type: 'radio', label: 'x', options, defaultValue: ['a'] }, 'must be the value of one of the options'],
      [{ type: 'checkbox', label: 'x', options, defaultValue: 'a' }, 'must be a list of option values'],
      [{ type: 'checkbox', label: 'x', options, defaultValue: ['a', 'c'] }, 'must be a list of option values'],
      [
        { type: 'name', label: 'x', defaultValue: { nickname: 'A' } },
        'has no subfield "nickname" (use prefix, first, middle, initial, last, suffix)',
      ],
      [
        { type: 'address', label: 'x', defaultValue: ['US'] },
        'must be an object of address, address2, city, state, zip, country',
      ],
      [{ type: 'file', label: 'x', defaultValue: 'a.pdf' }, 'a file field has no default value'],
      [{ type: 'creditcard', label: 'x', defaultValue: '4111' }, 'a creditcard field has no default value'],
    ];
    for (const [input, message] of refused)
      assert.deepEqual(problems(input), [{ property: 'body.defaultValue', message }], JSON.stringify(input));
  });

  it('reports every problem at once, the first in the message', () => {
    const details = problems({
      type: 'select',
      label: 'x',
      attributes: { layout: 'grid' },
      defaultValue: 'z',
      unique: true,
      options: [],
    });
    assert.deepEqual(
      details.map((d) => d.property),
      ['body.attributes.layout', 'body.options', 'body.defaultValue'],
    );
  });
});

describe('logic checks', () => {
  const siblings = new Map<number, Sibling>([
    [1, { id: 1, type: 'select', options: [{ value: 'sales' }, { value: 'support' }] }],
    [2, { id: 2, type: 'number', options: [] }],
    [3, { id: 3, type: 'section', options: [] }],
    [4, { id: 4, type: 'text', options: [] }],
  ]);
  const withChecks = (...checks: NonNullable<FieldCreate['logic']>['checks']): FieldCreate => ({
    type: 'text',
    label: 'x',
    logic: { action: 'show', conditional: 'all', checks },
  });

  it('accepts checks on other input fields of the form', () => {
    const def = check(
      withChecks(
        { field: 1, condition: 'equals', option: 'sales' },
        { field: 2, condition: 'greaterthan', option: '2.5' },
        { field: 4, condition: 'contains', option: 'anything' },
        { field: 4, condition: 'empty' },
      ),
      siblings,
      9,
    );
    assert.equal(def.logic?.checks.length, 4);
  });

  it('refuses a check on itself, on a field of no form of this one, and on a field without a value', () => {
    assert.deepEqual(
      problems(
        withChecks({ field: 9, condition: 'empty' }),
        new Map([...siblings, [9, { id: 9, type: 'text', options: [] }]]),
        9,
      ),
      [{ property: 'body.logic.checks[0].field', message: 'a field cannot depend on itself' }],
    );
    assert.deepEqual(
      problems(withChecks({ field: 1, condition: 'empty' }, { field: 77, condition: 'empty' }), siblings, 9),
      [{ property: 'body.logic.checks[1].field', message: 'must be a field of this form; 77 is not' }],
    );
    assert.deepEqual(problems(withChecks({ field: 3, condition: 'notempty' }), siblings, 9), [
      { property: 'body.logic.checks[0].field', message: 'a section field holds no value to check' },
    ]);
  });

  it('needs an option of the checked field for equals and notequals, and a number for greaterthan and lessthan', () => {
    assert.deepEqual(problems(withChecks({ field: 1, condition: 'notequals', option: 'Sales' }), siblings, 9), [
      { property: 'body.logic.checks[0].option', message: "must be the value of one of the checked field's options" },
    ]);
    assert.deepEqual(problems(withChecks({ field: 1, condition: 'equals' }), siblings, 9), [
      { property: 'body.logic.checks[0].option', message: "must be the value of one of the checked field's options" },
    ]);
    // A field without options takes any text to compare with.
    assert.ok(check(withChecks({ field: 4, condition: 'equals', option: 'free text' }), siblings, 9));
    for (const option of ['ten', '1,5', undefined]) {
      assert.deepEqual(
        problems(
          withChecks({ field: 2, condition: 'lessthan', ...(option === undefined ? {} : { option }) }),
          siblings,
          9,
        ),
        [{ property: 'body.logic.checks[0].option', message: 'must be a number for greaterthan and lessthan' }],
        String(option),
      );
    }
  });
});

describe('rows', () => {
  const row: FieldRow = {
    id: 42,
    account_id: 1,
    form_id: 7,
    type: 'checkbox',
    label: 'Topics',
    hide_label: 1,
    description: 'Any',
    default_value: '["a"]',
    required: 1,
    read_only: 0,
    hidden: 0,
    is_unique: 0,
    column_span: 6,
    display_order: 2,
    attributes: '{"layout":"horizontal"}',
    options: '[{"label":"A","value":"a"},{"label":"B","value":"b"}]',
    smart_list_id: null,
    logic: '{"action":"hide","conditional":"any","checks":[{"field":5,"condition":"empty"}]}',
    created_at: Date.parse('2024-01-02T03:04:05.006Z'),
    updated_at: Date.parse('2024-06-07T08:09:10.011Z'),
  };

  it('read back into the definition they were written from', () => {
    const def = toDefinition(row);
    assert.deepEqual(def, {
      type: 'checkbox',
      label: 'Topics',
      hideLabel: true,
      description: 'Any',
      defaultValue: ['a'],
      required: true,
      readOnly: false,
      hidden: false,
      unique: false,
      columnSpan: 6,
      displayOrder: 2,
      attributes: { layout: 'horizontal' },
      options: [
        { label: 'A', value: 'a' },
        { label: 'B', value: 'b' },
      ],
      smartList: null,
      logic: { action: 'hide', conditional: 'any', checks: [{ field: 5, condition: 'empty' }] },
    });
    const {
      id: _id,
      account_id: _account,
      form_id: _form,
      display_order: _order,
      created_at: _created,
      updated_at: _updated,
      ...columns
    } = row;
    assert.deepEqual(toFieldColumns(def), columns);
  });

  it('store nulls as SQL nulls and flags as 0 or 1', () => {
    const columns = toFieldColumns(withDefaults({ type: 'text', label: 'Plain' }));
    assert.equal(columns.default_value, null);
    assert.equal(columns.logic, null);
    assert.deepEqual(
      [columns.hide_label, columns.required, columns.read_only, columns.hidden, columns.is_unique],
      [0, 0, 0, 0, 0],
    );
    assert.equal(columns.attributes, '{}');
    assert.equal(columns.options, '[]');
  });

  it('make a new row for a form at a display order and a time', () => {
    const now = Date.parse('2024-05-05T00:00:00Z');
    const newRow = toFieldRow(
      withDefaults({ type: 'email', label: 'Email', displayOrder: 99 }),
      { accountId: 3, formId: 8, displayOrder: 4 },
      now,
    );
    assert.equal(newRow.account_id, 3);
    assert.equal(newRow.form_id, 8);
    assert.equal(newRow.display_order, 4);
    assert.equal(newRow.created_at, now);
    assert.equal(newRow.updated_at, now);
    assert.equal(newRow.type, 'email');
  });

  it('become the API record, with ISO times, and a sibling for logic checks', () => {
    const field = toField(row);
    assert.equal(field.id, 42);
    assert.equal(field.formId, 7);
    assert.equal(field.created, '2024-01-02T03:04:05.006Z');
    assert.equal(field.updated, '2024-06-07T08:09:10.011Z');
    assert.equal(field.displayOrder, 2);
    assert.deepEqual(toSibling(row), {
      id: 42,
      type: 'checkbox',
      options: [
        { label: 'A', value: 'a' },
        { label: 'B', value: 'b' },
      ],
    });
  });
});

describe('fieldsBytes', () => {
  it('counts options by their text, so that caches of definitions hold to their budget', () => {
    const option = (n: number) => ({ label: 'l'.repeat(n), value: 'v'.repeat(n) });
    assert.equal(fieldsBytes([{ options: [] }, { options: [] }]), 2048);
    assert.equal(fieldsBytes([{ options: [option(10)] }]), 1024 + 64 + 40);
    // 50,000 options of 500 characters each (what a form may show): about 100 MB as UTF-16, not 20 KB.
    const many = Array.from({ length: 20 }, () => ({ options: Array.from({ length: 2500 }, () => option(500)) }));
    assert.ok(fieldsBytes(many) > 100_000_000);
  });
});
