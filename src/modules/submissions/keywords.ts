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

/** Two hex digits of each ASCII code (its UTF-8 byte). */
const ASCII_HEX = Array.from({ length: 128 }, (_, i) => i.toString(16).padStart(2, '0'));

/**
 * The hex of text's UTF-8 bytes; ASCII text without a Buffer, which took twice as long (and
 * writing into one reused Buffer, a third longer in the service: docs/performance.md,
 * "Twentieth pass").
 */
function utf8Hex(text: string): string {
  if (NOT_ASCII.test(text)) return Buffer.from(text, 'utf8').toString('hex');
  let hex = '';
  for (let i = 0; i < text.length; i++) hex += ASCII_HEX[text.charCodeAt(i)]!;
  return hex;
}

export function fieldToken(fieldId: number, normalizedValue: string): string {
  return `_f${fieldId}x${utf8Hex(normalizedValue)}`;
}

export function formToken(formId: number): string {
  return `_form${formId}`;
}

/** One term of a search: a token, matched whole or as a prefix (each engine writes its own query of them). */
export type Term = SearchTerm;
