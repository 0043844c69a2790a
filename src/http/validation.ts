import Ajv, { type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import type { ErrorDetail } from '../errors.js';

function makeAjv(coerceTypes: boolean | 'array') {
  const ajv = new Ajv.default({
    coerceTypes,
    useDefaults: true,
    removeAdditional: false, // unknown properties are an error, never silently dropped
    allErrors: true,
    strict: false,
  });
  addFormats.default(ajv);
  return ajv;
}

// JSON bodies keep their types ("1" is not 1); query strings and path parameters are text and are coerced.
const bodyAjv = makeAjv(false);
const textAjv = makeAjv('array');

export const validatorCompiler: FastifySchemaCompiler<object> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? bodyAjv : textAjv).compile(schema);

const contextNames: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

function joinPath(base: string, pointer: string): string {
  const segments = pointer
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  return segments.reduce((acc, s) => (/^\d+$/.test(s) ? `${acc}[${s}]` : `${acc}.${s}`), base);
}

/** ajv's errors as the `details` of the error body, one per offending input. */
export function validationDetails(errors: ErrorObject[], context: string | undefined): ErrorDetail[] {
  const base = contextNames[context ?? 'body'] ?? 'body';
  const all: ErrorDetail[] = [];
  for (const e of errors) {
    let property = joinPath(base, e.instancePath);
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties') {
      property = `${property}.${String(e.params.additionalProperty)}`;
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
  const inside = (d: ErrorDetail) => all.some((o) => o.property.startsWith(`${d.property}.`) || o.property.startsWith(`${d.property}[`));
  const weak = (d: ErrorDetail) => d.message === 'must be null' || d.message === 'does not match any allowed shape';
  const details: ErrorDetail[] = [];
  for (const d of all) {
    if (inside(d) || details.some((o) => o.property === d.property)) continue;
    if (weak(d) && all.some((o) => o.property === d.property && !weak(o))) continue;
    details.push(d);
  }
  return details;
}

/** Compiles a schema the way JSON bodies are checked, for values validated inside a service. */
export function compileBodySchema(schema: object) {
  return bodyAjv.compile(schema);
}
