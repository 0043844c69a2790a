/**
 * Reading, showing and searching the value of each field type (src/modules/submissions/values.ts),
 * without a server: what a client may send, what is stored, and what is refused with which problem.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FieldType } from '../../src/modules/fields/types.js';
import {
  displayValue,
  fileRefs,
  isEmptyInput,
  normalize,
  readValue,
  ResolvedFiles,
  searchKeys,
  ValueError,
  visibleFields,
  type FieldForValues,
  type FileRef,
  type StoredValue,
} from '../../src/modules/submissions/values.js';

/** The time values are read at (a datetime field's checks may depend on it). */
const NOW = Date.UTC(2026, 10, 24, 12);

let nextId = 1;
function field(
  type: FieldType,
  attributes: Record<string, unknown> = {},
  options: string[] | { label: string; value: string }[] = [],
): FieldForValues {
  return {
    id: nextId++,
    type,
    label: `A ${type}`,
    attributes,
    options: options.map((o) => (typeof o === 'string' ? { label: o.toUpperCase(), value: o } : o)),
    required: false,
    unique: false,
    logic: null,
  };
}

/** readValue's ValueError, whose message must contain the given text. */
function refuses(f: FieldForValues, raw: unknown, message: string | RegExp) {
  assert.throws(
    () => readValue(f, raw, NOW),
    (error: unknown) => {
      assert.ok(error instanceof ValueError, `expected a ValueError, got ${String(error)}`);
      if (typeof message === 'string')
        assert.ok(error.message.includes(message), `"${error.message}" does not say "${message}"`);
      else assert.match(error.message, message);
      return true;
    },
    `${f.type} should refuse ${JSON.stringify(raw)}`,
  );
}

const nextYear = new Date().getUTCFullYear() + 1;

describe('input that is empty', () => {
  it('is null, undefined, an empty string, an empty value, an empty list or empty subvalues', () => {
    for (const raw of [
      null,
      undefined,
      '',
      { value: '' },
      { value: null },
      { value: { value: '' } },
      [],
      { subvalues: [] },
    ]) {
      assert.equal(isEmptyInput(raw), true, JSON.stringify(raw));
    }
    for (const raw of [0, false, ' ', 'x', { value: 0 }, ['a'], { subvalues: [{ subvalue: 'a' }] }, { first: '' }]) {
      assert.equal(isEmptyInput(raw), false, JSON.stringify(raw));
    }
  });

  it('clears a field of any input type', () => {
    for (const type of [
      'text',
      'email',
      'number',
      'select',
      'checkbox',
      'name',
      'matrix',
      'creditcard',
      'file',
    ] as const) {
      const f = field(
        type,
        type === 'matrix' ? { rows: ['r'], columns: ['c'] } : {},
        type === 'select' || type === 'checkbox' ? ['a'] : [],
      );
      assert.equal(readValue(f, { value: '' }, NOW), null, type);
      assert.equal(readValue(f, null, NOW), null, type);
    }
  });

  it('is refused for types that take no input, even when empty', () => {
    for (const type of ['richtext', 'embed', 'section'] as const)
      refuses(field(type), 'x', `a ${type} field takes no value`);
  });
});

describe('the shapes a value comes in', () => {
  const text = field('text');

  it('takes {"value": x}, a bare string, or a number as text', () => {
    assert.equal(readValue(text, { value: 'hello' }, NOW), 'hello');
    assert.equal(readValue(text, 'hello', NOW), 'hello');
    assert.equal(readValue(text, 42, NOW), '42');
    assert.equal(readValue(text, { value: 1.5 }, NOW), '1.5');
  });

  it('refuses other objects, other types and malformed subvalues', () => {
    refuses(text, { text: 'hello' }, 'must be {"value": ...}');
    refuses(text, { value: 'a', extra: 1 }, 'must be {"value": ...}');
    refuses(text, true, 'must be a string');
    refuses(text, { value: Number.NaN }, 'must be a string');
    refuses(field('select', {}, ['a']), { subvalues: 'a' }, 'subvalues must be a list');
    refuses(field('select', {}, ['a']), { subvalues: [{ value: 'a' }] }, 'each subvalue must be {"subvalue": ...}');
    refuses(field('select', {}, ['a']), { subvalues: ['a'] }, 'each subvalue must be {"subvalue": ...}');
  });
});

