/** How v2 parameters are read (src/modules/v2/wire.ts): bracket notation, lists, booleans. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseQueryString } from '../../src/http/querystring.js';
import { Type } from '@sinclair/typebox';
import { FieldLogic } from '../../src/modules/fields/schemas.js';
import { bool, fromV2, list, nestParameters, optionalId, readAs, v2Time } from '../../src/modules/v2/wire.js';

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

  it('nests five levels deep at most, and drops [] anywhere but last', () => {
    assert.deepEqual(nestParameters({ 'a[b][0][c][d]': 'x', 'a[b][0][c][d][e]': 'too deep', 'a[][b]': '?' }), {
      a: { b: [{ c: { d: 'x' } }] },
    });
  });

  it('reads nested values by the schema: names, lists in index order, types; unknown names left out', () => {
    const Schema = Type.Object({
      logic: Type.Union([FieldLogic, Type.Null()]),
      limits: Type.Object({ maxCount: Type.Integer(), ratio: Type.Number(), on: Type.Boolean() }),
      parent: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
      tags: Type.Array(Type.String()),
    });
    const read = fromV2(
      {
        logic: {
          action: 'show',
          conditional: 'any',
          colour: 'red',
          checks: { '1': { field: '7', condition: 'empty' }, '0': { field: '12', condition: 'equals', option: 'Yes' } },
        },
        limits: { max_count: '3', ratio: '0.5', on: 'yes' },
        parent: '0',
        tags: { '': ['a', 'b'] },
        access_token: 'never passed on',
        unknown: { deep: '1' },
      },
      Schema,
    );
    assert.deepEqual(read, {
      logic: {
        action: 'show',
        conditional: 'any',
        checks: [
          { field: 12, condition: 'equals', option: 'Yes' },
          { field: 7, condition: 'empty' },
        ],
      },
      limits: { maxCount: 3, ratio: 0.5, on: true },
      parent: null,
      tags: ['a', 'b'],
    });
    // Wrong shapes are passed on for the schema to refuse, never guessed at.
    assert.deepEqual(readAs({ field: { x: '1' } }, FieldLogic.properties.checks.items), { field: { x: '1' } });
    assert.deepEqual(readAs({ x: '1' }, FieldLogic.properties.checks), { x: '1' });
    assert.equal(readAs('twelve', Type.Integer()), 'twelve');
    // 0 is none for an id that may be null, not for a number that may be.
    assert.equal(readAs('0', Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])), null);
    assert.equal(readAs('0', Type.Union([Type.Number(), Type.Null()])), 0);
    assert.equal(readAs('2.5', Type.Union([Type.Number(), Type.Null()])), 2.5);
    assert.equal(readAs('', Type.Union([FieldLogic, Type.Null()])), null);
    assert.deepEqual(readAs('a, b', Type.Array(Type.String())), ['a', 'b']);
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
