import type { SearchTerm } from '../../db/engine.js';
import { FTS_TOKEN_CHARS } from './fts-token-chars.js';

/**
 * Tokens of the full-text index, made the same way for what is stored and what is
 * searched, so that SQLite's FTS5 and PostgreSQL's tsvector hold identical tokens:
 *
 * - words: lower case, accents removed, split on anything that is not a letter or digit
 *   that FTS5's unicode61 tokenizer keeps (its Unicode 6.1 tables: a letter it classes
 *   otherwise, such as U+19B0, separates words on both databases, or what is stored and what
 *   is searched would split apart); a keyword search matches them as prefixes;
 * - field tokens: `_f<fieldId>x<hex of the normalized value>`, one per searchable value of a
 *   field; a field search for a whole value matches its token exactly, one for a start of
 *   a value (`abc*`) matches it as a prefix, since hex keeps UTF-8 prefixes as prefixes;
 * - the form token `_form<formId>`, so that a search counts and pages inside the index.
 *
 * Words never contain '_', so no keyword (not even as a prefix) reaches the other tokens,
 * and no token holds anything but letters, digits and '_': no query syntax gets in.
 */

/** ASCII text has no marks to take off: most values, spared the decomposition. */
export const NOT_ASCII = /[^\x00-\x7f]/; // eslint-disable-line no-control-regex -- the whole ASCII range, controls included

/**
 * FTS_TOKEN_CHARS's ASCII part, for ASCII text: a class of a few ranges, where its hundreds of ranges
 * (and its `u` flag) made matching it the larger part of making a submission's tokens
 * (test/unit/keywords.test.ts checks that the two agree on every ASCII character).
 */
export const ASCII_WORD = /[0-9a-z]+/g;

export function words(text: string): string[] {
  if (!NOT_ASCII.test(text)) {
    // One character a code unit: a long word is cut by slice.
    return (
      text
        .toLowerCase()
        .match(ASCII_WORD)
        ?.map((w) => (w.length > MAX_WORD ? w.slice(0, MAX_WORD) : w)) ?? []
    );
  }
  const decomposed = text.normalize('NFD');
  // Σ is the one letter whose lower case depends on what is around it (a final sigma), and a
  // mark next to it can change that: there the marks go before the lower-casing, as they did.
  return wordsOfDecomposed(
    decomposed.includes('\u03a3') ? decomposed.replace(/\p{M}+/gu, '').toLowerCase() : decomposed.toLowerCase(),
  );
}

/** What a character is to the words of decomposed text: between words, in one, or a mark (dropped). */
const SEPARATOR = 0;
const WORD_CHAR = 1;
const MARK = 2;

const ONE_WORD_CHAR = new RegExp(`^[${FTS_TOKEN_CHARS}]$`, 'u');
const ONE_MARK = /^\p{M}$/u;

/** The class of each code point of the Basic Multilingual Plane, made at the first text that needs it. */
let bmpClasses: Uint8Array | undefined;

function classesOfBmp(): Uint8Array {
  const classes = new Uint8Array(0x10000);
  for (let c = 0; c < 0x10000; c++) {
    const ch = String.fromCharCode(c);
    classes[c] = ONE_MARK.test(ch) ? MARK : ONE_WORD_CHAR.test(ch) ? WORD_CHAR : SEPARATOR;
  }
  return classes;
}

/**
 * The words of text already decomposed (NFD) and lower-cased: runs of FTS_TOKEN_CHARS, with
 * the marks (accents) inside and around them dropped. One pass over a table of classes: the
 * regular expressions this replaces (marks out, then a class of hundreds of ranges matched
 * with the `u` flag) took 48 ms for a 1 MB submission of accented text, most of its cost on
 * the event loop. Taking the marks out after lower-casing rather than before changes nothing
 * but around Σ (see words): no mark has a case, and the one letter whose lower case holds a
 * mark (U+0130) is decomposed by NFD first (test/unit/keywords.test.ts compares both ways over
 * every code point).
 */