describe('text and textarea', () => {
  it('keep the text as sent, spaces included', () => {
    assert.equal(readValue(field('textarea'), '  two\nlines  ', NOW), '  two\nlines  ');
  });

  it('hold minLength and maxLength, and 100,000 characters without them', () => {
    const f = field('text', { minLength: 3, maxLength: 5 });
    assert.equal(readValue(f, 'abc', NOW), 'abc');
    assert.equal(readValue(f, 'abcde', NOW), 'abcde');
    refuses(f, 'ab', 'must be at least 3 characters');
    refuses(f, 'abcdef', 'must be at most 5 characters');
    assert.equal((readValue(field('textarea'), 'x'.repeat(100_000), NOW) as string).length, 100_000);
    refuses(field('textarea'), 'x'.repeat(100_001), 'must be at most 100000 characters');
  });
});

describe('email', () => {
  const f = field('email');

  it('takes an address with a dotted domain, trimmed', () => {
    assert.equal(readValue(f, ' ana.lopez+forms@mail.example.co.uk ', NOW), 'ana.lopez+forms@mail.example.co.uk');
  });

  it('refuses what is not an address', () => {
    for (const raw of [
      'ana',
      'ana@example',
      'ana@example.',
      'ana@.com',
      'a b@example.com',
      '@example.com',
      'ana@@example.com',
      // What a mail header reads as a group, a comment, quoting or a list, not as one address.
      'x@y.com:c',
      'a(comment)@b.com',
      '"x7"@example.org',
      'a,b@example.com',
      'a;b@example.com',
      '<a@example.com>',
      'a[1]@example.com',
      'a\\b@example.com',
    ])
      refuses(f, raw, 'must be an email address');
    refuses(f, `${'a'.repeat(250)}@example.com`, 'must be at most 254 characters');
  });
});

describe('phone', () => {
  it('takes digits with the usual punctuation, 7 to 15 digits', () => {
    const f = field('phone');
    assert.equal(readValue(f, '+1 (555) 123-4567', NOW), '+1 (555) 123-4567');
    assert.equal(readValue(f, '555.1234', NOW), '555.1234');
    assert.equal(readValue(f, '+44 20 7946 0958', NOW), '+44 20 7946 0958');
    refuses(f, '123456', 'must be a phone number');
    refuses(f, '1234567890123456', 'must be a phone number');
    refuses(f, '555-CALL-NOW', 'must be a phone number');
    refuses(f, '5551234 ext. 5', 'must be a phone number');
  });

  it('takes only 10 digits, or 11 starting with 1, in the US format', () => {
    const f = field('phone', { format: 'us' });
    assert.equal(readValue(f, '(555) 123-4567', NOW), '(555) 123-4567');
    assert.equal(readValue(f, '+1 555 123 4567', NOW), '+1 555 123 4567');
    refuses(f, '+44 20 7946 0958', 'must be a 10-digit US phone number');
    refuses(f, '555-1234', 'must be a 10-digit US phone number');
  });
});

