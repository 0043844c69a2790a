/**
 * minTime, maxTime and startDate are read in America/New_York: these cases pin down how a
 * wall-clock time becomes a UTC instant around the daylight saving changes, with no server.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  EASTERN_TIME_PATTERN,
  easternDay,
  easternToUtc,
  lowerBound,
  parseWallTime,
  upperBound,
  type WallTime,
} from '../../src/modules/submissions/eastern-time.js';

const utc = (iso: string) => Date.parse(iso);
const wall = (text: string): WallTime => {
  const t = parseWallTime(text);
  assert.ok(t, `${text} should parse`);
  return t;
};

describe('parseWallTime', () => {
  it('reads a date, or a date and a time', () => {
    assert.deepEqual(parseWallTime('2024-03-10'), {
      year: 2024,
      month: 3,
      day: 10,
      hour: 0,
      minute: 0,
      second: 0,
      dateOnly: true,
    });
    assert.deepEqual(parseWallTime('2024-03-10 02:30:05'), {
      year: 2024,
      month: 3,
      day: 10,
      hour: 2,
      minute: 30,
      second: 5,
      dateOnly: false,
    });
  });

  it('refuses days that do not exist, and leap days of years without one', () => {
    assert.ok(parseWallTime('2024-02-29'));
    assert.equal(parseWallTime('2023-02-29'), undefined);
    assert.equal(parseWallTime('2024-02-30'), undefined);
    assert.equal(parseWallTime('2024-04-31'), undefined);
    assert.equal(parseWallTime('2024-13-01'), undefined);
    assert.equal(parseWallTime('2024-00-10'), undefined);
    assert.equal(parseWallTime('2024-01-00'), undefined);
  });

  it('refuses times out of range', () => {
    assert.ok(parseWallTime('2024-01-01 23:59:59'));
    assert.equal(parseWallTime('2024-01-01 24:00:00'), undefined);
    assert.equal(parseWallTime('2024-01-01 12:60:00'), undefined);
    assert.equal(parseWallTime('2024-01-01 12:00:60'), undefined);
  });

  it('refuses any other shape: ISO T, zones, missing seconds, padding', () => {
    for (const text of [
      '2024-01-01T00:00:00',
      '2024-01-01 00:00:00Z',
      '2024-01-01 00:00',
      '2024-1-01',
      ' 2024-01-01',
      '2024-01-01 ',
      '',
      'yesterday',
    ]) {
      assert.equal(parseWallTime(text), undefined, text);
    }
  });

  it('agrees with the pattern the route schemas publish', () => {
    const pattern = new RegExp(EASTERN_TIME_PATTERN);
    for (const text of ['2024-03-10', '2024-03-10 02:30:05']) assert.ok(pattern.test(text), text);
    for (const text of ['2024-03-10T02:30:05', '2024-03-10 02:30', '10/03/2024']) assert.ok(!pattern.test(text), text);
  });
});

describe('Eastern Time to UTC', () => {
  it('reads winter times as EST (UTC-5) and summer times as EDT (UTC-4)', () => {
    assert.equal(lowerBound(wall('2024-01-15 09:00:00')), utc('2024-01-15T14:00:00Z'));
    assert.equal(lowerBound(wall('2024-07-15 09:00:00')), utc('2024-07-15T13:00:00Z'));
  });

  it('reads the last moments before the spring change as EST and the first after it as EDT', () => {
    assert.equal(lowerBound(wall('2024-03-10 01:59:59')), utc('2024-03-10T06:59:59Z'));
    assert.equal(lowerBound(wall('2024-03-10 03:00:00')), utc('2024-03-10T07:00:00Z'));
  });

  it('reads a time that the spring change skips as the moment one hour later', () => {
    // 2:00 to 2:59:59 do not exist on 10 March 2024: 2:30 is taken as 3:30 EDT.
    assert.equal(lowerBound(wall('2024-03-10 02:00:00')), utc('2024-03-10T07:00:00Z'));
    assert.equal(lowerBound(wall('2024-03-10 02:30:00')), utc('2024-03-10T07:30:00Z'));
    assert.equal(upperBound(wall('2024-03-10 02:30:00')), utc('2024-03-10T07:30:00.999Z'));
    assert.equal(
      easternToUtc({ year: 2024, month: 3, day: 10, hour: 2, minute: 30, second: 0 }, 'first'),
      utc('2024-03-10T07:30:00Z'),
    );
    assert.equal(
      easternToUtc({ year: 2024, month: 3, day: 10, hour: 2, minute: 30, second: 0 }, 'last'),
      utc('2024-03-10T07:30:00Z'),
    );
  });

  it('reads a time that the autumn change repeats as its first occurrence for a lower bound and its second for an upper bound', () => {
    // 1:00 to 1:59:59 happen twice on 3 November 2024: first in EDT, then in EST.
    assert.equal(
      easternToUtc({ year: 2024, month: 11, day: 3, hour: 1, minute: 30, second: 0 }, 'first'),
      utc('2024-11-03T05:30:00Z'),
    );
    assert.equal(
      easternToUtc({ year: 2024, month: 11, day: 3, hour: 1, minute: 30, second: 0 }, 'last'),
      utc('2024-11-03T06:30:00Z'),
    );
    assert.equal(lowerBound(wall('2024-11-03 01:30:00')), utc('2024-11-03T05:30:00Z'));
    assert.equal(upperBound(wall('2024-11-03 01:30:00')), utc('2024-11-03T06:30:00.999Z'));
    // So a range from 1:00 to 1:59:59 covers both hours.
    assert.equal(upperBound(wall('2024-11-03 01:59:59')) - lowerBound(wall('2024-11-03 01:00:00')), 2 * 3_600_000 - 1);
  });

  it('has one reading for the times either side of the repeated hour', () => {
    assert.equal(
      easternToUtc({ year: 2024, month: 11, day: 3, hour: 0, minute: 59, second: 59 }, 'last'),
      utc('2024-11-03T04:59:59Z'),
    );
    assert.equal(
      easternToUtc({ year: 2024, month: 11, day: 3, hour: 2, minute: 0, second: 0 }, 'first'),
      utc('2024-11-03T07:00:00Z'),
    );
  });

  it('takes a whole day for a date: from its first millisecond to its last, 23 or 25 hours on change days', () => {
    assert.equal(lowerBound(wall('2024-01-15')), utc('2024-01-15T05:00:00Z'));
    assert.equal(upperBound(wall('2024-01-15')), utc('2024-01-16T04:59:59.999Z'));
    assert.equal(upperBound(wall('2024-03-10')) + 1 - lowerBound(wall('2024-03-10')), 23 * 3_600_000);
    assert.equal(upperBound(wall('2024-11-03')) + 1 - lowerBound(wall('2024-11-03')), 25 * 3_600_000);
  });

  it('ends a date at the end of the month and of the year', () => {
    assert.equal(upperBound(wall('2024-02-29')), utc('2024-03-01T04:59:59.999Z'));
    assert.equal(upperBound(wall('2024-12-31')), utc('2025-01-01T04:59:59.999Z'));
  });

  it('ends a date-and-time bound at the end of its second', () => {
    assert.equal(upperBound(wall('2024-07-15 09:00:00')), utc('2024-07-15T13:00:00.999Z'));
  });

  it('follows the rules in force in the year asked about (before 2007, the first Sunday of April)', () => {
    // 12 March 2006, the second Sunday of March (the change day since 2007), was still EST; 2 April 2006 skipped 2:00 to 3:00.
    assert.equal(lowerBound(wall('2006-03-12 12:00:00')), utc('2006-03-12T17:00:00Z'));
    assert.equal(lowerBound(wall('2006-04-02 02:30:00')), utc('2006-04-02T07:30:00Z'));
    assert.equal(lowerBound(wall('2006-04-02 12:00:00')), utc('2006-04-02T16:00:00Z'));
  });
});

describe('easternDay', () => {
  it('puts an instant on the Eastern calendar day, which starts at 05:00 UTC in winter and 04:00 in summer', () => {
    assert.deepEqual(easternDay(utc('2024-01-01T04:59:59.999Z')), { year: 2023, month: 12, day: 31 });
    assert.deepEqual(easternDay(utc('2024-01-01T05:00:00Z')), { year: 2024, month: 1, day: 1 });
    assert.deepEqual(easternDay(utc('2024-07-01T03:59:59.999Z')), { year: 2024, month: 6, day: 30 });
    assert.deepEqual(easternDay(utc('2024-07-01T04:00:00Z')), { year: 2024, month: 7, day: 1 });
  });

  it('keeps the repeated hour of the autumn change on its own day', () => {
    assert.deepEqual(easternDay(utc('2024-11-03T05:30:00Z')), { year: 2024, month: 11, day: 3 });
    assert.deepEqual(easternDay(utc('2024-11-03T06:30:00Z')), { year: 2024, month: 11, day: 3 });
    assert.deepEqual(easternDay(utc('2024-11-04T04:59:59.999Z')), { year: 2024, month: 11, day: 3 });
  });

  it('agrees with the bounds of a date', () => {
    for (const date of ['2024-03-10', '2024-11-03', '2024-06-21', '2024-12-31']) {
      const t = wall(date);
      const day = { year: t.year, month: t.month, day: t.day };
      assert.deepEqual(easternDay(lowerBound(t)), day, date);
      assert.deepEqual(easternDay(upperBound(t)), day, date);
      assert.notDeepEqual(easternDay(lowerBound(t) - 1), day, date);
      assert.notDeepEqual(easternDay(upperBound(t) + 1), day, date);
    }
  });
});
