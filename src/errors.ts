/** One offending input, named by its path (`body.fields[2].type`, `query.pageSize`). */
export interface ErrorDetail {
  property: string;
  message: string;
}

interface ErrorSpec {
  /** The HTTP status it is sent with; the first one unless the throw site picks another listed here. */
  status: number | readonly number[];
  /** Sent when the throw site has nothing more precise to say; the code's meaning in docs/api.md. */
  message: string;
  /** Said in docs/api.md after the message, never sent. */
  note?: string;
}

/**
 * Every code that the API sends in an error body, with its status and message: the one list.
 * A code is a promise to clients (they branch on it), so once shipped it keeps its spelling.
 * The OpenAPI document publishes these as the enum of ErrorBody.code, and docs/api.md lists them
 * (test/errors.test.ts checks both). The OAuth token, revocation and introspection endpoints are
 * not here: they answer with RFC 6749's own error names (`invalid_grant` …).
 */
export const ERRORS = {
  // 400
  validation_failed: {
    status: 400,
    message: 'A parameter, header or body property is invalid',
    note: '`details` names each offending input',
  },
  invalid_request: { status: 400, message: 'A property is invalid', note: '`details` names it' },
  invalid_json: { status: 400, message: 'The request body is not valid JSON' },
  invalid_characters: {
    status: 400,
    message: 'A text input holds a NUL (U+0000), a lone surrogate, or bytes or %-escapes that are not UTF-8',
    note: '`details` names each',
  },
  invalid_url: { status: 400, message: 'The request path is not valid percent-encoded UTF-8' },
  bad_request: {
    status: 400,
    message: 'The request could not be read',
    note: 'sent with the 4xx status that Fastify gives the problem; also a request line or header that is not HTTP, and then the connection is closed',
  },
  invalid_field: { status: 400, message: 'The field definition is invalid', note: '`details` names each problem' },
  too_many_fields: { status: 400, message: 'The form holds the most fields it may' },
  too_many_options: {
    status: 400,
    message: 'The form would show more options across its fields than it may',
    note: "at most 50,000: each field's own options, and its smart list's for each field that uses one; the message names each form and its total",
  },
  invalid_email: {
    status: 400,
    message: 'The confirmation or notification email is invalid',
    note: '`details` names each problem: a recipient field that is not an email field of the form, a logic check',
  },
  invalid_template: {
    status: 400,
    message: 'A subject or message is not a valid Liquid template',
    note: '`details` names it and says where it fails to parse',
  },
  too_many_emails: { status: 400, message: 'The form holds the most confirmation or notification emails it may' },
  too_many_webhooks: { status: 400, message: 'The form holds the most webhooks it may' },
  invalid_integration: {
    status: 400,
    message: 'The document-merge integration is invalid',
    note: '`details` names each problem: a template that cannot be read, a tag that names no field, a mapping to a field of no use',
  },
  too_many_integrations: { status: 400, message: 'The form holds the most document-merge integrations it may' },
  invalid_submission: {
    status: 400,
    message: 'A submitted value is invalid',
    note: '`details` names each offending field',
  },
  required_field_missing: { status: 400, message: 'A required field has no value', note: '`details` names each' },
  not_unique: {
    status: 400,
    message: 'A value of a unique field is already taken by another submission',
    note: '`details` names each',
  },
  not_a_file_field: { status: 400, message: 'Only file and signature fields take uploads' },
  too_many_files: { status: 400, message: 'More files than the field takes' },
  invalid_filename: { status: 400, message: 'A file name is invalid', note: '`details` names each' },
  not_png: { status: 400, message: 'A signature must be a PNG image' },
  submission_refused: {
    status: 400,
    message: 'This submission looks automated and was not accepted',
    note: 'hosted pages: the honeypot field was filled in, or the page was sent too soon after it was loaded',
  },
  page_expired: { status: 400, message: 'This page is too old or was not loaded from this service; reload it' },
  not_a_member: {
    status: 400,
    message: 'Form permissions are for members; owners and admins hold every level on every form',
  },
  folder_too_deep: { status: 400, message: 'Folders nest at most five levels deep' },
  folder_cycle: { status: 400, message: 'A folder cannot move into itself or one of its subfolders' },
  invalid_options: {
    status: 400,
    message: 'An option of the smart list is invalid or repeats a value',
    note: '`details` names each offending entry by its index',
  },
  invalid_image: {
    status: 400,
    message: 'The image is not a PNG, JPEG, GIF or WebP file, is too large, or the body is not one part named image',
  },
  images_not_used: {
    status: 400,
    message: 'This smart list does not use images; turn useImages on first',
  },
  invalid_css: {
    status: 400,
    message:
      'The custom CSS uses what themes may not: url() to another host, @import, expression(), javascript: or </style',
    note: '`details` names the property; docs/themes.md gives the rule',
  },
  invalid_theme: { status: 400, message: 'The theme named is not a theme of this account' },
  invalid_form: { status: 400, message: 'The form cannot take a theme: it is deleted' },
  default_theme: { status: 400, message: "The account's default theme cannot be deleted" },
  invalid_portal_form: {
    status: 400,
    message: 'The form is already in this portal',
    note: '`details` names the formId',
  },
  invalid_portal_user: {
    status: 400,
    message: 'A user of this portal already has this email',
    note: '`details` names the email',
  },
  invalid_idempotency_key: { status: 400, message: 'The Idempotency-Key header is invalid' },
  invalid_reference: { status: 400, message: 'The request refers to a record that does not exist' },
  encryption_password_required: {
    status: [401, 400],
    message: 'This form is encrypted: send its password in the X-Formwork-Encryption-Password header',
    note: '401 without the header; 400 when a body property that changes the encryption lacks a password',
  },
  // 401
  unauthorized: { status: 401, message: 'A valid access token is required' },
  token_missing: { status: 401, message: 'Send an access token as Authorization: Bearer <token>' },
  token_malformed: { status: 401, message: 'The Authorization header is not a bearer token' },
  token_invalid: { status: 401, message: 'The access token is unknown, expired or revoked' },
  token_in_query_refused: {
    status: 401,
    message: 'An oauth_token query parameter is taken only over HTTPS; send the token as Authorization: Bearer <token>',
    note: '/api/v2 only, when PUBLIC_URL is https and the request came neither over HTTPS nor from this machine',
  },
  encryption_password_invalid: { status: 401, message: 'The encryption password of this form is wrong' },
  // 403
  insufficient_scope: { status: 403, message: 'The access token was not granted the scope this needs' },
  admin_required: { status: 403, message: 'Only the account owner and admins may do this' },
  form_permission_required: { status: 403, message: 'The user lacks the level on the form that this needs' },
  owner_protected: { status: 403, message: 'Only the owner may do this to the owner' },
  own_role: { status: 403, message: 'You cannot change your own role' },
  own_user: { status: 403, message: 'You cannot remove yourself' },
  upload_url_invalid: { status: 403, message: 'This upload URL is not valid' },
  // 404
  route_not_found: { status: 404, message: 'No route for this method and path' },
  form_not_found: { status: 404, message: 'Form not found' },
  deleted_form_not_found: { status: 404, message: 'Deleted form not found' },
  field_not_found: { status: 404, message: 'Field not found' },
  folder_not_found: { status: 404, message: 'Folder not found' },
  submission_not_found: { status: 404, message: 'Submission not found' },
  file_not_found: { status: 404, message: 'File not found' },
  user_not_found: { status: 404, message: 'User not found' },
  form_permission_not_found: { status: 404, message: 'Form permission not found' },
  oauth_client_not_found: { status: 404, message: 'OAuth client not found' },
  token_not_found: { status: 404, message: 'Token not found' },
  webhook_not_found: { status: 404, message: 'Webhook not found' },
  webhook_delivery_not_found: { status: 404, message: 'Webhook delivery not found' },
  integration_not_found: { status: 404, message: 'Integration not found' },
  document_not_found: { status: 404, message: 'Document not found' },
  confirmation_not_found: { status: 404, message: 'Confirmation email not found' },
  notification_not_found: { status: 404, message: 'Notification email not found' },
  mail_not_found: { status: 404, message: 'Message not found in the mail log' },
  partial_submission_not_found: { status: 404, message: 'Partial submission not found' },
  smart_list_not_found: { status: 404, message: 'Smart list not found' },
  smart_list_option_not_found: { status: 404, message: 'Smart list option not found' },
  theme_not_found: { status: 404, message: 'Theme not found' },
  subaccount_not_found: { status: 404, message: 'Subaccount not found' },
  portal_not_found: { status: 404, message: 'Portal not found' },
  portal_form_not_found: { status: 404, message: 'The form is not in this portal' },
  portal_user_not_found: { status: 404, message: 'Portal user not found' },
  // 409
  duplicate: { status: 409, message: 'A record with the same unique value already exists' },
  email_taken: { status: 409, message: 'A user with this email already exists' },
  form_changed: { status: 409, message: 'The form kept changing while this was written; send it again' },
  form_inactive: { status: 409, message: 'This form is inactive and takes no submissions' },
  form_full: { status: 409, message: 'This form has reached its submission limit' },
  nothing_to_save: {
    status: 400,
    message: 'Nothing is filled in yet, so there is nothing to save',
    note: 'a partial save that would start a new partial with no value that passes its checks',
  },
  save_and_resume_off: {
    status: 409,
    message: 'This form does not keep unfinished entries (settings.saveAndResume is off)',
  },
  encryption_changed: {
    status: 409,
    message: 'The encryption of this form changed while this request ran; send it again',
  },
  encryption_change_running: {
    status: 409,
    message: "This form's submissions are still being sealed or opened; try again when encryptionState is null",
  },
  submission_sealed: { status: 409, message: 'This submission is sealed but its form holds no key any more' },
  file_sealed: { status: 409, message: 'This file is sealed but its form holds no key any more' },
  idempotency_in_progress: {
    status: 409,
    message:
      'A request with this Idempotency-Key is still being processed; retry with the same key after Retry-After seconds',
  },
  upload_url_used: { status: 409, message: 'This upload URL has already been used' },
  smart_list_in_use: {
    status: 409,
    message: 'Fields take their options from this smart list; point them elsewhere first',
    note: 'the message names each field and its form',
  },
  theme_in_use: {
    status: 409,
    message: 'Forms use this theme, which is locked in use (lockedInUse); move them to another theme first',
    note: 'the message says how many forms',
  },
  webhook_disabled: { status: 409, message: 'This webhook is disabled; turn it on with PUT active: true first' },
  // 408 to 431
  body_timeout: { status: 408, message: 'The request body did not arrive in time; the connection is closed' },
  headers_timeout: {
    status: 408,
    message: 'The request headers did not arrive in time; the connection is closed',
    note: 'within `REQUEST_TIMEOUT_MS`',
  },
  upload_url_expired: { status: 410, message: 'This upload URL has expired; ask for a new one' },
  payload_too_large: { status: 413, message: 'The request body is larger than this service accepts' },
  not_acceptable: {
    status: 406,
    message: 'This service answers in JSON only: end the path in .json or in nothing',
    note: '/api/v2 paths ending in .xml',
  },
  uri_too_long: { status: 414, message: 'A part of the request path is too long' },
  headers_too_large: {
    status: 431,
    message: 'The request line and headers are larger than this service reads; the connection is closed',
    note: '16 KB together, a long URL included',
  },
  file_too_large: { status: 413, message: 'The file is larger than this field allows' },
  unsupported_media_type: { status: 415, message: 'Send the request body as application/json' },
  idempotency_key_reused: {
    status: 422,
    message: 'This Idempotency-Key was used with a different request; use a new key for a new request',
  },
  rate_limited: { status: 429, message: 'Too many requests; try again later', note: 'wait `Retry-After` seconds' },
  // 5xx
  internal_error: { status: 500, message: 'Something went wrong on our side; it has been logged' },
  submission_integrity_failed: { status: 500, message: 'The stored submission failed its integrity check' },
  file_integrity_failed: { status: 500, message: 'The stored file failed its integrity check and is not sent' },
  rate_limiter_unavailable: {
    status: 503,
    message: 'Rate limits cannot be checked right now; try again shortly',
    note: 'wait `Retry-After` seconds',
  },
  hashing_busy: {
    status: 503,
    message: 'Too many passwords are being checked right now; try again shortly',
    note: 'wait `Retry-After` seconds',
  },
  not_ready: { status: 503, message: 'The service is not ready: a dependency does not answer' },
  database_busy: {
    status: 503,
    message: 'The database is busy with other writes; try again shortly',
    note: 'wait `Retry-After` seconds',
  },
  database_unavailable: {
    status: 503,
    message: 'The database cannot be reached right now; try again shortly',
    note: 'wait `Retry-After` seconds; a write may or may not have been made, so send it again with the same `Idempotency-Key`',
  },
} as const satisfies Record<string, ErrorSpec>;

