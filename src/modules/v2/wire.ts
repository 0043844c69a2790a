/**
 * The v2 wire format (docs/v2.md): how a v2 request's parameters are read and turned into
 * the v2025 input that the services take, and how their records are written back in v2's
 * shapes. Nothing here decides a rule: every translated input is checked against the v2025
 * route's own schema before a service sees it.
 */
import type { TSchema } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { BadRequestError, UnauthorizedError } from '../../errors.js';
import { MAX_NESTING } from '../../http/querystring.js';
import { compileBodySchema, validationDetails } from '../../http/validation.js';
import { passwordFrom } from '../encryption/keys.js';
import { easternDateTime, easternToUtc, FIRST_YEAR, parseWallTime } from '../submissions/eastern-time.js';

export type Params = Record<string, unknown>;

const UNSAFE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** Objects whose keys are all 0, 1, 2 … (`options[0]=a&options[1]=b`) become lists. */
function listify(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(listify);
  if (typeof value !== 'object' || value === null) return value;
  const entries = Object.entries(value as Params);
  const out: Params = {};
  for (const [k, v] of entries) out[k] = listify(v);
  const keys = Object.keys(out);
  // name[]=a&name[]=b as the query string parser leaves it: {"": [a, b]}.
  if (keys.length === 1 && keys[0] === '') return Array.isArray(out['']) ? out[''] : [out['']];
  if (keys.length > 0 && keys.every((k) => /^(0|[1-9][0-9]{0,3})$/.test(k))) {
    return keys.sort((x, y) => Number(x) - Number(y)).map((k) => out[k]);
  }
  return out;
}

/**
 * Flat form parameters (`field_12[first]=Ada`, `options[0]=Small`, `tags[]=a`) as nested
 * values. Nesting stops at MAX_NESTING levels; names that could reach a prototype are
 * dropped, and so is `[]` anywhere but last (`a[][b]` does not say which item).
 */
export function nestParameters(flat: Record<string, unknown>): Params {
  const out: Params = {};
  for (const [key, value] of Object.entries(flat)) {
    const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
    const path = m ? [m[1]!, ...[...m[2]!.matchAll(/\[([^[\]]*)\]/g)].map((p) => p[1]!)] : [key];
    if (path.length > MAX_NESTING || path.some((p) => UNSAFE_KEYS.has(p))) continue;
    if (path.slice(0, -1).includes('')) continue;
    let node = out;
    for (const [i, part] of path.entries()) {
      const last = i === path.length - 1;
      const next = path[i + 1];
      if (last) {
        node[part] = value;
      } else if (next === '') {
        // name[]=a&name[]=b
        const before = node[part];
        const add = Array.isArray(value) ? value : [value];
        node[part] = Array.isArray(before) ? [...before, ...add] : add;
        break;
      } else {
        const child = node[part];
        if (typeof child !== 'object' || child === null || Array.isArray(child)) node[part] = {};
        node = node[part] as Params;
      }
    }
  }
  return listify(out) as Params;
}

/**
 * Every parameter of a v2 request: the query string and the body (form-encoded, JSON, or
 * form-encoded labelled JSON), the query winning where both name one. GET requests whose
 * parameters a client put in a form body are read the same way.
 */
export function parametersOf(req: FastifyRequest): Params {
  const body = req.body;
  const fromBody = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Params) : {};
  const query = nestParameters((req.query ?? {}) as Record<string, unknown>);
  return { ...fromBody, ...query };
}

/** Parameters that are about the request, not the resource: never passed on. */
const TRANSPORT = new Set(['oauth_token', 'encryption_password', 'access_token', 'format']);

export function withoutTransport(params: Params): Params {
  const out: Params = {};
  for (const [k, v] of Object.entries(params)) if (!TRANSPORT.has(k)) out[k] = v;
  return out;
}

/**
 * The encryption password: the header (either name) or the encryption_password parameter.
 * Empty is none, as an empty header is: clients that always send the parameter send it empty
 * for forms that are not encrypted, which must answer as without it.
 */
export function encryptionPassword(req: FastifyRequest, params: Params): string | undefined {
  const header = passwordFrom(req.headers);
  if (header !== undefined) return header;
  const p = params.encryption_password;
  if (p === undefined || p === '') return undefined;
  if (typeof p !== 'string') throw new UnauthorizedError('encryption_password_required');
  return p;
}

// ---------------------------------------------------------------- reading values

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off', '']);

