/**
 * The v2 wire format (docs/v2.md): how a v2 request's parameters are read and turned into
 * the v2025 input that the services take, and how their records are written back in v2's
 * shapes. Nothing here decides a rule: every translated input is checked against the v2025
 * route's own schema before a service sees it.
 */
import type { TSchema } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { BadRequestError, UnauthorizedError } from '../../errors.js';
import { compileBodySchema, validationDetails } from '../../http/validation.js';
import { passwordFrom } from '../encryption/keys.js';
import { easternDateTime } from '../submissions/eastern-time.js';

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
 * values. Nesting stops at four levels; names that could reach a prototype are dropped.
 */
export function nestParameters(flat: Record<string, unknown>): Params {
  const out: Params = {};
  for (const [key, value] of Object.entries(flat)) {
    const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
    const path = m ? [m[1]!, ...[...m[2]!.matchAll(/\[([^[\]]*)\]/g)].map((p) => p[1]!)] : [key];
    if (path.length > 4 || path.some((p) => UNSAFE_KEYS.has(p))) continue;
    let node = out;
    for (const [i, part] of path.entries()) {
      const last = i === path.length - 1;
      const next = path[i + 1];
      if (last) {
        if (part === '') continue;
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

/** The encryption password: the header (either name) or the encryption_password parameter. */
export function encryptionPassword(req: FastifyRequest, params: Params): string | undefined {
  const header = passwordFrom(req.headers);
  if (header !== undefined) return header;
  const p = params.encryption_password;
  if (p === undefined) return undefined;
  if (typeof p !== 'string' || p === '') throw new UnauthorizedError('encryption_password_required');
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

const snake = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/**
 * A v2025 record in v2's manner: snake_case names, ids (`id`, `*Id`, `form`, `field`,
 * `folder`, `parent`) as strings, times in Eastern Time. For the resources whose v2 shape is
 * no more than that (webhooks, emails, partial submissions, portals, smart lists).
 */
export function v2Record(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) return value.map((v) => v2Record(v, key));
  if (typeof value === 'string' && ISO.test(value)) return v2Time(value);
  if (typeof value === 'number' && /^(id|form|field|folder|parent)$|(Id|Field)$/.test(key)) return String(value);
  if (typeof value !== 'object' || value === null) return value;
  const out: Params = {};
  for (const [k, v] of Object.entries(value as Params)) out[snake(k)] = v2Record(v, k);
  return out;
}

/** The answer to a delete. */
export const deleted = (id: number | string) => ({ success: '1', id: String(id) });

/** v2's list wrapper: the items, their total and the number of pages. */
export function v2List<K extends string>(name: K, items: unknown[], total: number, pages: number) {
  return { [name]: items, total, pages } as Record<K, unknown[]> & { total: number; pages: number };
}

// ---------------------------------------------------------------- generic translation by schema

const camel = (key: string): string => key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function typesIn(schema: Record<string, unknown>): Set<string> {
  const out = new Set<string>();
  const visit = (s: unknown) => {
    if (typeof s !== 'object' || s === null) return;
    const o = s as Record<string, unknown>;
    if (typeof o.type === 'string') out.add(o.type);
    if (Array.isArray(o.type)) for (const t of o.type) out.add(String(t));
    for (const k of ['anyOf', 'oneOf']) if (Array.isArray(o[k])) (o[k] as unknown[]).forEach(visit);
  };
  visit(schema);
  return out;
}

/**
 * v2 parameters as the input of a v2025 schema: snake_case names in camelCase (or as
 * renamed), text read as the property's type (booleans 1/0 and true/false, whole numbers,
 * lists as lists, `name[0]=…` or comma-separated; 0 or empty for an id that may be null).
 * Names the schema does not know are ignored, as the original ignored them.
 */
export function fromV2(params: Params, schema: TSchema, renames: Record<string, string> = {}): Params {
  const properties = ((schema as { properties?: Record<string, Record<string, unknown>> }).properties ?? {}) as Record<
    string,
    Record<string, unknown>
  >;
  const out: Params = {};
  for (const [key, value] of Object.entries(withoutTransport(params))) {
    const name = renames[key] ?? camel(key);
    const property = properties[name];
    if (!property) continue;
    const types = typesIn(property);
    let v = value;
    if (types.has('boolean')) v = bool(v);
    else if (types.has('integer') || types.has('number')) v = types.has('null') ? optionalId(v) : int(v);
    else if (types.has('array')) v = list(v);
    else if (types.has('null') && v === '') v = null;
    out[name] = v;
  }
  return out;
}
