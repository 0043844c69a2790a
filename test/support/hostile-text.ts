/**
 * Strings as a careless or hostile client sends them, for the property tests: mostly plain
 * text, some with a NUL or a lone surrogate (which no input takes), some with characters that
 * look alike but are fine (U+FFFD itself, astral characters, U+2028), some 100,000 characters
 * long. And an oracle, written apart from the service's own check, for which of them break.
 */
import fc from 'fast-check';

const BREAKING = ['\u0000', '\ud800', '\udbff', '\udc00', '\udfff'];
const FINE = [
  'a',
  'Z',
  ' ',
  'é',
  '😀',
  '𝄞',
  '\ufffd',
  '\u2028',
  '\ufeff',
  '%',
  '+',
  '&',
  '=',
  '"',
  '\\',
  '/',
  '.',
  '\t',
  '\n',
  '日',
];

export const LONG = 100_000;

export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }) },
  { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(...FINE), minLength: 1, maxLength: 12 }) },
  // Surrogate halves next to each other sometimes make a valid pair: the oracle decides.
  { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom(...FINE, ...BREAKING), minLength: 1, maxLength: 12 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.string({ unit: 'grapheme', maxLength: 8 }),
        fc.constantFrom(...BREAKING),
        fc.string({ unit: 'grapheme', maxLength: 8 }),
      )
      .map(([a, b, c]) => a + b + c),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'x'.repeat(LONG),
      'é'.repeat(LONG),
      `${'y'.repeat(LONG - 1)}\u0000`,
      '😀'.repeat(LONG / 2),
    ),
  },
);

const wellFormed = (s: string) => !s.includes('\u0000') && (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Paths (named as error details name them) of the strings and property names that break the rule. */
export function brokenPaths(value: unknown, path = 'body', out: string[] = []): string[] {
  if (typeof value === 'string') {
    if (!wellFormed(value)) out.push(path);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => brokenPaths(v, `${path}[${i}]`, out));
  } else if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      if (!wellFormed(k)) out.push(path);
      else brokenPaths(v, /^\d+$/.test(k) ? `${path}[${k}]` : `${path}.${k}`, out);
    }
  }
  return out;
}

/** The size of a JSON body on the wire, to tell a 413 that the body limit explains. */
export const wireSize = (body: unknown) => Buffer.byteLength(JSON.stringify(body) ?? '');