/** v2 booleans: 1/0, true/false (as text or JSON); anything else is passed on for the schema to refuse. */
export function bool(value: unknown): unknown {
  if (typeof value === 'boolean') return value;
  if (value === 1 || value === 0) return value === 1;
  if (typeof value === 'string') {
    const v = value.trim().toLowerCase();
    if (TRUE.has(v)) return true;
    if (FALSE.has(v)) return false;
  }
  return value;
}

/** A whole number written as text (form bodies) or a number; anything else is passed on. */
export function int(value: unknown): unknown {
  if (typeof value === 'string' && /^(0|-?[1-9][0-9]{0,15})$/.test(value.trim())) return Number(value.trim());
  return value;
}

/** A decimal number written as text (form bodies) or a number, empty text none; anything else is passed on. */
export function num(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const v = value.trim();
  if (v === '') return undefined;
  return /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/.test(v) ? Number(v) : value;
}

/** An id where 0 or empty means none (a folder's parent, a form's folder). */
export function optionalId(value: unknown): unknown {
  const v = int(value);
  return v === 0 || v === '' || v === null ? null : v;
}

/** A list given as a list, as `name[0]=…`, or as comma-separated text. */
export function list(value: unknown): unknown {
  if (Array.isArray(value)) return value;
  if (typeof value === 'string') return value === '' ? [] : value.split(',').map((s) => s.trim());
  return value;
}

/** Copies the parameters named in the map (v2 name → v2025 name), each read by its reader. */
export function pick(
  params: Params,
  map: Record<string, [string, ((v: unknown) => unknown)?]>,
  into: Params = {},
): Params {
  for (const [v2, [name, read]] of Object.entries(map)) {
    if (params[v2] === undefined) continue;
    into[name] = read ? read(params[v2]) : params[v2];
  }
  return into;
}

// ---------------------------------------------------------------- checking translated input

const compiled = new WeakMap<TSchema, ReturnType<typeof compileBodySchema>>();

/**
 * The translated input, checked against the v2025 schema it is meant for (and given its
 * defaults): the same rules as the v2025 route. A refusal is the usual 400 with details.
 */
export function checked<T>(schema: TSchema, value: unknown, context = 'body'): T {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = compileBodySchema(schema);
    compiled.set(schema, validate);
  }
  if (!validate(value)) {
    const details = validationDetails(validate.errors ?? [], context);
    const first = details[0];
    throw new BadRequestError('validation_failed', first ? `${first.property}: ${first.message}` : undefined, {
      details,
    });
  }
  return value as T;
}

// ---------------------------------------------------------------- writing answers

/** v2 writes ids as strings. */
export const str = (n: number | string | null | undefined): string => (n === null || n === undefined ? '' : String(n));

/** v2 writes flags as "1" or "0". */
export const flag = (b: boolean | null | undefined): string => (b ? '1' : '0');

/** An ISO time as v2 writes it: `YYYY-MM-DD HH:MM:SS`, Eastern Time. */
export function v2Time(iso: string | null | undefined): string | null {
  if (!iso) return null;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : easternDateTime(ms);
}

/**
 * A v2 time (`YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DD`, Eastern Time, as v2 answers write them) as
 * ISO, so that a time read from an answer can be sent back; undefined when it is not one. A
 * date alone is its midnight; a wall time that the autumn change repeats, its first occurrence.
 */
export function isoOfV2Time(text: string): string | undefined {
  const wall = parseWallTime(text.trim());
  // Date.UTC reads the years 0 to 99 as 1900 to 1999: such a year is left for the schema to refuse.
  if (wall === undefined || wall.year < FIRST_YEAR) return undefined;
  return new Date(easternToUtc(wall, 'first')).toISOString();
}

