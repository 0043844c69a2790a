import type { ColumnType, Generated, Insertable, RawBuilder, Selectable, Updateable } from 'kysely';

/**
 * Row types of every table. Timestamps are epoch milliseconds (bigint on PostgreSQL,
 * parsed to number), flags are 0/1 integers and structured values are JSON text, so
 * that one migration set and one set of queries serve SQLite and PostgreSQL alike.
 */
export interface Database {
  accounts: AccountsTable;
  users: UsersTable;
  access_tokens: AccessTokensTable;
  folders: FoldersTable;
  forms: FormsTable;
  fields: FieldsTable;
  submissions: SubmissionsTable;
  submission_unique_values: SubmissionUniqueValuesTable;
  submissions_fts: SubmissionsFtsTable;
  idempotency_keys: IdempotencyKeysTable;
  oauth_clients: OAuthClientsTable;
  oauth_grants: OAuthGrantsTable;
  oauth_codes: OAuthCodesTable;
  oauth_refresh_tokens: OAuthRefreshTokensTable;
  form_permissions: FormPermissionsTable;
  jobs: JobsTable;
  job_runs: JobRunsTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  uploads: UploadsTable;
  processes: ProcessesTable;
  form_emails: FormEmailsTable;
  mail_log: MailLogTable;
  partial_submissions: PartialSubmissionsTable;
  prefill_tokens: PrefillTokensTable;
  form_daily_stats: FormDailyStatsTable;
  form_submission_counts: FormSubmissionCountsTable;
  submission_hours: SubmissionHoursTable;
  smart_lists: SmartListsTable;
  smart_list_options: SmartListOptionsTable;
  themes: ThemesTable;
  portals: PortalsTable;
  portal_forms: PortalFormsTable;
  portal_users: PortalUsersTable;
  portal_signin_tokens: PortalSigninTokensTable;
  portal_sessions: PortalSessionsTable;
  portal_submissions: PortalSubmissionsTable;
  docmerge_integrations: DocmergeIntegrationsTable;
  docmerge_documents: DocmergeDocumentsTable;
  docmerge_runs: DocmergeRunsTable;
}

type Id = Generated<number>;
type Flag = ColumnType<number, number | undefined, number>;

