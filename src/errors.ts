/** One offending input, named by its path (`body.fields[2].type`, `query.pageSize`). */
export interface ErrorDetail {
  property: string;
  message: string;
}

/** An error whose status, code and message are safe to show to the caller. */
export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
  ) {
    super(message);
  }
}

export class BadRequestError extends AppError {
  constructor(message: string, details?: ErrorDetail[], code = 'invalid_request') {
    super(400, code, message, details);
  }
}

/** A single bad property: the common case of service-level validation. */
export function invalid(property: string, message: string, code = 'invalid_request'): BadRequestError {
  return new BadRequestError(`${property}: ${message}`, [{ property, message }], code);
}

export class UnauthorizedError extends AppError {
  constructor(message = 'A valid access token is required', code = 'unauthorized') {
    super(401, code, message);
  }
}

export class ForbiddenError extends AppError {
  constructor(message = 'You do not have permission to do this', code = 'forbidden') {
    super(403, code, message);
  }
}

export class NotFoundError extends AppError {
  constructor(resource: string, code = `${resource.toLowerCase().replace(/\s+/g, '_')}_not_found`) {
    super(404, code, `${resource} not found`);
  }
}

export class ConflictError extends AppError {
  constructor(message: string, code = 'conflict') {
    super(409, code, message);
  }
}

/** A conflict that passes by itself (another request is still running): the error handler sends Retry-After from it. */
export class RetryLaterError extends ConflictError {
  constructor(
    message: string,
    code: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message, code);
  }
}

/** A quota or an attempt limit is used up; the error handler sends Retry-After from it. */
export class TooManyRequestsError extends AppError {
  constructor(
    readonly retryAfterSeconds: number,
    message = `Too many requests; try again in ${retryAfterSeconds} s`,
    code = 'rate_limited',
  ) {
    super(429, code, message);
  }
}

export class ServiceUnavailableError extends AppError {
  constructor(message: string, code = 'service_unavailable') {
    super(503, code, message);
  }
}