export const snake = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Shared schemas by $id (Fastify's getSchemas()), to follow the $refs of a v2025 response schema. */
export type SchemaRefs = Record<string, unknown>;

/** The member of an object schema's alternatives that describes the property named key. */
function propertyOf(members: Schema[], key: string): unknown {
  for (const m of members) {
    const properties = m.properties as Schema | undefined;
    if (properties && Object.hasOwn(properties, key)) return properties[key];
  }
  for (const m of members) {
    if (typeof m.patternProperties === 'object' && m.patternProperties !== null)
      return Object.values(m.patternProperties as Schema)[0];
    if (typeof m.additionalProperties === 'object' && m.additionalProperties !== null) return m.additionalProperties;
  }
  return undefined;
}

/**
 * A v2025 record in v2's manner: snake_case names, ids (`id`, `*Id`, `form`, `field`,
 * `folder`, `parent`) as strings, and in Eastern Time the members that its v2025 response
 * schema says are times (format date-time), and only those: text a person wrote that looks
 * like a time (an option's label, a subject) goes out as written, so a client that reads a
 * record and writes it back does not change it. For the resources whose v2 shape is no more
 * than that (webhooks, emails, portals, smart lists); v2Writer checks the schema's refs.
 */
export function v2Record(value: unknown, schema: unknown, refs: SchemaRefs, key = ''): unknown {
  const members = alternatives(schema, refs);
  if (Array.isArray(value)) {
    const items = members.find((m) => m.type === 'array')?.items;
    return value.map((v) => v2Record(v, items, refs, key));
  }
  if (typeof value === 'string')
    return members.some((m) => m.format === 'date-time') ? (v2Time(value) ?? value) : value;
  if (typeof value === 'number' && /^(id|form|field|folder|parent)$|(Id|Field)$/.test(key)) return String(value);
  if (typeof value !== 'object' || value === null) return value;
  const objects = members.filter((m) => m.type === 'object');
  const out: Params = {};
  for (const [k, v] of Object.entries(value as Params)) out[snake(k)] = v2Record(v, propertyOf(objects, k), refs, k);
  return out;
}

/** Every $ref a schema holds, through the schemas they name; an unknown one is thrown. */
function checkRefs(schema: unknown, refs: SchemaRefs, seen: Set<unknown>): void {
  if (typeof schema !== 'object' || schema === null || seen.has(schema)) return;
  seen.add(schema);
  const ref = (schema as Schema).$ref;
  if (typeof ref === 'string') {
    if (!Object.hasOwn(refs, ref)) throw new Error(`v2: the response schema refers to ${ref}, which is not shared`);
    checkRefs(refs[ref], refs, seen);
  }
  for (const v of Object.values(schema)) checkRefs(v, refs, seen);
}

/**
 * How v2 writes the answers of a v2025 response schema (v2Record). Checked once, when the
 * route is declared: a $ref the shared schemas do not hold would send its times out in ISO,
 * so the app refuses to start instead.
 */
export function v2Writer(schema: TSchema, refs: SchemaRefs): (value: unknown) => unknown {
  checkRefs(schema, refs, new Set());
  return (value) => v2Record(value, schema, refs);
}

/** The answer to a delete. */
export const deleted = (id: number | string) => ({ success: '1', id: String(id) });

/** v2's list wrapper: the items, their total and the number of pages. */
export function v2List<K extends string>(name: K, items: unknown[], total: number, pages: number) {
  return { [name]: items, total, pages } as Record<K, unknown[]> & { total: number; pages: number };
}

// ---------------------------------------------------------------- generic translation by schema

const camel = (key: string): string => key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

type Schema = Record<string, unknown>;

/** A schema's alternatives: the members of its anyOf or oneOf (nested ones too, refs followed), or itself. */
function alternatives(schema: unknown, refs: SchemaRefs = {}, depth = 0): Schema[] {
  if (typeof schema !== 'object' || schema === null || depth > MAX_SCHEMA_DEPTH) return [];
  const s = schema as Schema;
  if (typeof s.$ref === 'string') return alternatives(refs[s.$ref], refs, depth + 1);
  const union = [s.anyOf, s.oneOf].filter(Array.isArray).flat() as unknown[];
  return union.length > 0 ? union.flatMap((u) => alternatives(u, refs, depth + 1)) : [s];
}

function typesOf(members: Schema[]): Set<string> {
  const out = new Set<string>();
  for (const m of members) {
    if (typeof m.type === 'string') out.add(m.type);
    if (Array.isArray(m.type)) for (const t of m.type) out.add(String(t));
  }
  return out;
}

const INDEX = /^(0|[1-9][0-9]{0,3})$/;

/**
 * A value given as a list: a list, an object keyed 0, 1, 2 … (`x[0][…]`, in index order, as
 * JSON may carry it too) or `{"": …}` (`x[]` as the query string parser leaves it); else undefined.
 */
function asList(value: object): unknown[] | undefined {
  if (Array.isArray(value)) return value;
  const keys = Object.keys(value);
  const v = value as Params;
  if (keys.length === 1 && keys[0] === '') return Array.isArray(v['']) ? (v[''] as unknown[]) : [v['']];
  if (keys.length === 0 || !keys.every((k) => INDEX.test(k))) return undefined;
  return keys.sort((x, y) => Number(x) - Number(y)).map((k) => v[k]);
}

/** A decimal number written as text; anything else is passed on. */
function decimal(value: unknown): unknown {
  return typeof value === 'string' && value.trim() !== '' ? num(value) : value;
}

/**
 * Past this many levels of schema a value is passed on as it came (the schema then judges it):
 * a bound on the walk should a schema ever refer to itself.
 */
const MAX_SCHEMA_DEPTH = 10;

/**
 * One v2 value as the input of a v2025 schema, at any level: objects by the schema's
 * properties (snake_case names in camelCase, or as renamed; names it does not know left out),
 * lists where it wants a list (`x[0][…]`, `x[]`, comma-separated text), text read as the
 * property's type (booleans 1/0 and true/false, whole and decimal numbers, 0 or empty for an
 * id that may be null, empty for null). A value of the wrong shape is passed on for the
 * schema to refuse (400 with details), never dropped or guessed at.
 */
export function readAs(value: unknown, schema: unknown, renames: Record<string, string> = {}, depth = 0): unknown {
  if (value === undefined || depth > MAX_SCHEMA_DEPTH) return value;
  const members = alternatives(schema);
  const types = typesOf(members);
  const listSchema = members.find((m) => m.type === 'array');
  // Text where only a list will do: comma-separated (a list of one when there is no comma).
  const v = typeof value === 'string' && listSchema && !types.has('string') ? list(value) : value;
  if (typeof v === 'object' && v !== null) {
    const items = listSchema ? asList(v) : undefined;
    if (items) return items.map((item) => readAs(item, listSchema!.items, {}, depth + 1));
    const objects = members.filter((m) => m.type === 'object');
    if (Array.isArray(v) || objects.length === 0) return v;
    return readObject(v as Params, objects, renames, depth);
  }
  if (types.has('boolean')) return bool(v);
  if ((types.has('integer') || types.has('number')) && !types.has('string')) {
    const n = types.has('integer') ? int(v) : decimal(v);
    if (!types.has('null')) return n;
    // An id that may be none (a folder's parent, a field's smart list): 0 or empty is none.
    const id = members.some((m) => m.type === 'integer' && typeof m.minimum === 'number' && m.minimum >= 1);
    return n === '' || (id && n === 0) ? null : n;
  }
  // A time as v2 answers write it (Eastern Time) may be sent back as it was read; ISO is taken too.
  if (typeof v === 'string' && members.some((m) => m.format === 'date-time')) {
    const iso = isoOfV2Time(v);
    if (iso !== undefined) return iso;
  }
  if (types.has('null') && v === '') return null;
  return v;
}

function readObject(value: Params, objects: Schema[], renames: Record<string, string>, depth: number): Params {
  const properties: Record<string, unknown> = {};
  const records: unknown[] = [];
  for (const o of objects) {
    for (const [k, p] of Object.entries((o.properties ?? {}) as Schema)) if (!(k in properties)) properties[k] = p;
    if (typeof o.patternProperties === 'object' && o.patternProperties !== null)
      records.push(...Object.values(o.patternProperties as Schema));
    else if (typeof o.additionalProperties === 'object' && o.additionalProperties !== null)
      records.push(o.additionalProperties);
  }
  // An object that names neither properties nor a record (`{}`, any object): taken as it is.
  const open = records.length === 0 && objects.every((o) => o.properties === undefined);
  const out: Params = {};
  for (const [key, given] of Object.entries(value)) {
    if (UNSAFE_KEYS.has(key)) continue;
    const name = renames[key] ?? camel(key);
    let read: unknown;
    let as = name;
    if (Object.hasOwn(properties, name)) read = readAs(given, properties[name], {}, depth + 1);
    // A record (subfield values, attributes): its names are the caller's own, kept as given.
    else if (records.length > 0) [as, read] = [key, readAs(given, records[0], {}, depth + 1)];
    else if (open) [as, read] = [key, given];
    if (read !== undefined) out[as] = read;
  }
  return out;
}

/**
 * v2 parameters as the input of a v2025 schema (readAs at the top level): snake_case names in
 * camelCase (or as renamed), at every level of nesting, text read as each property's type.
 * Names the schema does not know are ignored, at every level, as the original ignored them.
 */
export function fromV2(params: Params, schema: TSchema, renames: Record<string, string> = {}): Params {
  const given = withoutTransport(params);
  // `format` names the answer's format on any request, but an email has a format of its own (html, text).
  const properties = (schema as { properties?: Record<string, unknown> }).properties ?? {};
  if (Object.hasOwn(properties, 'format') && params.format !== undefined) given.format = params.format;
  const read = readAs(given, schema, renames);
  return typeof read === 'object' && read !== null && !Array.isArray(read) ? (read as Params) : {};
}
