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
const WORD = new RegExp(`[${FTS_TOKEN_CHARS}]+`, 'gu');

/** ASCII text has no marks to take off: most values, spared the decomposition. */
export const NOT_ASCII = /[^\x00-\x7f]/; // eslint-disable-line no-control-regex -- the whole ASCII range, controls included

/**
 * WORD's ASCII part, for ASCII text: a class of a few ranges, where WORD's hundreds of ranges
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
  return (
    text
      .normalize('NFD')
      .replace(/\p{M}+/gu, '')
      .toLowerCase()
      .match(WORD)
      ?.map((w) => (w.length > MAX_WORD ? [...w].slice(0, MAX_WORD).join('') : w)) ?? []
  );
}

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
