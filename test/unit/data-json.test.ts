/**
 * dataJson (src/modules/submissions/definitions.ts), which writes a create's values as JSON text
 * on the hot path, against what it replaced: JSON.stringify(Object.fromEntries(data)), byte for
 * byte, whatever order the values were set in and whatever they hold.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dataJson, type DataMap } from '../../src/modules/submissions/definitions.js';
import type { StoredValue } from '../../src/modules/submissions/values.js';

const VALUES: StoredValue[] = [
  'plain',
  '',
  'quote " backslash \\ line\nbreak tab\t nul \u0000 and \u2028',
  'Ünïcödé — 漢字 😀 lone \ud800 surrogate',
  0,
  -12.5,
  1e21,
  ['analytics', 'security'],
  [],
  { first: 'Ada', last: 'Lovelace', '1': 'numeric key' },
  [{ fileKey: 'k/1', name: 'a "b".pdf', size: 3, contentType: 'application/pdf' }] as unknown as StoredValue,
];

describe('dataJson', () => {
  it('writes what JSON.stringify(Object.fromEntries(data)) writes', () => {
    const expected = (data: DataMap) => JSON.stringify(Object.fromEntries(data));
    assert.equal(dataJson(new Map()), expected(new Map()));
    // Ids set in every kind of order, of several digit counts, so that the keys' order is tested.
    const ids = [7, 1003, 12, 999_999, 1, 40, 2_147_483_647, 100, 5, 64, 3];
    for (let seed = 1; seed <= 50; seed++) {
      const order = [...ids].sort((a, b) => ((a * seed) % 97) - ((b * seed) % 97));
      const data: DataMap = new Map(order.map((id, i) => [id, VALUES[(i + seed) % VALUES.length]!]));
      assert.equal(dataJson(data), expected(data));
    }
  });
});
