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
  const seen = new Set<string>();
  const details: ErrorDetail[] = [];
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
    }
    // anyOf/oneOf repeat each branch's failure; the first one per property reads best.
    const key = `${property}\u0000${e.keyword === 'anyOf' || e.keyword === 'oneOf' ? '' : message}`;
    if (seen.has(property) || seen.has(key)) continue;
    seen.add(property);
    seen.add(key);
    details.push({ property, message });
  }
  return details;
}

/** Compiles a schema the way JSON bodies are checked, for values validated inside a service. */
export function compileBodySchema(schema: object) {
  return bodyAjv.compile(schema);
}