type Catalogue = typeof ERRORS;
export type ErrorCode = keyof Catalogue;
export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

/** The statuses that code C may be sent with. */
type StatusOf<C extends ErrorCode> = C extends ErrorCode
  ? Catalogue[C]['status'] extends readonly (infer S)[]
    ? S
    : Catalogue[C]['status']
  : never;
/** The codes that may be sent with HTTP status S. */
export type CodeWithStatus<S extends number> = { [C in ErrorCode]: S extends StatusOf<C> ? C : never }[ErrorCode];

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERRORS, code);
}

/** Every status code C may be sent with, the usual one first. */
export function statusesOf(code: ErrorCode): readonly number[] {
  const status: number | readonly number[] = ERRORS[code].status;
  return typeof status === 'number' ? [status] : status;
}

export interface AppErrorOptions {
  details?: ErrorDetail[];
  /** What went wrong underneath (a driver error, a storage or crypto failure): logged, never sent. */
  cause?: unknown;
}

/** An error whose status, code and message are safe to show to the caller; its cause is not. */
export class AppError<C extends ErrorCode = ErrorCode> extends Error {
  readonly statusCode: number;
  readonly details: ErrorDetail[] | undefined;

  constructor(
    readonly code: C,
    message?: string,
    options: AppErrorOptions & { status?: StatusOf<C> } = {},
  ) {
    // A code cast past the types is not in the catalogue: a 500, which the handler refuses to send as is.
    const known = isErrorCode(code);
    super(
      message ?? (known ? ERRORS[code].message : code),
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.statusCode = options.status ?? (known ? statusesOf(code)[0]! : 500);
    this.details = options.details;
  }
}

// One class per common status: the throw site reads as what the client gets, and the compiler
// refuses a code that the catalogue does not send with that status.

export class BadRequestError extends AppError<CodeWithStatus<400>> {
  constructor(code: CodeWithStatus<400>, message?: string, options: AppErrorOptions = {}) {
    super(code, message, { ...options, status: 400 });
  }
}

/** A single bad property: the common case of service-level validation. */
export function invalid(code: CodeWithStatus<400>, property: string, message: string): BadRequestError {
  return new BadRequestError(code, `${property}: ${message}`, { details: [{ property, message }] });
}

export class UnauthorizedError extends AppError<CodeWithStatus<401>> {
  constructor(code: CodeWithStatus<401>, message?: string, options: AppErrorOptions = {}) {
    super(code, message, { ...options, status: 401 });
  }
}

export class ForbiddenError extends AppError<CodeWithStatus<403>> {
  constructor(code: CodeWithStatus<403>, message?: string, options: AppErrorOptions = {}) {
    super(code, message, { ...options, status: 403 });
  }
}

export class NotFoundError extends AppError<CodeWithStatus<404>> {
  constructor(code: CodeWithStatus<404>, message?: string, options: AppErrorOptions = {}) {
    super(code, message, { ...options, status: 404 });
  }
}

export class ConflictError extends AppError<CodeWithStatus<409>> {
  constructor(code: CodeWithStatus<409>, message?: string, options: AppErrorOptions = {}) {
    super(code, message, { ...options, status: 409 });
  }
}

/** A conflict that passes by itself (another request is still running): the error handler sends Retry-After from it. */
export class RetryLaterError extends ConflictError {
  constructor(
    code: CodeWithStatus<409>,
    readonly retryAfterSeconds: number,
    message?: string,
    options: AppErrorOptions = {},
  ) {
    super(code, message, options);
  }
}

/** A quota or an attempt limit is used up; the error handler sends Retry-After from it. */
export class TooManyRequestsError extends AppError<CodeWithStatus<429>> {
  constructor(
    code: CodeWithStatus<429>,
    readonly retryAfterSeconds: number,
    message = `Too many requests; try again in ${retryAfterSeconds} s`,
    options: AppErrorOptions = {},
  ) {
    super(code, message, { ...options, status: 429 });
  }
}

/** A dependency or a capacity is away for now; with retryAfterSeconds, the handler sends Retry-After. */
export class ServiceUnavailableError extends AppError<CodeWithStatus<503>> {
  readonly retryAfterSeconds: number | undefined;
  constructor(
    code: CodeWithStatus<503>,
    message?: string,
    options: AppErrorOptions & { retryAfterSeconds?: number } = {},
  ) {
    super(code, message, { ...options, status: 503 });
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}