describe('datetime', () => {
  it('takes a real date by default', () => {
    const f = field('datetime');
    assert.equal(readValue(f, '2024-02-29', NOW), '2024-02-29');
    refuses(f, '2023-02-29', 'must be a date as YYYY-MM-DD');
    refuses(f, '2024-13-01', 'must be a date as YYYY-MM-DD');
    refuses(f, '29/02/2024', 'must be a date as YYYY-MM-DD');
    refuses(f, '2024-02-29 10:00', 'must be a date as YYYY-MM-DD');
  });

  it('takes a time with or without seconds', () => {
    const f = field('datetime', { format: 'time' });
    assert.equal(readValue(f, '23:59', NOW), '23:59');
    assert.equal(readValue(f, '00:00:59', NOW), '00:00:59');
    refuses(f, '24:00', 'must be a time as HH:MM or HH:MM:SS');
    refuses(f, '12:60', 'must be a time');
    refuses(f, '12:00:60', 'must be a time');
    refuses(f, '9:30', 'must be a time');
  });

  it('takes a date and time with a space or a T, and stores it with a space', () => {
    const f = field('datetime', { format: 'datetime' });
    assert.equal(readValue(f, '2024-03-10 02:30', NOW), '2024-03-10 02:30');
    assert.equal(readValue(f, '2024-03-10T02:30:15', NOW), '2024-03-10 02:30:15');
    refuses(f, '2024-03-10', 'must be a datetime as YYYY-MM-DD HH:MM or YYYY-MM-DD HH:MM:SS');
    refuses(f, '2024-02-30 10:00', 'must be a datetime');
    refuses(f, '2024-03-10 25:00', 'must be a datetime');
  });

  it('holds minDate and maxDate, inclusive, on the day of a date and time', () => {
    const f = field('datetime', { format: 'datetime', minDate: '2024-01-01', maxDate: '2024-12-31' });
    assert.equal(readValue(f, '2024-01-01 00:00', NOW), '2024-01-01 00:00');
    assert.equal(readValue(f, '2024-12-31 23:59:59', NOW), '2024-12-31 23:59:59');
    refuses(f, '2023-12-31 23:59', 'must not be before 2024-01-01');
    refuses(f, '2025-01-01 00:00', 'must not be after 2024-12-31');
  });
});

describe('number', () => {
  it('takes numbers and numeric strings', () => {
    const f = field('number');
    assert.equal(readValue(f, 12, NOW), 12);
    assert.equal(readValue(f, { value: '12.5' }, NOW), 12.5);
    assert.equal(readValue(f, ' -3 ', NOW), -3);
    assert.equal(readValue(f, 0, NOW), 0);
    refuses(f, 'twelve', 'must be a number');
    refuses(f, ' ', 'must be a number');
    refuses(f, 'Infinity', 'must be a number');
    refuses(f, [1], 'must be a number');
  });

  it('reads text as plain decimals only, not as JavaScript writes numbers', () => {
    const f = field('number');
    assert.equal(readValue(f, '-0.25', NOW), -0.25);
    assert.equal(readValue(f, '007', NOW), 7);
    assert.equal(readValue(f, '\t42.50\n', NOW), 42.5);
    // Each was taken before, as Number() reads it: 0x10 as 16, 1e5 as 100000.
    for (const text of ['0x10', '0X1F', '0o17', '0b101', '1e5', '1E-3', '-1e2', 'Infinity', '-Infinity', 'NaN'])
      refuses(f, text, 'must be a number in decimal digits, such as 12 or -3.5');
    for (const text of ['+5', '.5', '5.', '1_000', '1,000', '1 000', '- 5', '--5', '5-', '١٢', '12abc'])
      refuses(f, text, 'must be a number in decimal digits');
    // Plain digits, but more than a number holds.
    refuses(f, '9'.repeat(400), 'must be a number');
    // A JSON number is a number however its sender wrote it.
    assert.equal(readValue(f, 1e5, NOW), 100000);
    assert.equal(readValue(f, { value: 0x10 }, NOW), 16);
    // The limits are checked on what the text says, and a product's quantity is read the same way.
    refuses(field('number', { max: 10 }), '0xA', 'must be a number in decimal digits');
    refuses(field('product', { price: 5 }), '1e1', 'must be a number in decimal digits');
    assert.equal(readValue(field('product', { price: 5 }), ' 3 ', NOW), 3);
  });

  it('holds min, max and decimals', () => {
    const f = field('number', { min: 1, max: 10, decimals: 2 });
    assert.equal(readValue(f, 1, NOW), 1);
    assert.equal(readValue(f, 10, NOW), 10);
    assert.equal(readValue(f, 9.99, NOW), 9.99);
    refuses(f, 0.99, 'must be at least 1');
    refuses(f, 10.01, 'must be at most 10');
    refuses(f, 1.005, 'must have at most 2 decimals');
    refuses(field('number', { decimals: 0 }), 1.5, 'must have at most 0 decimals');
    // Binary noise in a number that has the right decimals is no extra decimal.
    assert.equal(readValue(field('number', { decimals: 1 }), 0.1 + 0.2, NOW), 0.30000000000000004);
  });
});

