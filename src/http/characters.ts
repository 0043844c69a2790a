import type { FastifyInstance } from 'fastify';
import { BadRequestError, type ErrorDetail } from '../errors.js';

/**
 * One rule for every string a request brings, whatever the route (API, OAuth pages, uploads):
 * JSON and form bodies, query strings and path parameters must be valid UTF-8 and hold no NUL
 * (U+0000) and no lone surrogate (half of a UTF-16 pair, which `"\ud800"` in JSON makes).
 * PostgreSQL stores neither NUL nor lone surrogates while SQLite takes them, and every UTF-8
 * encoder on the way (the body reader, querystring, the database drivers) turns bytes and
 * surrogates it cannot encode into U+FFFD without a word: refusing them here keeps both
 * databases alike and never changes what was sent.
 *
 * Headers need no check: Node's HTTP parser refuses NUL and other control characters in them
 * (400 before any route), and reads their other bytes as Latin-1, one character per byte, which
 * holds no surrogate. The URL itself is ASCII for the same reason, so its text can only go wrong
 * through percent-escapes, which decodePercent reads strictly.
 */

// eslint-disable-next-line no-control-regex -- NUL is what the rule refuses
const NOT_ALLOWED = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function complaint(text: string): string | undefined {
  const found = NOT_ALLOWED.exec(text);
  if (!found) return undefined;
  return found[0] === '\u0000'
    ? 'contains a NUL character (U+0000)'
    : 'contains a lone surrogate (half of a UTF-16 pair), which is not a character';
}

const NOT_UTF8 = 'is not valid UTF-8';

/**
 * JSON text can hold a NUL or a lone surrogate only as an escape (`\u0000`, `\ud800`): raw
 * control characters are a syntax error, and decodeBody refuses bytes that are not UTF-8.
 * A body whose text has no such escape needs no walk over its parsed values, which cost
 * every submission a few kilobytes of garbage. (An escaped backslash before `u0000` is
 * matched too: that body is walked, and passes.)
 */
const RISKY_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/** Bodies whose JSON text was found free of what the rule refuses (see RISKY_ESCAPE). */
const cleanBodies = new WeakSet<object>();

/**
 * Text cut to at most max characters (code points, as the schemas count maxLength), never
 * between the two halves of a surrogate pair: a half alone is no character, and is stored as
 * bytes that are not UTF-8.
 */
export function cutToCharacters(text: string, max: number): string {
  if (text.length <= max) return text;
  // Without surrogates a code unit is a character.
  return /[\ud800-\udfff]/.test(text) ? Array.from(text).slice(0, max).join('') : text.slice(0, max);
}

/** Notes that request's JSON body, parsed from text, needs no walk if the text has no risky escape. */
export function noteJsonBodyText(request: object, text: string): void {
  if (!RISKY_ESCAPE.test(text)) cleanBodies.add(request);
}

/** Whether a JSON body, parsed from text, holds nothing the rule refuses (an early route's check; refuseInvalidCharacters answers). */
export function jsonBodyAllowed(text: string, body: unknown): boolean {
  return !RISKY_ESCAPE.test(text) || invalidCharacters(body, 'body').length === 0;
}

/**
 * The rule's refusal of a JSON text that the JSON parser refused for something else: the
 * prototype-poisoning rule (a `__proto__` key, `constructor.prototype`) turns away text that
 * is valid JSON before the rule has seen it. What a body's text holds decides first (as it does
 * for every other request), so such a body that also breaks the rule gets invalid_characters,
 * whichever of the two a client would otherwise have met. Undefined when the text is not JSON
 * at all or holds nothing the rule refuses. JSON.parse makes `__proto__` an own property, not
 * a prototype, so reading the parsed value here is safe.
 */
export function characterRefusalOfJson(text: string): BadRequestError | undefined {
  if (!RISKY_ESCAPE.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const details = invalidCharacters(parsed, 'body');
  return details.length > 0 ? refusal(details) : undefined;
}

function refusal(details: ErrorDetail[]): BadRequestError {
  const first = details[0]!;
  return new BadRequestError('invalid_characters', `${first.property}: ${first.message}`, { details });
}

const member = (path: string, key: string) => (/^\d+$/.test(key) ? `${path}[${key}]` : `${path}.${key}`);

/** `search[0][value]` as `.search[0].value`, the way the parsed query's paths are named. */
const bracketsAsPath = (name: string) => {
  const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(name);
  return m
    ? [...m[2]!.matchAll(/\[([^[\]]*)\]/g)].reduce((path, p) => member(path, p[1]!), member('', m[1]!))
    : member('', name);
};

/** Every string (and property name) in a parsed value that breaks the rule, by path. */
/** Where a value sits, as a chain to its parent: written out as text only for a value refused. */
interface Place {
  up: Place | string;
  key: string | number;
}

function placeText(place: Place | string): string {
  // Iterative, for the same reason as the walk below.
  const keys: (string | number)[] = [];
  let at = place;
  for (; typeof at !== 'string'; at = at.up) keys.push(at.key);
  let text = at;
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i]!;
    text = typeof key === 'number' ? `${text}[${key}]` : member(text, key);
  }
  return text;
}

