import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type {
  FastifyError,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  FastifySchemaValidationError,
} from 'fastify';
import {
  AppError,
  ERRORS,
  isErrorCode,
  RetryLaterError,
  ServiceUnavailableError,
  TooManyRequestsError,
  type ErrorCode,
  type ErrorDetail,
} from '../errors.js';
import { databaseUnavailable } from '../db/transaction.js';
import { validationDetails } from './validation.js';

/** The JSON body of every error answer (ErrorBody). */
export function errorBody(code: ErrorCode, error: string = ERRORS[code].message, details?: ErrorDetail[]) {
  return details ? { status: 'error' as const, error, code, details } : { status: 'error' as const, error, code };
}

function send(
  reply: FastifyReply,
  status: number,
  code: ErrorCode,
  error: string = ERRORS[code].message,
  details?: ErrorDetail[],
) {
  return reply.status(status).send(errorBody(code, error, details));
}

/**
 * What an error of the app's own is answered with: its status, body and Retry-After, and
 * what is logged of it. The error handler's, and the early routes' that answer before Fastify.
 */
/**
 * RFC 6750 3: an answer refusing the bearer token says so in WWW-Authenticate, with what was
 * wrong with it where a client can act on that.
 */
const BEARER_CHALLENGES: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'Bearer realm="formwork"',
  token_missing: 'Bearer realm="formwork"',
  token_malformed: 'Bearer realm="formwork", error="invalid_request"',
  token_invalid: 'Bearer realm="formwork", error="invalid_token"',
  token_in_query_refused: 'Bearer realm="formwork", error="invalid_request"',
  insufficient_scope: 'Bearer realm="formwork", error="insufficient_scope"',
};

export function appErrorAnswer(error: AppError): {
  status: number;
  body: ReturnType<typeof errorBody>;
  /** Headers of this answer, as name and value in turn (Retry-After, WWW-Authenticate). */
  headers?: string[];
  log?: { level: 'error' | 'debug'; message: string };
} {
  // The types allow only catalogued codes; this keeps a cast or a plain-JS caller from
  // sending a code that clients were never told about.
  if (!isErrorCode(error.code)) {
    return {
      status: 500,
      body: errorBody('internal_error'),
      log: { level: 'error', message: 'request failed with an uncatalogued error code' },
    };
  }
  const retryAfter =
    error instanceof TooManyRequestsError ||
    error instanceof RetryLaterError ||
    error instanceof ServiceUnavailableError
      ? error.retryAfterSeconds
      : undefined;
  // A 5xx of our own (a dependency away) is the operator's business: log it and its cause.
  // A 4xx is the client's, but what it wraps (a constraint, a storage answer) helps debugging.
  const log =
    error.statusCode >= 500
      ? { level: 'error' as const, message: 'request failed' }
      : error.cause !== undefined
        ? { level: 'debug' as const, message: 'request refused' }
        : undefined;
  const headers: string[] = [];
  if (retryAfter !== undefined) headers.push('retry-after', String(retryAfter));
  const challenge = BEARER_CHALLENGES[error.code];
  if (challenge !== undefined) headers.push('www-authenticate', challenge);
  return {
    status: error.statusCode,
    body: errorBody(error.code, error.message, error.details),
    ...(headers.length > 0 && { headers }),
    ...(log && { log }),
  };
}

// Fastify's own client errors, by their code, as stable codes and plain messages.
const fastifyErrors: Record<string, [ErrorCode, string]> = {
  FST_ERR_CTP_INVALID_JSON_BODY: ['invalid_json', ERRORS.invalid_json.message],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['invalid_json', 'The request body is empty but the content type says JSON'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['unsupported_media_type', ERRORS.unsupported_media_type.message],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['bad_request', 'The Content-Length header does not match the body'],
  FST_ERR_CTP_BODY_TOO_LARGE: ['payload_too_large', ERRORS.payload_too_large.message],
};

/**
 * Errors that Fastify meets before a route is chosen: a path whose escapes are not UTF-8
 * (or not escapes), a path parameter over maxParamLength.
 */
export function frameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  if (error.code === 'FST_ERR_BAD_URL') {
    return send(reply, 400, 'invalid_url', 'path: is not valid percent-encoded UTF-8', [
      { property: 'path', message: 'is not valid percent-encoded UTF-8' },
    ]);
  }
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') return send(reply, 414, 'uri_too_long');
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) return send(reply, status, 'bad_request');
  request.log.error({ err: error }, 'request failed');
  return send(reply, 500, 'internal_error');
}

/**
 * Fastify's schemaErrorFormatter: the error of a failed validation names its first problem
 * only. The answer is made from every problem (registerErrorHandling, validationDetails);
 * Fastify's own formatter wrote them all into one message that nothing reads, a string as long
 * as the body for a body of thousands of problems.
 */
export function schemaErrorFormatter(errors: FastifySchemaValidationError[], dataVar: string): Error {
  const first = errors[0];
  return new Error(
    `${dataVar}${first?.instancePath ?? ''} ${first?.message ?? 'is invalid'} (${errors.length} problems)`,
  );
}

/** What Node's HTTP parser refuses, by its error's code: the status and the catalogue's code. */
const parserErrors: Record<string, [number, ErrorCode]> = {
  HPE_HEADER_OVERFLOW: [431, 'headers_too_large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'headers_timeout'],
};

/**
 * Fastify's clientErrorHandler: a request that Node's HTTP parser refuses before Fastify sees
 * it (a request line and headers over their limit, headers that did not arrive in time, a
 * request line or header that is not HTTP) gets the same error body as every other answer,
 * not Fastify's own, and its connection is closed, as Node's would be.
 */
export function clientErrorHandler(this: FastifyInstance, error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code] = (error.code && parserErrors[error.code]) || [400, 'bad_request'];
  this.log.debug({ err: error }, 'request refused by the HTTP parser');
  if (socket.writable) {
    const body = JSON.stringify(errorBody(code));
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\n` +
        `cache-control: no-store\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/** The one place where errors become HTTP responses. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((thrown: FastifyError, request, reply) => {
    const error = databaseUnavailable(thrown) ?? thrown;
    if (error instanceof AppError) {
      const answer = appErrorAnswer(error);
      const headers = answer.headers ?? [];
      for (let i = 0; i < headers.length; i += 2) reply.header(headers[i]!, headers[i + 1]!);
      if (answer.log) request.log[answer.log.level]({ err: error }, answer.log.message);
      return reply.status(answer.status).send(answer.body);
    }
    if (error.validation) {
      const details = validationDetails(error.validation as never, error.validationContext);
      const first = details[0];
      const message = first ? `${first.property}: ${first.message}` : 'The request is invalid';
      return send(reply, 400, 'validation_failed', message, details);
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      const known =
        (error.code && fastifyErrors[error.code]) ||
        (error instanceof SyntaxError ? fastifyErrors.FST_ERR_CTP_INVALID_JSON_BODY : undefined);
      const [code, message] = known ?? ['bad_request', ERRORS.bad_request.message];
      return send(reply, status, code, message);
    }
    request.log.error({ err: error }, 'request failed');
    return send(reply, 500, 'internal_error');
  });

  app.setNotFoundHandler((request, reply) =>
    send(reply, 404, 'route_not_found', `No route ${request.method} ${request.url.split('?')[0]}`),
  );
}
