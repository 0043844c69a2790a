import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyRequest, FastifySchemaCompiler, RouteOptions } from 'fastify';
import { BadRequestError, type ErrorDetail } from '../errors.js';

function makeAjv(coerceTypes: boolean | 'array', allErrors = true) {
  const ajv = new Ajv.default({
    coerceTypes,
    useDefaults: true,
    removeAdditional: false, // unknown properties are an error, never silently dropped
    allErrors,
    strict: false,
    // strict: false turns this off too: JSON.parse reads 1e309 as Infinity, which a number
    // schema would take and JSON.stringify would then store as null.
    strictNumbers: true,
  });
  addFormats.default(ajv);
  return ajv;
}

// JSON bodies keep their types ("1" is not 1); query strings and path parameters are text and are coerced.
const bodyAjv = makeAjv(false);
const bodyFirstAjv = makeAjv(false, false);
const textAjv = makeAjv('array');

/** Limits on how many items or properties an input holds: past one, the rest is not looked into. */
const SIZE_KEYWORDS = new Set(['maxItems', 'maxProperties']);

/** A validator: true when data passes, else false with errors set. */
export type Validate = ((data: unknown, context?: Parameters<ValidateFunction>[1]) => boolean) & {
  errors?: ErrorObject[] | null;
};

interface PendingValidator {
  schema: object;
  httpPart: string | undefined;
  compiled?: Validate;
}

/** Validators routes were registered with that no request has needed yet (see compileEveryValidator). */
const pendingValidators = new Set<PendingValidator>();

/** entry's validator, compiled the first time it is asked for (by a request or compileEveryValidator). */
function compiledValidator(entry: PendingValidator): Validate {
  if (!entry.compiled) {
    entry.compiled = compileValidator(entry);
    pendingValidators.delete(entry);
  }
  return entry.compiled;
}

function compileValidator({ schema, httpPart }: PendingValidator): Validate {
  // ajv keeps what it compiled by schema object: the route schemas are module constants, so
  // each is compiled once a process, however many apps it starts.
  if (httpPart === 'body') return compileBodySchema(schema);
  const validate = textAjv.compile(schema);
  const strict = numberSpelling(schema);
  if (!strict) return validate;
  const checked: Validate = (data, context) => {
    const misspelt: ErrorObject[] = [];
    strict(data, '', misspelt); // before ajv coerces the text away
    const valid = validate(data, context);
    if (misspelt.length === 0) {
      checked.errors = validate.errors;
      return valid;
    }
    checked.errors = [
      ...misspelt,
      ...(validate.errors ?? []).filter((e) => !misspelt.some((m) => m.instancePath === e.instancePath)),
    ];
    return false;
  };
  checked.errors = null;
  return checked;
}

/**
 * The apps' validator compiler. Compiling every route's schemas when an app starts was about a
 * seventh of the CPU of a test file that starts one and sends a few requests (and of every
 * process's start): here a route's validator is compiled on its first request and kept for
 * the process. compileEveryValidator compiles the rest, for the test that every schema compiles.
 */
export const validatorCompiler: FastifySchemaCompiler<object> = ({ schema, httpPart }) => {
  const entry: PendingValidator = { schema: schema as object, httpPart };
  pendingValidators.add(entry);
  const validate: Validate = (data, context) => {
    const compiled = compiledValidator(entry);
    const valid = compiled(data, context);
    validate.errors = compiled.errors;
    return valid;
  };
  validate.errors = null;
  // Fastify gives ajv's validators (which it knows by schemaEnv) the parent of the value, so
  // that a coercion or default can replace the value itself; passed on as it comes.
  return Object.assign(validate, { schemaEnv: true });
};

/** Compiles every validator still waiting for its first request; throws what ajv finds wrong with a schema. */
export function compileEveryValidator(): number {
  const waiting = [...pendingValidators];
  for (const entry of waiting) compiledValidator(entry);
  return waiting.length;
}

