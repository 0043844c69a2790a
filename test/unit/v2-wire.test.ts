/** How v2 parameters are read (src/modules/v2/wire.ts): bracket notation, lists, booleans. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseQueryString } from '../../src/http/querystring.js';
import { bool, list, nestParameters, optionalId, v2Time } from '../../src/modules/v2/wire.js';

describe('v2 parameters', () => {
  it('nests bracket notation into objects and lists', () => {
    assert.deepEqual(
      nestParameters({ 'field_12[first]': 'Ada', 'field_12[last]': 'Lovelace', 'options[1]': 'L', 'options[0]': 'S' }),
      { field_12: { first: 'Ada', last: 'Lovelace' }, options: ['S', 'L'] },
    );
    assert.deepEqual(nestParameters({ 'tags[]': ['a', 'b'] }), { tags: ['a', 'b'] });
    assert.deepEqual(nestParameters(parseQueryString('tags[]=a&tags[]=b')), { tags: ['a', 'b'] });
    assert.deepEqual(nestParameters({ '__proto__[x]': '1', 'a[constructor]': '2' }), {});
  });

  it('reads booleans, lists and ids where 0 means none', () => {
    for (const v of ['1', 'true', 'TRUE', true, 1]) assert.equal(bool(v), true, String(v));
    for (const v of ['0', 'false', '', false, 0]) assert.equal(bool(v), false, String(v));
    assert.equal(bool('maybe'), 'maybe');
    assert.deepEqual(list('a, b,c'), ['a', 'b', 'c']);
    assert.deepEqual(list(''), []);
    assert.equal(optionalId('0'), null);
    assert.equal(optionalId('12'), 12);
  });
});

describe('v2 times', () => {
  it('are written in Eastern Time, with daylight saving time', () => {
    assert.equal(v2Time('2026-07-01T12:00:00.000Z'), '2026-07-01 08:00:00');
    assert.equal(v2Time('2026-01-15T12:00:59.900Z'), '2026-01-15 07:00:59');
    // The autumn change: 05:30 UTC is 01:30 EDT, 06:30 UTC is 01:30 EST.
    assert.equal(v2Time('2026-11-01T05:30:00.000Z'), '2026-11-01 01:30:00');
    assert.equal(v2Time('2026-11-01T06:30:00.000Z'), '2026-11-01 01:30:00');
    assert.equal(v2Time(null), null);
  });
});
