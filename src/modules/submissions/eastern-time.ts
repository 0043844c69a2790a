/**
 * Times that the spec gives in Eastern Time (America/New_York), turned into UTC
 * milliseconds with daylight saving time handled. A wall-clock time that a spring change
 * skips is read as the moment one hour later (2:30 becomes 3:30 EDT); one that an autumn
 * change repeats is read as its first occurrence for a lower bound and its second for an
 * upper bound, so that a range given in wall-clock times covers both.
 */
const ZONE = 'America/New_York';
const formatter = new Intl.DateTimeFormat('en-US', {
  timeZone: ZONE,
  hourCycle: 'h23',
  year: 'numeric',
  month: 'numeric',
  day: 'numeric',
  hour: 'numeric',
  minute: 'numeric',
  second: 'numeric',
});

// Eastern offsets (since 1883) change only on whole UTC hours; formatToParts is slow enough to show in profiles.
const offsetByHour = new Map<number, number>();

/** Minutes that Eastern Time is ahead of UTC at this instant (-300 or -240). */
function offsetMinutes(utcMs: number): number {
  const hour = Math.floor(utcMs / 3_600_000);
  let offset = offsetByHour.get(hour);
  if (offset === undefined) {
    offset = formatterOffset(hour * 3_600_000);
    if (offsetByHour.size >= 10_000) offsetByHour.clear();
    offsetByHour.set(hour, offset);
  }
  return offset;
}

function formatterOffset(utcMs: number): number {
  const parts: Record<string, number> = {};
  for (const p of formatter.formatToParts(new Date(utcMs))) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  const wall = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
  return Math.round((wall - Math.floor(utcMs / 1000) * 1000) / 60_000);
}

/**
 * The first year a query's Eastern time may name: Date.UTC reads the years 0 to 99 as 1900 to
 * 1999, and before 1883 New York kept local mean time, offsets no bound here is meant for.
 */
export const FIRST_YEAR = 1900;

export const EASTERN_TIME_PATTERN = '^\\d{4}-\\d{2}-\\d{2}( \\d{2}:\\d{2}:\\d{2})?$';

export interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  /** Only a date was given. */
  dateOnly: boolean;
}

/** Reads YYYY-MM-DD or YYYY-MM-DD HH:MM:SS; undefined when it is no real date and time. */
export function parseWallTime(text: string): WallTime | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?: (\d{2}):(\d{2}):(\d{2}))?$/.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const probe = new Date(Date.UTC(year, month - 1, day));
  if (probe.getUTCFullYear() !== year || probe.getUTCMonth() !== month - 1 || probe.getUTCDate() !== day)
    return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  return { year, month, day, hour, minute, second, dateOnly: m[4] === undefined };
}

/** The UTC instant of an Eastern wall-clock time; which of two, when it occurs twice. */
export function easternToUtc(t: Omit<WallTime, 'dateOnly'>, occurrence: 'first' | 'last'): number {
  const wall = Date.UTC(t.year, t.month - 1, t.day, t.hour, t.minute, t.second);
  // Eastern Time is 4 or 5 hours behind UTC: the instant is one of these two, or neither.
  const candidates = [wall + 4 * 3_600_000, wall + 5 * 3_600_000].filter(
    (utc) => utc + offsetMinutes(utc) * 60_000 === wall,
  );
  if (candidates.length === 0) {
    // Skipped by the spring change: read with the offset in force before it.
    return wall - offsetMinutes(wall - 12 * 3_600_000) * 60_000;
  }
  return occurrence === 'first' ? candidates[0]! : candidates[candidates.length - 1]!;
}

/** The first millisecond a lower bound (minTime, startDate) includes. */
export function lowerBound(t: WallTime): number {
  return easternToUtc(t, 'first');
}

/** The last millisecond an upper bound (maxTime) includes: the end of its day or second. */
export function upperBound(t: WallTime): number {
  if (t.dateOnly) {
    const next = new Date(Date.UTC(t.year, t.month - 1, t.day + 1));
    return (
      easternToUtc(
        {
          year: next.getUTCFullYear(),
          month: next.getUTCMonth() + 1,
          day: next.getUTCDate(),
          hour: 0,
          minute: 0,
          second: 0,
        },
        'first',
      ) - 1
    );
  }
  return easternToUtc(t, 'last') + 999;
}

/** The calendar day in Eastern Time that an instant falls on. */
export function easternDay(utcMs: number): Pick<WallTime, 'year' | 'month' | 'day'> {
  const local = new Date(utcMs + offsetMinutes(utcMs) * 60_000);
  return { year: local.getUTCFullYear(), month: local.getUTCMonth() + 1, day: local.getUTCDate() };
}

/** An instant as the original service's v2 API writes times: `YYYY-MM-DD HH:MM:SS` in Eastern Time. */
export function easternDateTime(utcMs: number): string {
  const local = new Date(Math.floor(utcMs / 1000) * 1000 + offsetMinutes(utcMs) * 60_000);
  return local.toISOString().slice(0, 19).replace('T', ' ');
}