// ajv's coercion takes anything that JavaScript's Number() reads: 0x10, +1, 1e3, " 1", "1.".
// A number in a path or query string is written one way only: decimal digits, a minus sign
// for negatives, no leading zeros (010 is 8 to some clients), and for non-integers a point
// with digits on both sides.
const INTEGER_TEXT = /^(?:0|-?[1-9][0-9]*)$/;
const NUMBER_TEXT = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/;

type SpellingCheck = (data: unknown, pointer: string, errors: ErrorObject[]) => void;

function typesOf(schema: unknown): string[] {
  if (typeof schema !== 'object' || schema === null) return [];
  const s = schema as Record<string, unknown>;
  const own = Array.isArray(s.type) ? (s.type as string[]) : typeof s.type === 'string' ? [s.type] : [];
  const branches = [...(Array.isArray(s.anyOf) ? s.anyOf : []), ...(Array.isArray(s.oneOf) ? s.oneOf : [])];
  return [...own, ...branches.flatMap(typesOf)];
}

/** Checks the spelling of the numbers that a text schema coerces; undefined when it has none. */
function numberSpelling(schema: unknown): SpellingCheck | undefined {
  if (typeof schema !== 'object' || schema === null) return undefined;
  const s = schema as Record<string, unknown>;
  const types = typesOf(s);
  const checks: SpellingCheck[] = [];
  // Where a string is also welcome (a union with one), text that is not a number is no mistake.
  const numeric = types.some((t) => t === 'integer' || t === 'number') && !types.includes('string');
  if (numeric) {
    const integer = !types.includes('number');
    const pattern = integer ? INTEGER_TEXT : NUMBER_TEXT;
    const message = integer
      ? 'must be an integer in decimal digits, such as 42 (no +, leading zero, space, exponent or 0x)'
      : 'must be a decimal number, such as 4.5 (no +, leading zero, space, exponent or 0x)';
    checks.push((data, pointer, errors) => {
      const items = Array.isArray(data) ? data : [data];
      if (items.some((item) => typeof item === 'string' && !pattern.test(item))) {
        errors.push({
          instancePath: pointer,
          schemaPath: '',
          keyword: 'type',
          params: { type: integer ? 'integer' : 'number' },
          message,
        });
      }
    });
  }
  for (const [name, sub] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) {
    const check = numberSpelling(sub);
    if (check)
      checks.push(
        (data, pointer, errors) =>
          isObject(data) && name in data && check(data[name], `${pointer}/${escape(name)}`, errors),
      );
  }
  for (const [pattern, sub] of Object.entries((s.patternProperties ?? {}) as Record<string, unknown>)) {
    const check = numberSpelling(sub);
    const re = new RegExp(pattern, 'u');
    if (check) {
      checks.push((data, pointer, errors) => {
        if (!isObject(data)) return;
        for (const [name, value] of Object.entries(data))
          if (re.test(name)) check(value, `${pointer}/${escape(name)}`, errors);
      });
    }
  }
  const items = numberSpelling(s.items);
  if (items)
    checks.push(
      (data, pointer, errors) =>
        Array.isArray(data) && data.forEach((item, i) => items(item, `${pointer}/${i}`, errors)),
    );
  if (checks.length === 0) return undefined;
  return (data, pointer, errors) => {
    for (const check of checks) check(data, pointer, errors);
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const escape = (name: string) => name.replace(/~/g, '~0').replace(/\//g, '~1');

const contextNames: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

function joinPath(base: string, pointer: string): string {
  const segments = pointer
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  return segments.reduce(step, base);
}

/** A path one step on: an index (an array's, or an object's keyed by numbers, as search[n]) in brackets, a name after a dot. */
const step = (path: string, segment: string): string =>
  /^\d+$/.test(segment) ? `${path}[${segment}]` : `${path}.${segment}`;

/** ajv's errors as the `details` of the error body, one per offending input. */
export function validationDetails(errors: ErrorObject[], context: string | undefined): ErrorDetail[] {
  const base = contextNames[context ?? 'body'] ?? 'body';
  const all: ErrorDetail[] = [];
  // The first MAX_DETAILS of ajv's errors (in the input's order): the pruning below compares
  // each with every other, and a body of 20,000 empty objects or unknown keys (60 KB) made
  // 40,000 errors, over a minute of the event loop for one request.
  for (const e of errors.slice(0, MAX_DETAILS)) {
    let property = joinPath(base, e.instancePath);
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties') {
      property = step(property, String(e.params.additionalProperty));
      message = 'is not a known property';
    } else if (e.keyword === 'required') {
      property = `${property}.${String(e.params.missingProperty)}`;
      message = 'is required';
    } else if (e.keyword === 'enum') {
      message = `must be one of ${(e.params.allowedValues as unknown[]).join(', ')}`;
    } else if (e.keyword === 'anyOf' || e.keyword === 'oneOf') {
      message = 'does not match any allowed shape';
    }
    all.push({ property, message });
  }
  // A failed union reports every branch. The most specific complaint is the useful one: a
  // detail is dropped when another points inside it, "must be null" and the union summary
  // give way to any other message, and each property is named once.
  const inside = (d: ErrorDetail) =>
    all.some((o) => o.property.startsWith(`${d.property}.`) || o.property.startsWith(`${d.property}[`));
  const weak = (d: ErrorDetail) => d.message === 'must be null' || d.message === 'does not match any allowed shape';
  const details: ErrorDetail[] = [];
  for (const d of all) {
    if (inside(d) || details.some((o) => o.property === d.property)) continue;
    if (weak(d) && all.some((o) => o.property === d.property && !weak(o))) continue;
    details.push(d);
  }
  return details;
}

/** The most errors of one input that a 400 names (its `details`). */
export const MAX_DETAILS = 100;

/**
 * Compiles a schema the way JSON bodies are checked (the routes', and values validated inside
 * a service). The validator stops at the first problem, and only for a body that has one looks for
 * every problem (a 400 names each). Except where the first is a list or object over its
 * limit: looking into each of its items made an error of each, 600,000 objects for a body of
 * 300,000 empty ones (900 KB), and over half a second of the event loop, most of it garbage
 * collection; the one problem that matters is then the size. The validator that finds every
 * problem is compiled on the first body that has one.
 */
export function compileBodySchema(schema: object): Validate {
  const first = bodyFirstAjv.compile(schema);
  let every: ValidateFunction | undefined;
  const validate: Validate = (data, context) => {
    if (first(data, context)) {
      validate.errors = null;
      return true;
    }
    const found = first.errors ?? [];
    if (found.some((e) => SIZE_KEYWORDS.has(e.keyword))) {
      validate.errors = found;
      return false;
    }
    every ??= bodyAjv.compile(schema);
    every(data, context);
    validate.errors = every.errors ?? found;
    return false;
  };
  validate.errors = null;
  return validate;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Whether a route takes no body: a write (a copy, a delete, a redelivery) whose schema names
 * none. Such a route would otherwise take any body and act as if it had none (a copy asked
 * for a name made a copy without it), where a body's unknown properties are refused everywhere else.
 */
export function takesNoBody(route: Pick<RouteOptions, 'method' | 'schema'>): boolean {
  return [route.method].flat().some((m) => WRITES.has(m)) && route.schema !== undefined && !route.schema.body;
}

/**
 * preValidation of a route that takes no body: a body with anything in it is a 400 naming each
 * of its properties as an object's unknown ones are named ({} and an empty body are taken).
 */
export async function refuseBody(request: FastifyRequest): Promise<void> {
  const body: unknown = request.body;
  if (body === undefined || body === null) return;
  const keys = typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : undefined;
  if (keys?.length === 0) return;
  const details: ErrorDetail[] = keys
    ? keys.slice(0, MAX_DETAILS).map((k) => ({ property: `body.${k}`, message: 'is not a known property' }))
    : [{ property: 'body', message: 'this operation takes no body' }];
  throw new BadRequestError('validation_failed', `${details[0]!.property}: ${details[0]!.message}`, { details });
}
