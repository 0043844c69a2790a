import { Type, type Static } from '@sinclair/typebox';
import type { Submission, SubmissionDataEntry } from './schemas.js';

/**
 * A submission's values as an outbox job keeps them: `[field, label, type, value,
 * displayValue]`, with displayValue null where it is the value itself (a string shown as it
 * is). The detailed entry repeats each value up to three times under long keys, and a
 * submission event writes one copy per webhook and email: on SQLite those bytes were most of
 * what an event cost the request that caused it (two rows of 1.9 and 1.3 KB for the
 * benchmark's 10-field form, about 55 µs; packed, about half). Jobs written before packing
 * hold whole entries: both shapes are read.
 */
export const PackedEntry = Type.Tuple([
  Type.Integer(),
  Type.String(),
  Type.String(),
  Type.Unknown(),
  Type.Union([Type.String(), Type.Null()]),
]);
export type PackedEntry = Static<typeof PackedEntry>;

/** What an entry is made of, without parsedValue (always the value itself, see presentation.ts). */
export type ValueEntry = Omit<SubmissionDataEntry, 'parsedValue'>;

export function packEntry(e: ValueEntry): PackedEntry {
  return [e.field, e.label, e.type, e.value, e.value === e.displayValue ? null : e.displayValue];
}

const packed = new WeakMap<readonly ValueEntry[], PackedEntry[]>();

/**
 * The entries packed, once for every job of an event that carries them (a delivery per
 * webhook, a send per email): the same array, not a copy each.
 */
export function packEntries(entries: readonly ValueEntry[]): PackedEntry[] {
  let done = packed.get(entries);
  if (done === undefined) packed.set(entries, (done = entries.map(packEntry)));
  return done;
}

/** A packed entry, or a whole one from a job written before packing. */
export function unpackEntry(e: PackedEntry | ValueEntry): ValueEntry {
  if (!Array.isArray(e))
    return { field: e.field, label: e.label, type: e.type, value: e.value, displayValue: e.displayValue };
  const [field, label, type, value, shown] = e;
  return { field, label, type, value, displayValue: shown ?? (value as string) };
}

/** The detailed record as a webhook job keeps it: its entries packed. */
export type PackedSubmission = Omit<Submission, 'data'> & { data: PackedEntry[] };

export function packSubmission(submission: Submission): PackedSubmission {
  return { ...submission, data: packEntries(submission.data) };
}

/** The detailed record again, from a packed one or a whole one (a job written before packing). */
export function unpackSubmission(stored: PackedSubmission | Submission): Submission {
  return {
    ...stored,
    data: (stored.data as (PackedEntry | SubmissionDataEntry)[]).map((e) => {
      const entry = unpackEntry(e);
      return { ...entry, parsedValue: entry.value };
    }),
  };
}
