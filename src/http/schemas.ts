import { Type, type TArray, type TInteger, type TObject, type TSchema } from '@sinclair/typebox';
import { ERROR_CODES } from '../errors.js';

/** Largest id we hand out: PostgreSQL's integer. */
export const MAX_ID = 2_147_483_647;

/** A string from a fixed list, as a plain JSON Schema enum (clear errors, clear OpenAPI). */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { default?: T[number]; description?: string } = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

export const Id = Type.Integer({ minimum: 1, maximum: MAX_ID });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601, UTC' });

export const ErrorBody = Type.Object(
  {
    status: Type.Literal('error'),
    error: Type.String({ description: 'What went wrong, for a person' }),
    code: StringEnum(ERROR_CODES, {
      description: 'Stable snake_case code, for a program; docs/api.md says what each means',
    }),
    details: Type.Optional(
      Type.Array(Type.Object({ property: Type.String(), message: Type.String() }), {
        description: 'On 400: each offending input, by path',
      }),
    ),
  },
  { $id: 'ErrorBody', title: 'Error' },
);

const errorDescriptions: Record<number, string> = {
  400:
    'Invalid parameters or body. validation_failed: details name each input (numbers in paths and queries are plain decimal digits, such as 42: ' +
    'no +, leading zero, space, exponent or 0x); invalid_characters: text with NUL (U+0000), a lone surrogate, or bytes or %-escapes that are not UTF-8 ' +
    '(refused, never stored changed); invalid_json: the body is not JSON',
  401: 'Missing, malformed, unknown, expired or revoked access token; for the submissions of an encrypted form, a missing (encryption_password_required) or wrong (encryption_password_invalid) encryption password',
  403: 'Not permitted',
  404: 'Not found, or not visible to this account',
  409: 'Conflicts with the current state',
  408: 'The request body did not arrive in time (body_timeout); the connection is closed',
  410: 'Expired',
  413: 'Request body too large',
  429: 'Rate limit reached: see the RateLimit header and wait Retry-After seconds',
  500: 'Internal error',
  503: 'Busy or a dependency away, for now: hashing_busy when too many passwords are being hashed, rate_limiter_unavailable when Redis does not answer, database_busy when the SQLite write lock stayed taken by another process past its wait, or PostgreSQL ended the write to break a deadlock (nothing was written), database_unavailable when the database cannot be reached or the connection ended under the request (a write may or may not have been made: send it again with the same Idempotency-Key); wait Retry-After seconds when it is given',
};

/** The error responses a route declares; 400, 401, 429, 500 and 503 are possible on every API route. */
export function errors(...statuses: number[]): Record<number, TSchema> {
  const all = new Set([400, 401, 429, 500, 503, ...statuses]);
  return Object.fromEntries([...all].map((s) => [s, Type.Ref(ErrorBody, { description: errorDescriptions[s] })]));
}

export function idParams<K extends string>(...names: K[]): TObject<Record<K, typeof Id>> {
  const props = Object.fromEntries(names.map((n) => [n, Id])) as Record<K, typeof Id>;
  return Type.Object(props, { additionalProperties: false });
}

export const PageNumber = Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1, description: 'Starts at 1' });
export const PageSize = Type.Integer({ minimum: 1, maximum: 100, default: 25 });
export const Flag = Type.Boolean({ default: false, description: 'true or false' });

/** The list body of every listing: the resource-named array plus paging numbers (docs/api.md). */
export function listBody<K extends string, T extends TSchema>(name: K, item: T) {
  const items = { [name]: Type.Array(item) } as Record<K, TArray<T>>;
  const paging: Record<'total' | 'pages' | 'pageNumber' | 'pageSize', TInteger> = {
    total: Type.Integer({ description: 'Matching records in all' }),
    pages: Type.Integer(),
    pageNumber: Type.Integer(),
    pageSize: Type.Integer(),
  };
  return Type.Object({ ...items, ...paging });
}

export interface Page {
  total: number;
  pages: number;
  pageNumber: number;
  pageSize: number;
}

export function page(total: number, pageNumber: number, pageSize: number): Page {
  return { total, pages: Math.ceil(total / pageSize), pageNumber, pageSize };
}

export const isoTime = (ms: number): string => new Date(ms).toISOString();

/**
 * The instants isoTime writes with a four-digit year, as Timestamp wants: 0000-01-01T00:00:00Z
 * to 9999-12-31T23:59:59.999Z. A date-time given with an offset can name one past either end.
 */
export const FIRST_ISO_INSTANT = -62_167_219_200_000;
export const LAST_ISO_INSTANT = 253_402_300_799_999;