function wordsOfDecomposed(text: string): string[] {
  const classes = (bmpClasses ??= classesOfBmp());
  const out: string[] = [];
  // The word so far (pieces cut by marks), where its current piece starts, -1 between words.
  let word = '';
  let start = -1;
  for (let i = 0; i < text.length;) {
    const code = text.charCodeAt(i);
    let size = 1;
    let kind: number;
    if (code >= 0xd800 && code < 0xdc00 && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1);
      if (low >= 0xdc00 && low < 0xe000) size = 2;
    }
    if (size === 1) kind = classes[code]!;
    else {
      const ch = text.slice(i, i + 2);
      kind = ONE_MARK.test(ch) ? MARK : ONE_WORD_CHAR.test(ch) ? WORD_CHAR : SEPARATOR;
    }
    if (kind === WORD_CHAR) {
      if (start < 0) {
        start = i;
        word = '';
      }
    } else if (kind === MARK) {
      if (start >= 0) {
        word += text.slice(start, i);
        start = i + size;
      }
    } else if (start >= 0) {
      out.push(cut(word + text.slice(start, i)));
      start = -1;
    }
    i += size;
  }
  if (start >= 0) out.push(cut(word + text.slice(start)));
  return out;
}

const cut = (w: string): string => (w.length > MAX_WORD ? [...w].slice(0, MAX_WORD).join('') : w);

/**
 * Longest word kept, in characters; a longer one is cut, in what is stored and what is
 * searched alike (so a search for it still matches, as a prefix). PostgreSQL takes no
 * lexeme over 2047 bytes, and 200 characters are at most 800.
 */
const MAX_WORD = 200;

/** The distinct words of a keyword query, at most 10 (more narrows nothing useful and costs more). */
export function queryWords(keyword: string): string[] {
  return [...new Set(words(keyword))].slice(0, 10);
}

/** The character codes of the two hex digits of each ASCII code (its UTF-8 byte): 2c and 2c + 1. */
const ASCII_HEX_CODES = Uint8Array.from({ length: 256 }, (_, i) =>
  (i >> 1)
    .toString(16)
    .padStart(2, '0')
    .charCodeAt(i % 2),
);

/** Where a token of ASCII text is spelled out, grown as needed: one token at a time (tokens are made synchronously). */
let spelling = Buffer.allocUnsafe(512);

/**
 * `_f<fieldId>x<hex of the value's UTF-8 bytes>`. For ASCII text (most values) the whole token is
 * spelled into one reused buffer and read out as one string: built by concatenation, a long
 * value's hex was a chain of a string per character (most of a create's index garbage), which
 * the token set then had to flatten to hash it. Buffer.from(text).toString('hex') took twice as
 * long (docs/performance.md, "Twentieth" and "Twenty-second pass").
 */
export function fieldToken(fieldId: number, normalizedValue: string): string {
  if (NOT_ASCII.test(normalizedValue)) return `_f${fieldId}x${Buffer.from(normalizedValue, 'utf8').toString('hex')}`;
  const id = String(fieldId);
  const length = id.length + 3 + 2 * normalizedValue.length;
  if (length > spelling.length) spelling = Buffer.allocUnsafe(2 * length);
  // Byte by byte: Buffer.write of the prefix cost as much as the rest of a short token.
  let at = 0;
  spelling[at++] = 0x5f; // _
  spelling[at++] = 0x66; // f
  for (let i = 0; i < id.length; i++) spelling[at++] = id.charCodeAt(i);
  spelling[at++] = 0x78; // x
  for (let i = 0; i < normalizedValue.length; i++) {
    const code = normalizedValue.charCodeAt(i) << 1;
    spelling[at++] = ASCII_HEX_CODES[code]!;
    spelling[at++] = ASCII_HEX_CODES[code + 1]!;
  }
  return spelling.toString('latin1', 0, length);
}

export function formToken(formId: number): string {
  return `_form${formId}`;
}

/** One term of a search: a token, matched whole or as a prefix (each engine writes its own query of them). */
export type Term = SearchTerm;