describe('product', () => {
  it('takes a whole quantity between minQuantity (0 unless set) and maxQuantity', () => {
    assert.equal(readValue(field('product', { price: 5 }), 0, NOW), 0);
    refuses(field('product', { price: 5 }), -1, 'must be at least 0');
    refuses(field('product', { price: 5 }), 1.5, 'must have at most 0 decimals');
    const f = field('product', { price: 5, minQuantity: 2, maxQuantity: 4 });
    assert.equal(readValue(f, '3', NOW), 3);
    refuses(f, 1, 'must be at least 2');
    refuses(f, 5, 'must be at most 4');
  });
});

describe('options: radio, select and checkbox', () => {
  it('stores a radio value as a string, a select value as a list of one', () => {
    assert.equal(readValue(field('radio', {}, ['a', 'b']), 'b', NOW), 'b');
    assert.deepEqual(readValue(field('select', {}, ['a', 'b']), 'b', NOW), ['b']);
    assert.deepEqual(readValue(field('select', {}, ['a', 'b']), { subvalues: [{ subvalue: 'a' }] }, NOW), ['a']);
  });

  it('takes option values, not labels, compared exactly', () => {
    const f = field('radio', {}, [{ label: 'Sales', value: 'sales' }]);
    refuses(f, 'Sales', '"Sales" is not one of the options (sales)');
    refuses(f, 'sales ', 'is not one of the options');
  });

  it('takes one option on radio and select', () => {
    refuses(field('radio', {}, ['a', 'b']), ['a', 'b'], 'takes one option');
    refuses(field('select', {}, ['a', 'b']), { subvalues: [{ subvalue: 'a' }, { subvalue: 'b' }] }, 'takes one option');
    // The same option twice is one option.
    assert.deepEqual(readValue(field('select', {}, ['a', 'b']), ['a', 'a'], NOW), ['a']);
  });

  it('takes several options on checkbox, each once, between minSelected and maxSelected', () => {
    const f = field('checkbox', { minSelected: 2, maxSelected: 3 }, ['a', 'b', 'c', 'd']);
    assert.deepEqual(readValue(f, { subvalues: [{ subvalue: 'c' }, { subvalue: 'a' }, { subvalue: 'c' }] }, NOW), [
      'c',
      'a',
    ]);
    refuses(f, ['a', 'a'], 'needs at least 2 options');
    refuses(f, ['a', 'b', 'c', 'd'], 'takes at most 3 options');
    refuses(f, ['a', 'e'], '"e" is not one of the options');
  });
});

describe('name and address', () => {
  it('takes a name as its subfields, trimmed, leaving out empty ones', () => {
    const f = field('name');
    assert.deepEqual(readValue(f, { prefix: 'Dr.', first: ' Ana ', middle: '', last: 'López', suffix: null }, NOW), {
      prefix: 'Dr.',
      first: 'Ana',
      last: 'López',
    });
    assert.deepEqual(readValue(f, 'Ana', NOW), { first: 'Ana' });
    assert.deepEqual(readValue(f, { value: 'Ana' }, NOW), { first: 'Ana' });
    assert.equal(readValue(f, { first: '', last: null }, NOW), null);
  });

  it('refuses unknown or oversized subfields', () => {
    refuses(
      field('name'),
      { first: 'Ana', nickname: 'A' },
      'has no subfield "nickname" (use prefix, first, middle, initial, last, suffix)',
    );
    refuses(field('name'), { first: 'x'.repeat(501) }, 'must be at most 500 characters');
    refuses(field('name'), { first: ['Ana'] }, 'must be a string');
  });

  it('takes an address as its subfields', () => {
    const f = field('address');
    assert.deepEqual(
      readValue(f, { address: '1 Main St', city: 'Springfield', state: 'IL', zip: 62701, country: '' }, NOW),
      {
        address: '1 Main St',
        city: 'Springfield',
        state: 'IL',
        zip: '62701',
      },
    );
    refuses(f, { street: '1 Main St' }, 'has no subfield "street" (use address, address2, city, state, zip, country)');
    refuses(f, '1 Main St', 'must be an object of address, address2, city, state, zip, country');
  });
});

