import { markUndecodable, parseForm } from './characters.js';

/**
 * How deep bracket notation nests: a name and four brackets, as deep as the original service's
 * v2 parameters go (`logic[checks][0][field]`, `fields[0][options][0][label]`; the submission
 * search needs three). A deeper name, or one with a part that could reach a prototype, is kept
 * whole as a plain name, which no route's schema knows: a 400 naming it, not a silent drop.
 */
export const MAX_NESTING = 5;

const UNSAFE_PARTS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * Query strings as usual, plus the bracket form that the submission search uses:
 * `search[0][fieldId]=5&search[0][value]=x` becomes `{search: {"0": {fieldId: "5", value: "x"}}}`.
 * Keys stay strings, so the route schema decides which indexes and names it accepts.
 * Escapes are read strictly as UTF-8: a parameter whose escapes are not UTF-8 is left out and
 * marked, and the character rule of characters.ts refuses the request.
 */
export function parseQueryString(text: string): Record<string, unknown> {
  const { values: flat, undecodable } = parseForm(text);
  const out: Record<string, unknown> = Object.create(null);
  markUndecodable(out, undecodable);
  for (const [key, value] of Object.entries(flat)) {
    const m = /^([^[\]]+)((?:\[[^[\]]*\])+)$/.exec(key);
    if (!m) {
      out[key] = value;
      continue;
    }
    const path = [m[1]!, ...[...m[2]!.matchAll(/\[([^[\]]*)\]/g)].map((p) => p[1]!)];
    if (path.length > MAX_NESTING || path.some((part) => UNSAFE_PARTS.has(part))) {
      out[key] = value;
      continue;
    }
    let node = out;
    for (const [i, part] of path.entries()) {
      if (i === path.length - 1) {
        node[part] = value;
      } else {
        const next = node[part];
        if (typeof next !== 'object' || next === null || Array.isArray(next)) node[part] = Object.create(null);
        node = node[part] as Record<string, unknown>;
      }
    }
  }
  return out;
}