export function invalidCharacters(value: unknown, base: string): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  // A loop rather than recursion: a body may nest as deep as the JSON parser allows. Twenty
  // details say enough about a body full of them. Paths are made only for what is refused:
  // this runs over every request's values.
  const pending: [unknown, Place | string][] = [[value, base]];
  while (pending.length > 0 && details.length < 20) {
    const [item, place] = pending.pop()!;
    if (typeof item === 'string') {
      const message = complaint(item);
      if (message) details.push({ property: placeText(place), message });
    } else if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--) pending.push([item[i], { up: place, key: i }]);
    } else if (typeof item === 'object' && item !== null) {
      const entries = Object.entries(item);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, inner] = entries[i]!;
        const message = complaint(key);
        if (message) details.push({ property: placeText(place), message: `has a property name that ${message}` });
        else pending.push([inner, { up: place, key }]);
      }
    }
  }
  return details;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A request body's bytes as text; invalid UTF-8 is refused rather than patched with U+FFFD. */
export function decodeBody(bytes: Buffer): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw refusal([{ property: 'body', message: NOT_UTF8 }]);
  }
}

/**
 * A percent-encoded component ('+' already read as a space), or undefined when its escapes
 * do not spell UTF-8 (querystring and decodeURIComponent's fallbacks would make U+FFFD of it).
 * A '%' not followed by two hex digits stays as it is, as browsers and querystring keep it.
 */
export function decodePercent(text: string): string | undefined {
  if (!text.includes('%')) return text;
  const parts: Buffer[] = [];
  let last = 0;
  for (const m of text.matchAll(/(?:%[0-9a-fA-F]{2})+/g)) {
    parts.push(Buffer.from(text.slice(last, m.index), 'utf8'), Buffer.from(m[0].replace(/%/g, ''), 'hex'));
    last = m.index + m[0].length;
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  try {
    return utf8.decode(Buffer.concat(parts));
  } catch {
    return undefined;
  }
}

export interface ParsedForm {
  values: Record<string, string | string[]>;
  /** Names whose name or value is not percent-encoded UTF-8, left out of values. */
  undecodable: string[];
}

/** Limit of node's querystring, kept: a request cannot make us build more parameters than this. */
const MAX_PARAMETERS = 1000;

/** application/x-www-form-urlencoded text (a query string or a form body), decoded strictly. */
export function parseForm(text: string): ParsedForm {
  const values: Record<string, string | string[]> = Object.create(null);
  const undecodable: string[] = [];
  let count = 0;
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    if (++count > MAX_PARAMETERS) break;
    const eq = pair.indexOf('=');
    const rawName = (eq === -1 ? pair : pair.slice(0, eq)).replace(/\+/g, ' ');
    const name = decodePercent(rawName);
    const value = decodePercent((eq === -1 ? '' : pair.slice(eq + 1)).replace(/\+/g, ' '));
    if (name === undefined || value === undefined) {
      undecodable.push(name ?? rawName);
      continue;
    }
    const before = values[name];
    values[name] = before === undefined ? value : Array.isArray(before) ? [...before, value] : [before, value];
  }
  return { values, undecodable };
}

/** A form body's values; one that is not UTF-8 is refused. */
export function parseFormBody(bytes: Buffer): Record<string, string | string[]> {
  const { values, undecodable } = parseForm(decodeBody(bytes));
  if (undecodable.length > 0)
    throw refusal(undecodable.map((name) => ({ property: member('body', name), message: NOT_UTF8 })));
  return values;
}

/**
 * A page's plain posts (application/x-www-form-urlencoded) read into URLSearchParams, held to
 * the rule as JSON bodies are: not UTF-8, a NUL or a lone surrogate in a name or value is refused
 * (400 invalid_characters), rather than stored with U+FFFD in its place or as it came.
 * (URLSearchParams alone patches bad escapes with U+FFFD, and the values in it are out of sight
 * of refuseInvalidCharacters.) The bodyLimit still applies.
 */
export function acceptFormPosts(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (_req, body, done) => {
    try {
      const values = parseFormBody(body as Buffer);
      const details = invalidCharacters(values, 'body');
      if (details.length > 0) throw refusal(details);
      const params = new URLSearchParams();
      for (const [name, value] of Object.entries(values))
        for (const v of Array.isArray(value) ? value : [value]) params.append(name, v);
      done(null, params);
    } catch (error) {
      done(error as Error);
    }
  });
}

/**
 * Query parameters that could not be decoded, carried on the parsed query: the query string
 * parser runs inside the router, where it cannot answer, so the hook below answers for it.
 */
const UNDECODABLE = Symbol('undecodable query parameters');

export function markUndecodable(query: object, names: string[]): void {
  if (names.length > 0) Object.defineProperty(query, UNDECODABLE, { value: names, enumerable: false });
}

/** The rule's one enforcement point, for every route, before any schema or handler reads the request. */
export function refuseInvalidCharacters(app: FastifyInstance): void {
  // A callback hook rather than an async one: this runs on every request, and an async hook
  // costs a promise and a turn of the microtask queue each time.
  app.addHook('preValidation', (request, _reply, done) => {
    const query = request.query as Record<PropertyKey, unknown> | undefined;
    const undecodable = (query?.[UNDECODABLE] ?? []) as string[];
    const details = [
      ...invalidCharacters(request.params, 'path'),
      ...undecodable.map((name) => ({ property: `query${bracketsAsPath(name)}`, message: NOT_UTF8 })),
      ...invalidCharacters(query, 'query'),
      ...(cleanBodies.has(request) ? [] : invalidCharacters(request.body, 'body')),
    ];
    done(details.length > 0 ? refusal(details) : undefined);
  });
}