describe('matrix', () => {
  const attributes = { rows: ['Speed', 'Price'], columns: ['Good', 'Bad'] };

  it('takes one column per row, and leaves out rows without one', () => {
    assert.deepEqual(readValue(field('matrix', attributes), { Speed: 'Good', Price: [] }, NOW), { Speed: 'Good' });
    assert.equal(readValue(field('matrix', attributes), { Speed: [] }, NOW), null);
  });

  it('takes several columns per row when multiple is set, joined in the order sent', () => {
    assert.deepEqual(readValue(field('matrix', { ...attributes, multiple: true }), { Speed: ['Bad', 'Good'] }, NOW), {
      Speed: 'Bad, Good',
    });
    refuses(field('matrix', attributes), { Speed: ['Good', 'Bad'] }, 'row "Speed" takes one column');
  });

  it('refuses unknown rows and columns', () => {
    refuses(field('matrix', attributes), { Quality: 'Good' }, 'has no row "Quality"');
    refuses(field('matrix', attributes), { Speed: 'Fine' }, 'row "Speed": "Fine" is not a column');
    refuses(field('matrix', attributes), { Speed: 1 }, 'row "Speed": "1" is not a column');
    refuses(field('matrix', attributes), 'Good', 'must be an object of row → column');
  });
});

describe('creditcard', () => {
  const f = field('creditcard');
  const card = (number: string, more: Record<string, unknown> = {}) => ({
    number,
    expMonth: 1,
    expYear: nextYear,
    ...more,
  });

  it('keeps only the brand, the last four digits and the expiry', () => {
    assert.deepEqual(readValue(f, card('4111 1111 1111 1111', { cvv: '123', name: 'Ana López' }), NOW), {
      brand: 'visa',
      last4: '1111',
      expMonth: '01',
      expYear: String(nextYear),
    });
  });

  it('recognises the brands', () => {
    const brands: [string, string][] = [
      ['378282246310005', 'amex'],
      ['4012888888881881', 'visa'],
      ['5555555555554444', 'mastercard'],
      ['2223003122003222', 'mastercard'],
      ['6011111111111117', 'discover'],
      ['30569309025904', 'dinersclub'],
      ['3530111333300000', 'jcb'],
      ['6304000000000000', 'other'],
    ];
    for (const [number, brand] of brands)
      assert.equal((readValue(f, card(number), NOW) as Record<string, string>).brand, brand, number);
  });

  it('takes the number as digits with spaces or dashes, or as a number', () => {
    assert.equal((readValue(f, card('4111-1111-1111-1111'), NOW) as Record<string, string>).last4, '1111');
    assert.equal(
      (
        readValue(f, { number: 4111111111111111, expMonth: '12', expYear: String(nextYear) }, NOW) as Record<
          string,
          string
        >
      ).expMonth,
      '12',
    );
  });

  it('refuses numbers that fail the Luhn check or have the wrong length', () => {
    refuses(f, card('4111111111111112'), 'number is not a valid card number');
    refuses(f, card('41111111111'), 'number is not a valid card number');
    refuses(f, card('4111 1111 1111 1111 1111'), 'number is not a valid card number');
    refuses(f, card('4111x111111111111'), 'number is not a valid card number');
    refuses(f, { expMonth: 1, expYear: nextYear }, 'number is not a valid card number');
  });

  it('takes only the brands the field lists', () => {
    refuses(
      field('creditcard', { cardTypes: ['amex', 'mastercard'] }),
      card('4111111111111111'),
      'this form takes amex, mastercard cards',
    );
    refuses(field('creditcard', { cardTypes: ['visa'] }), card('6304000000000000'), 'this form takes visa cards');
  });

  it('refuses a bad or past expiry, a bad cvv and unknown parts', () => {
    refuses(f, card('4111111111111111', { expMonth: 13 }), 'expMonth must be 1 to 12');
    refuses(f, card('4111111111111111', { expMonth: 1.5 }), 'expMonth must be 1 to 12');
    refuses(f, card('4111111111111111', { expYear: 99 }), 'expYear must be a four-digit year');
    refuses(f, card('4111111111111111', { expYear: 2001 }), 'the card has expired');
    refuses(f, card('4111111111111111', { cvv: '12' }), 'cvv must be 3 or 4 digits');
    refuses(f, card('4111111111111111', { pin: '1234' }), 'has no part "pin"');
    refuses(f, '4111111111111111', 'must be an object with number, expMonth and expYear');
  });

  it('takes a card that expires this month, and refuses one that expired last month', () => {
    // The month of NOW (November 2026), not of the machine's clock: the check reads the time it is given.
    const stored = readValue(f, { number: '4111111111111111', expMonth: 11, expYear: 2026 }, NOW);
    assert.equal((stored as Record<string, string>).expYear, '2026');
    assert.throws(() => readValue(f, { number: '4111111111111111', expMonth: 10, expYear: 2026 }, NOW), ValueError);
  });
});