export interface AccountsTable {
  id: Id;
  name: string;
  created_at: number;
  /** The account that owns this one, for subaccounts (src/modules/subaccounts); null otherwise. */
  parent_account_id: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface UsersTable {
  id: Id;
  account_id: number;
  email: string;
  name: string;
  password_hash: string | null;
  role: 'owner' | 'admin' | 'member';
  created_at: number;
}

export interface AccessTokensTable {
  id: Id;
  account_id: number;
  user_id: number;
  token_hash: string;
  kind: string;
  name: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  /** Space-separated scopes; null for every scope (personal access tokens made without a list). */
  scope: string | null;
  client_id: number | null;
  grant_id: number | null;
  /** The token's first characters, to tell tokens apart in lists; null for tokens older than it. */
  token_prefix: ColumnType<string | null, string | null | undefined, never>;
  /** Epoch ms of the last use that was written (batched per process, so up to a flush behind). */
  last_used_at: ColumnType<number | null, never, number | null>;
}

export interface OAuthClientsTable {
  id: Id;
  account_id: number;
  client_id: string;
  secret_hash: string;
  name: string;
  /** JSON array of the exact redirect URIs. */
  redirect_uris: string;
  /** 1 when every authorization request of the client must carry a PKCE S256 challenge. */
  require_pkce: Flag;
  created_at: number;
}

export interface OAuthGrantsTable {
  id: Id;
  client_id: number;
  user_id: number;
  account_id: number;
  scope: string;
  created_at: number;
  revoked_at: number | null;
}

export interface OAuthCodesTable {
  id: Id;
  code_hash: string;
  grant_id: number;
  redirect_uri: string;
  scope: string;
  code_challenge: string | null;
  code_challenge_method: string | null;
  expires_at: number;
  used_at: number | null;
}

export interface OAuthRefreshTokensTable {
  id: Id;
  token_hash: string;
  grant_id: number;
  scope: string;
  created_at: number;
  expires_at: number;
  rotated_at: number | null;
  revoked_at: number | null;
}

export interface FormPermissionsTable {
  user_id: number;
  form_id: number;
  account_id: number;
  level: 'view' | 'submissions' | 'edit' | 'full';
  updated_at: number;
}

export interface FoldersTable {
  id: Id;
  account_id: number;
  parent_id: number | null;
  name: string;
  created_at: number;
  updated_at: number;
}

export interface FormsTable {
  id: Id;
  account_id: number;
  folder_id: number | null;
  name: string;
  submit_button_title: string;
  settings: string;
  view_key: string;
  is_encrypted: Flag;
  inactive: Flag;
  /** Goes up with every change to the form or its fields: the version that cached reads check. */
  revision: ColumnType<number, number | undefined, number>;
  /** JSON WrappedFormKey (crypto/envelope.ts) while the form is encrypted. */
  encryption_key: string | null;
  /** 'encrypting' or 'decrypting' while a job converts the form's submissions. */
  encryption_state: 'encrypting' | 'decrypting' | null;
  /** The theme of the form's hosted page (src/modules/themes); null only for rows written before 0018. */
  theme_id: ColumnType<string | null, string | null | undefined, string | null>;
  deleted_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface FieldsTable {
  id: Id;
  account_id: number;
  form_id: number;
  type: string;
  label: string;
  hide_label: Flag;
  description: string;
  default_value: string | null;
  required: Flag;
  read_only: Flag;
  hidden: Flag;
  is_unique: Flag;
  column_span: number;
  display_order: number;
  attributes: string;
  options: string;
  logic: string | null;
  /** The smart list the field takes its options from; null when it holds its own. */
  smart_list_id: ColumnType<number | null, number | null | undefined, number | null>;
  created_at: number;
  updated_at: number;
}

export interface SubmissionsTable {
  id: Id;
  account_id: number;
  form_id: number;
  created_at: number;
  updated_at: number;
  user_agent: string;
  remote_addr: string;
  latitude: number | null;
  longitude: number | null;
  /** JSON object: field id → stored value (see modules/submissions/values.ts). */
  data: string;
  pretty_name: string | null;
  /** PostgreSQL only: the keyword index, written as to_tsvector(...) and never read back. */
  search_vector: ColumnType<never, RawBuilder<unknown> | undefined, RawBuilder<unknown>>;
}

export interface SubmissionUniqueValuesTable {
  submission_id: number;
  form_id: number;
  field_id: number;
  value_norm: string;
}

/** SQLite only: the FTS5 index, rowid = submission id. PostgreSQL keeps a tsvector column instead. */
export interface SubmissionsFtsTable {
  rowid: number;
  content: string;
}

export interface IdempotencyKeysTable {
  account_id: number;
  idem_key: string;
  request_hash: string;
  state: 'running' | 'done';
  response_status: number | null;
  response_body: string | null;
  created_at: number;
  /** The process running the first request (processes.id); null on claims older than that column. */
  owner: ColumnType<number | null, number | null | undefined, number | null>;
  /** A new random value per claim: the first request's writes are conditional on it. */
  token: ColumnType<string | null, string | null | undefined, string | null>;
}

/** The outbox: see src/jobs. payload and progress are JSON text. */
export interface JobsTable {
  id: Id;
  kind: string;
  payload: string;
  state: ColumnType<
    'queued' | 'running' | 'done' | 'failed',
    'queued' | undefined,
    'queued' | 'running' | 'done' | 'failed'
  >;
  /** Epoch ms when the job is due; 0 for as soon as possible. */
  run_at: ColumnType<number, number | undefined, number>;
  attempts: ColumnType<number, number | undefined, number>;
  max_attempts: number;
  lease_owner: string | null;
  /** A new random value per claim: every write of the run that holds it is conditional on it. */
  lease_token: string | null;
  lease_until: number | null;
  progress: string | null;
  last_error: string | null;
  created_at: ColumnType<number, undefined, never>;
  finished_at: number | null;
  /** x-request-id of the request that enqueued the job (0029), or null. */
  request_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** One row per attempt to run a job: the delivery log. */
export interface JobRunsTable {
  id: Id;
  job_id: number;
  attempt: number;
  worker: string;
  started_at: number;
  finished_at: number | null;
  outcome: 'done' | 'failed' | 'lost' | 'interrupted' | null;
  error: string | null;
}

export type WebhookState = 'active' | 'failing' | 'disabled';

/** A form's webhook (src/modules/webhooks). Secrets are sealed with a key derived from SECRET_KEY. */
export interface WebhooksTable {
  id: Id;
  account_id: number;
  form_id: number;
  url: string;
  content_type: 'json' | 'urlencoded';
  /** JSON list of event types. */
  events: string;
  include_field_type: number;
  signing_secret: string;
  hmac_secret: string | null;
  handshake_key: string | null;
  state: ColumnType<WebhookState, WebhookState | undefined, WebhookState>;
  failure_reason: string | null;
  failed_at: number | null;
  created_at: number;
  updated_at: number;
}

/** One attempt to deliver one event to one webhook: the delivery log. */
export interface WebhookDeliveriesTable {
  id: Id;
  webhook_id: number;
  job_id: number;
  message_id: string;
  event: string;
  attempt: number;
  attempted_at: number;
  duration_ms: number;
  response_status: number | null;
  outcome: 'delivered' | 'failed';
  error: string | null;
  next_attempt_at: number | null;
}

/** A document-merge integration of a form (src/modules/docmerge). */
export interface DocmergeIntegrationsTable {
  id: Id;
  account_id: number;
  form_id: number;
  name: string;
  template_kind: 'docx' | 'pdf';
  template_name: string;
  /** base64 */
  template: string;
  template_size: number;
  /** JSON list of tag or PDF field names. */
  tags: string;
  /** JSON object: tag → field id. */
  mapping: string;
  file_name: string;
  /** JSON rule of the shape of field logic, or null. */
  logic: string | null;
  /** JSON list of addresses. */
  email_to: string;
  email_subject: string | null;
  active: Flag;
  flatten: Flag;
  created_at: number;
  updated_at: number;
}

/** A document made by an integration from one submission. */
export interface DocmergeDocumentsTable {
  id: Id;
  account_id: number;
  form_id: number;
  submission_id: number;
  integration_id: number;
  file_name: string;
  content_type: string;
  size: number;
  storage_key: string;
  sealed: Flag;
  created_at: number;
}

/** One attempt of a generation job: the integration's run log. */
export interface DocmergeRunsTable {
  id: Id;
  integration_id: number;
  job_id: number;
  submission_id: number;
  attempt: number;
  attempted_at: number;
  duration_ms: number;
  outcome: 'made' | 'exists' | 'skipped' | 'failed';
  error: string | null;
  document_id: number | null;
  next_attempt_at: number | null;
}

export type DocmergeIntegrationRow = Selectable<DocmergeIntegrationsTable>;
export type DocmergeDocumentRow = Selectable<DocmergeDocumentsTable>;
export type DocmergeRunRow = Selectable<DocmergeRunsTable>;
export type WebhookRow = Selectable<WebhooksTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type JobRow = Selectable<JobsTable>;
export type JobRunRow = Selectable<JobRunsTable>;
export type UploadState = 'issued' | 'receiving' | 'stored' | 'claimed';

export interface UploadsTable {
  file_key: string;
  account_id: number;
  form_id: number;
  field_id: number;
  filename: string;
  content_type: string;
  storage_key: string;
  max_size: number;
  size: number | null;
  state: UploadState;
  via: 'service' | 'presigned';
  expires_at: number;
  submission_id: number | null;
  created_at: number;
  /** 1 when the object is sealed to the form's public key; size is then the plaintext's. */
  sealed: Flag;
  /** While receiving: the process taking the bytes (processes.id) and the token that fences its writes. */
  receiver: ColumnType<number | null, number | null | undefined, number | null>;
  receive_token: ColumnType<string | null, string | null | undefined, string | null>;
}

/** One row per running process: see src/modules/processes. */
export interface ProcessesTable {
  id: Id;
  host: string;
  pid: number;
  started_at: number;
  /** Epoch ms by the database's clock. */
  heartbeat_at: number;
}

/** Confirmation and notification emails of forms: see src/modules/emails. */
export interface FormEmailsTable {
  id: Id;
  account_id: number;
  form_id: number;
  kind: 'confirmation' | 'notification';
  name: string;
  sender_name: string;
  reply_to: string | null;
  reply_to_field_id: number | null;
  recipient_field_id: number | null;
  /** JSON list of addresses. */
  recipients: string;
  subject: string;
  message: string;
  format: 'html' | 'text';
  /** JSON FieldLogic, or null. */
  logic: string | null;
  attach_files: Flag;
  created_at: number;
  updated_at: number;
}

/** Messages kept instead of sent when no SMTP server is set. */
export interface MailLogTable {
  id: Id;
  account_id: number;
  /** null for a portal sign-in link, which no form sends. */
  form_id: number | null;
  /** null for a resume link, which no form email sends. */
  email_id: number | null;
  submission_id: number | null;
  /** A resume link's partial submission. */
  partial_submission_id: number | null;
  /** A portal sign-in link's portal. */
  portal_id: ColumnType<number | null, number | null | undefined, number | null>;
  job_id: number;
  kind: 'confirmation' | 'notification' | 'resume_link' | 'portal_signin' | 'document';
  sender: string;
  /** JSON list of addresses. */
  recipients: string;
  reply_to: string | null;
  subject: string;
  text_body: string;
  html_body: string | null;
  /** JSON list of {name, size, contentType}. */
  attachments: string;
  created_at: number;
}

export type FormEmailRow = Selectable<FormEmailsTable>;
export type NewFormEmailRow = Insertable<FormEmailsTable>;
export type MailLogRow = Selectable<MailLogTable>;
export type UploadRow = Selectable<UploadsTable>;
export type SubmissionRow = Selectable<SubmissionsTable>;
export type FolderRow = Selectable<FoldersTable>;
/** A form as read: its row and its submission count (summed from form_submission_counts). */
/** A form's row with its submission count and write version, summed from form_submission_counts. */
export type FormRow = Selectable<FormsTable> & { submissions_count: number; submissions_version: number };
export type NewFormRow = Insertable<FormsTable>;
export type FormUpdate = Updateable<FormsTable>;
export type FieldRow = Selectable<FieldsTable>;
export type NewFieldRow = Insertable<FieldsTable>;
export type FieldUpdate = Updateable<FieldsTable>;
export type UserRow = Selectable<UsersTable>;

export interface PartialSubmissionsTable {
  id: Id;
  account_id: number;
  form_id: number;
  resume_hash: string;
  /** JSON object: field id → stored value; sealed on an encrypted form. */
  data: string;
  /** Encrypted forms: the values sealed under the resume token's key (modules/partials/sealing.ts). */
  resume_data: string | null;
  pretty_name: string | null;
  user_agent: string;
  remote_addr: string;
  created_at: number;
  updated_at: number;
  expires_at: number;
}
export type PartialSubmissionRow = Selectable<PartialSubmissionsTable>;

export interface PrefillTokensTable {
  id: string;
  account_id: number;
  form_id: number;
  data: string;
  created_at: number;
  expires_at: number;
}

export interface FormDailyStatsTable {
  form_id: number;
  day: string;
  account_id: number;
  views: ColumnType<number, number | undefined, number>;
  starts: ColumnType<number, number | undefined, number>;
  partial_saves: ColumnType<number, number | undefined, number>;
  completions: ColumnType<number, number | undefined, number>;
  refused_rate_limit: ColumnType<number, number | undefined, number>;
  refused_honeypot: ColumnType<number, number | undefined, number>;
  refused_too_fast: ColumnType<number, number | undefined, number>;
  refused_too_large: ColumnType<number, number | undefined, number>;
}

/**
 * A form's submission count, spread over slots so that concurrent writers do not queue on
 * one row (a writer adds to its connection's slot); the count is the sum over the slots.
 */
export interface FormSubmissionCountsTable {
  form_id: number;
  slot: number;
  /** Submissions added (created minus deleted). */
  n: number;
  /** Writes made (creates, edits, deletes): summed, the version that cached totals check. */
  version: number;
}

/** Submissions added per form, hour of created_at (epoch ms / 3,600,000) and slot: time-range totals. */
export interface SubmissionHoursTable {
  form_id: number;
  hour: number;
  slot: number;
  n: number;
  /** The smallest and largest id of the submissions this slot added in the hour (migration 0037); null for none. */
  first_id: number | null;
  last_id: number | null;
}
export interface SmartListsTable {
  id: Id;
  account_id: number;
  name: string;
  use_images: Flag;
  created_at: number;
  updated_at: number;
}

export interface SmartListOptionsTable {
  id: Id;
  account_id: number;
  list_id: number;
  label: string;
  value: string;
  display_order: number;
  image_key: string | null;
  /** The image's media type, read from its bytes (image/png …). */
  image_type: string | null;
  image_size: number | null;
  created_at: number;
  updated_at: number;
}

export type SmartListRow = Selectable<SmartListsTable>;
export type SmartListOptionRow = Selectable<SmartListOptionsTable>;
export type NewSmartListOptionRow = Insertable<SmartListOptionsTable>;

/** Themes of an account's hosted forms: see src/modules/themes. */
export interface ThemesTable {
  /** th_ and 16 URL-safe characters. */
  id: string;
  account_id: number;
  name: string;
  is_default: Flag;
  locked_in_use: Flag;
  /** JSON: colors, fontFamily, spacing, logoUrl (themes/schemas.ts ThemeStyle). */
  style: string;
  custom_css: string;
  created_at: number;
  updated_at: number;
}

export type ThemeRow = Selectable<ThemesTable>;
export type NewThemeRow = Insertable<ThemesTable>;

export interface PortalsTable {
  id: Id;
  account_id: number;
  name: string;
  description: string | null;
  /** The public part of the portal page's address, /p/{portal_key}. */
  portal_key: string;
  avatar_key: string | null;
  /** The avatar's media type, read from its bytes. */
  avatar_type: string | null;
  avatar_size: number | null;
  created_at: number;
  updated_at: number;
}

export interface PortalFormsTable {
  portal_id: number;
  form_id: number;
  account_id: number;
  /** Epoch ms; null for no due date. */
  due_at: number | null;
  required: Flag;
  created_at: number;
  updated_at: number;
}

export interface PortalUsersTable {
  id: Id;
  portal_id: number;
  account_id: number;
  email: string;
  /** The address in lower case: unique within the portal. */
  email_key: string;
  name: string;
  last_sign_in_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface PortalSigninTokensTable {
  id: Id;
  /** SHA-256 of the link's token, base64url. */
  token_hash: string;
  portal_user_id: number;
  expires_at: number;
  used_at: number | null;
  created_at: number;
}

export interface PortalSessionsTable {
  id: Id;
  /** SHA-256 of the cookie's value, base64url. */
  token_hash: string;
  portal_user_id: number;
  expires_at: number;
  created_at: number;
}

export interface PortalSubmissionsTable {
  submission_id: number;
  portal_user_id: number;
  form_id: number;
  created_at: number;
}

export type PortalRow = Selectable<PortalsTable>;
export type PortalFormRow = Selectable<PortalFormsTable>;
export type PortalUserRow = Selectable<PortalUsersTable>;
