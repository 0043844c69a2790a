/** How v2 parameters are read (src/modules/v2/wire.ts): bracket notation, lists, booleans. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseQueryString } from '../../src/http/querystring.js';
import { Type } from '@sinclair/typebox';
import { FieldLogic } from '../../src/modules/fields/schemas.js';
import { PortalDetails, PortalForm, PortalFormUpdate, PortalUser } from '../../src/modules/portals/schemas.js';
import { rewriteV2Url } from '../../src/modules/v2/paths.js';
import {
  bool,
  fromV2,
  isoOfV2Time,
  list,
  nestParameters,
  optionalId,
  readAs,
  v2Time,
  v2Writer,
} from '../../src/modules/v2/wire.js';

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

describe('v2 times read', () => {
  it('are taken as v2 writes them, in Eastern Time, and given on as ISO', () => {
    assert.equal(isoOfV2Time('2026-12-31 07:00:00'), '2026-12-31T12:00:00.000Z');
    assert.equal(isoOfV2Time('2026-07-01 08:00:00'), '2026-07-01T12:00:00.000Z');
    assert.equal(isoOfV2Time(' 2026-07-04 '), '2026-07-04T04:00:00.000Z');
    // What v2Time writes reads back as the same second.
    for (const iso of ['2026-01-15T12:00:59.000Z', '2026-11-01T05:30:00.000Z', '2026-03-08T07:00:00.000Z'])
      assert.equal(isoOfV2Time(v2Time(iso)!), iso);
    for (const text of ['2026-02-30', '2026-12-31 24:00:00', '2026-12-31T12:00:00Z', '0099-01-01', 'soon', ''])
      assert.equal(isoOfV2Time(text), undefined, text);
  });

  it('are read so wherever the schema wants a date-time, and nowhere else', () => {
    assert.deepEqual(fromV2({ due_date: '2026-12-31 07:00:00' }, PortalFormUpdate), {
      dueDate: '2026-12-31T12:00:00.000Z',
    });
    assert.deepEqual(fromV2({ due_date: '2026-12-31T12:00:00Z' }, PortalFormUpdate), {
      dueDate: '2026-12-31T12:00:00Z',
    });
    assert.deepEqual(fromV2({ due_date: '' }, PortalFormUpdate), { dueDate: null });
    assert.equal(readAs('2026-12-31 07:00:00', Type.String()), '2026-12-31 07:00:00');
  });
});

describe('v2 answers', () => {
  it('write in Eastern Time the members their v2025 schema says are times, and no other text', () => {
    const iso = '2026-07-01T12:00:00.000Z';
    const eastern = '2026-07-01 08:00:00';
    const portal = {
      id: 3,
      name: iso,
      description: iso,
      url: 'https://forms.example.com/p/x',
      avatar: null,
      formsCount: 1,
      usersCount: 1,
      created: iso,
      updated: iso,
      forms: [
        { portalId: 3, formId: 9, name: iso, url: iso, dueDate: iso, required: false, created: iso, updated: iso },
      ],
      users: [{ id: 4, portalId: 3, email: 'a@example.com', name: iso, lastSignIn: iso, created: iso, updated: iso }],
    };
    assert.deepEqual(v2Writer(PortalDetails, { PortalForm, PortalUser })(portal), {
      id: '3',
      name: iso,
      description: iso,
      url: 'https://forms.example.com/p/x',
      avatar: null,
      forms_count: 1,
      users_count: 1,
      created: eastern,
      updated: eastern,
      forms: [
        {
          portal_id: '3',
          form_id: '9',
          name: iso,
          url: iso,
          due_date: eastern,
          required: false,
          created: eastern,
          updated: eastern,
        },
      ],
      users: [
        {
          id: '4',
          portal_id: '3',
          email: 'a@example.com',
          name: iso,
          last_sign_in: eastern,
          created: eastern,
          updated: eastern,
        },
      ],
    });
  });

  it('are checked for refs they cannot follow when declared', () => {
    assert.throws(() => v2Writer(PortalDetails, { PortalForm }), /PortalUser/);
  });
});

describe('v2 paths', () => {
  it('end in .json or .xml in any case', () => {
    assert.equal(rewriteV2Url('/api/v2/form/1.JSON?per_page=1', '/api/v2025'), '/api/v2/form/1?per_page=1');
    assert.equal(rewriteV2Url('/api/v2/form/1/.Json', '/api/v2025'), '/api/v2/form/1');
    assert.equal(rewriteV2Url('/api/v2/forms/1.JSON', '/api/v2025'), '/api/v2025/forms/1');
    assert.equal(rewriteV2Url('/api/v2/form/1.XML', '/api/v2025'), '/api/v2/.xml');
    // The prefix itself is not read in any case, nor are other versions.
    assert.equal(rewriteV2Url('/API/V2/forms/1.json', '/api/v2025'), '/API/V2/forms/1.json');
    assert.equal(rewriteV2Url('/api/v2025/forms/1', '/api/v2025'), '/api/v2025/forms/1');
  });
});