describe('file and signature', () => {
  const files: FileRef[] = [{ fileKey: 'k1', name: 'a.pdf', size: 10, contentType: 'application/pdf' }];

  it('take only files already checked against storage', () => {
    for (const type of ['file', 'signature'] as const) {
      assert.deepEqual(readValue(field(type), new ResolvedFiles(files), NOW), files);
      assert.equal(readValue(field(type), new ResolvedFiles([]), NOW), null);
      refuses(field(type), { subvalues: [{ subvalue: 'k1' }] }, 'takes fileKeys or inline uploads');
      // A JSON body cannot pose as checked files.
      refuses(field(type), { files }, 'takes fileKeys or inline uploads');
    }
  });

  it('are recognised as file lists once stored', () => {
    assert.deepEqual(fileRefs(files), files);
    assert.deepEqual(fileRefs([]), []);
    assert.equal(fileRefs(['a']), undefined);
    assert.equal(fileRefs({ fileKey: 'k' }), undefined);
    assert.equal(fileRefs([{ name: 'a.pdf' }]), undefined);
  });
});

describe('displayValue', () => {
  it('shows labels for options and values for the rest', () => {
    const options = [
      { label: 'Sales team', value: 'sales' },
      { label: 'Support', value: 'support' },
    ];
    assert.equal(displayValue(field('radio', {}, options), 'sales'), 'Sales team');
    assert.equal(displayValue(field('radio', {}, options), 'gone'), 'gone');
    assert.equal(displayValue(field('checkbox', {}, options), ['support', 'sales']), 'Support, Sales team');
    assert.equal(displayValue(field('text'), 'sales'), 'sales');
    assert.equal(displayValue(field('number'), 2.5), '2.5');
  });

  it('shows the first option of a value that two share, and a new list of options as it is', () => {
    const options = [
      { label: 'First', value: 'x' },
      { label: 'Second', value: 'x' },
      { label: 'Why', value: 'y' },
    ];
    const f = field('checkbox', {}, options);
    assert.equal(displayValue(f, ['y', 'x']), 'Why, First');
    assert.equal(displayValue(field('radio', {}, options), 'x'), 'First');
    // An edit gives the field a new list: what was looked up in the old one is not kept for it.
    f.options = [{ label: 'Ex', value: 'x' }];
    assert.equal(displayValue(f, ['y', 'x']), 'y, Ex');
    assert.throws(() => readValue(f, ['y'], 0), /"y" is not one of the options \(x\)/);
  });

  it('shows a name in its usual order and an address on one line', () => {
    assert.equal(
      displayValue(field('name'), { suffix: 'Jr.', last: 'López', first: 'Ana', prefix: 'Dr.' }),
      'Dr. Ana López Jr.',
    );
    assert.equal(
      displayValue(field('address'), {
        country: 'US',
        zip: '62701',
        state: 'IL',
        city: 'Springfield',
        address2: 'Apt 2',
        address: '1 Main St',
      }),
      '1 Main St, Apt 2, Springfield, IL 62701, US',
    );
    assert.equal(displayValue(field('address'), { city: 'Springfield', zip: '62701' }), 'Springfield, 62701');
    assert.equal(displayValue(field('address'), { state: 'IL' }), 'IL');
  });

  it('shows a card by brand and last digits, a matrix by rows, files by name', () => {
    assert.equal(
      displayValue(field('creditcard'), { brand: 'visa', last4: '1111', expMonth: '01', expYear: '2030' }),
      'visa ending in 1111, expires 01/2030',
    );
    assert.equal(displayValue(field('matrix'), { Speed: 'Good', Price: 'Bad, Good' }), 'Speed: Good; Price: Bad, Good');
    const files: FileRef[] = [
      { fileKey: 'k1', name: 'a.pdf', size: 1, contentType: 'application/pdf' },
      { fileKey: 'k2', name: 'b.png', size: 1, contentType: 'image/png' },
    ];
    assert.equal(displayValue(field('file'), files), 'a.pdf, b.png');
  });
});

describe('searchKeys and normalize', () => {
  it('normalize trims, lower-cases and keeps 200 characters', () => {
    assert.equal(normalize('  Ana LÓPEZ  '), 'ana lópez');
    assert.equal(normalize(`${'x'.repeat(250)}`), 'x'.repeat(200));
  });

  it('match a field by its whole shown value and by each part', () => {
    assert.deepEqual(searchKeys(field('name'), { first: 'Ana', last: 'López' }).sort(), ['ana', 'ana lópez', 'lópez']);
    assert.deepEqual(searchKeys(field('checkbox', {}, [{ label: 'Sales team', value: 'sales' }]), ['sales']).sort(), [
      'sales',
      'sales team',
    ]);
    assert.deepEqual(searchKeys(field('radio', {}, [{ label: 'Sales team', value: 'sales' }]), 'sales').sort(), [
      'sales',
      'sales team',
    ]);
    assert.deepEqual(searchKeys(field('text'), ' Hello '), ['hello']);
    assert.deepEqual(searchKeys(field('number'), 7), ['7']);
  });

  it('match files by name, and a card only as a whole, never by its parts', () => {
    const files: FileRef[] = [{ fileKey: 'k1', name: 'Report.PDF', size: 1, contentType: 'application/pdf' }];
    assert.deepEqual(searchKeys(field('file'), files), ['report.pdf']);
    assert.deepEqual(
      searchKeys(field('creditcard'), { brand: 'visa', last4: '1111', expMonth: '01', expYear: '2030' }),
      ['visa ending in 1111, expires 01/2030'],
    );
  });

  it('leave out empty keys', () => {
    assert.deepEqual(searchKeys(field('text'), '   '), []);
  });
});

describe('visibleFields', () => {
  function withLogic(f: FieldForValues, logic: FieldForValues['logic']): FieldForValues {
    return { ...f, logic };
  }

  it('shows or hides a field by its checks, all or any', () => {
    const topic = field('select', {}, ['sales', 'support']);
    const count = field('number');
    const showAll = withLogic(field('text'), {
      action: 'show',
      conditional: 'all',
      checks: [
        { field: topic.id, condition: 'equals', option: 'SALES' },
        { field: count.id, condition: 'greaterthan', option: '5' },
      ],
    });
    const hideAny = withLogic(field('text'), {
      action: 'hide',
      conditional: 'any',
      checks: [
        { field: topic.id, condition: 'equals', option: 'sales' },
        { field: count.id, condition: 'lessthan', option: '0' },
      ],
    });
    const fields = [topic, count, showAll, hideAny];
    const visible = (values: [number, StoredValue][]) => visibleFields(fields, new Map(values));

    assert.deepEqual(
      [
        ...visible([
          [topic.id, ['sales']],
          [count.id, 6],
        ]),
      ].sort(),
      [topic.id, count.id, showAll.id].sort(),
    );
    assert.deepEqual(
      [
        ...visible([
          [topic.id, ['sales']],
          [count.id, 5],
        ]),
      ].sort(),
      [topic.id, count.id].sort(),
    );
    assert.deepEqual(
      [
        ...visible([
          [topic.id, ['support']],
          [count.id, 1],
        ]),
      ].sort(),
      [topic.id, count.id, hideAny.id].sort(),
    );
    assert.deepEqual([...visible([[count.id, -1]])].sort(), [topic.id, count.id].sort());
  });

  it('reads each condition on text, case-insensitively', () => {
    const source = field('text');
    const cases: [string, string | undefined, StoredValue | undefined, boolean][] = [
      ['empty', undefined, undefined, true],
      ['empty', undefined, 'x', false],
      ['notempty', undefined, 'x', true],
      ['equals', 'HELLO', 'hello', true],
      ['notequals', 'hello', 'Hello', false],
      ['contains', 'ELL', 'hello', true],
      ['notcontains', 'xyz', 'hello', true],
      ['greaterthan', '10', '11', true],
      ['greaterthan', '10', 'ten', false],
      ['lessthan', '10', '9.5', true],
    ];
    for (const [condition, option, value, shown] of cases) {
      const target = withLogic(field('text'), {
        action: 'show',
        conditional: 'all',
        checks: [{ field: source.id, condition, option } as never],
      });
      const values = new Map<number, StoredValue>(value === undefined ? [] : [[source.id, value]]);
      assert.equal(
        visibleFields([source, target], values).has(target.id),
        shown,
        `${condition} ${option} on ${JSON.stringify(value)}`,
      );
    }
  });

  it('reads a name or an address by its shown value, and files by their names', () => {
    const name = field('name');
    const files = field('file');
    const byName = withLogic(field('text'), {
      action: 'show',
      conditional: 'all',
      checks: [{ field: name.id, condition: 'equals', option: 'ana lópez' }],
    });
    const byFile = withLogic(field('text'), {
      action: 'show',
      conditional: 'all',
      checks: [{ field: files.id, condition: 'contains', option: '.pdf' }],
    });
    const visible = visibleFields(
      [name, files, byName, byFile],
      new Map<number, StoredValue>([
        [name.id, { first: 'Ana', last: 'López' }],
        [files.id, [{ fileKey: 'k', name: 'cv.PDF', size: 1, contentType: 'application/pdf' }]],
      ]),
    );
    assert.ok(visible.has(byName.id));
    assert.ok(visible.has(byFile.id));
  });

  it('lets a check on a hidden field see it empty, through chains of logic', () => {
    const a = field('text');
    const b = withLogic(field('text'), {
      action: 'show',
      conditional: 'all',
      checks: [{ field: a.id, condition: 'equals', option: 'yes' }],
    });
    const c = withLogic(field('text'), {
      action: 'show',
      conditional: 'all',
      checks: [{ field: b.id, condition: 'notempty' }],
    });
    const d = withLogic(field('text'), {
      action: 'hide',
      conditional: 'all',
      checks: [{ field: c.id, condition: 'notempty' }],
    });
    const fields = [a, b, c, d];
    // b holds a value but is hidden (a is not "yes"), so c sees it empty and hides, and d shows.
    const values = new Map<number, StoredValue>([
      [a.id, 'no'],
      [b.id, 'something'],
      [c.id, 'more'],
    ]);
    assert.deepEqual([...visibleFields(fields, values)].sort(), [a.id, d.id].sort());
    values.set(a.id, 'yes');
    assert.deepEqual([...visibleFields(fields, values)].sort(), [a.id, b.id, c.id].sort());
  });

  it('treats a check on a field that is gone as a check on an empty value', () => {
    const target = withLogic(field('text'), {
      action: 'show',
      conditional: 'all',
      checks: [{ field: 999_999, condition: 'empty' }],
    });
    assert.ok(visibleFields([target], new Map()).has(target.id));
  });
});
