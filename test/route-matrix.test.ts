/**
 * Checks generated from the route table: every operation of the OpenAPI document is run
 * through the authentication, cross-account and bad-input matrices, so a route added later
 * is covered without touching this file — unless it has a path parameter, an id-shaped
 * body/query property or a JSON body this file does not know yet, in which case the
 * "route table" checks fail and name what to extend (FIXTURE_IDS, ID_PROPERTIES, VALID_BODIES of test/support/route-bodies.ts,
 * REQUIRED_QUERIES).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { API_PREFIX } from '../src/app.js';
import { isV2Path } from '../src/modules/v2/paths.js';
import { hashToken, newToken } from '../src/crypto/secrets.js';
import { insertToken, revokeToken } from '../src/modules/accounts/repository.js';
import { createPersonalToken, PAT_PREFIX } from '../src/modules/accounts/service.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker } from '../src/jobs/worker.js';
import { insertMail } from '../src/modules/emails/repository.js';
import { dialectName, startTestApp, type Reply, type RequestOptions, type TestAccount } from './support/helpers.js';
import { MATRIX_TEMPLATE, VALID_BODIES } from './support/route-bodies.js';
import { savePartialOf } from './support/partials.js';

type Schema = Record<string, any>;
type Id = number | string;
type Ids = Record<string, Id>;

interface Operation {
  key: string; // "PUT /forms/{formId}"
  method: string;
  path: string; // relative to API_PREFIX, with {params}
  pathParams: string[];
  query: { name: string; schema: Schema; required: boolean }[];
  body: Schema | undefined;
  /** It describes a request body, of any content type. */
  takesBody: boolean;
}

const MAX_ID = 2_147_483_647;
const MIN_OPERATIONS = 15;
const HTTP_METHODS = new Set(['get', 'post', 'put', 'patch', 'delete']);

/**
 * Required query parameters, as a query string each operation needs to be answered at all.
 * The search for MARK finds A's submission for A and must find nothing for B.
 */
const REQUIRED_QUERIES: Record<string, Record<string, () => string>> = {
  'GET /submissions': { search: () => MARK },
  // A's file field, which A's first submission holds a file in.
  'GET /submissions/{submissionId}/upload': { fieldId: () => String(aIds.fieldId![0]) },
};

/** Body and query properties that hold an id, by the path parameter whose ids they take. */
const ID_PROPERTIES: Record<string, string> = {
  folder: 'folderId',
  parent: 'folderId',
  template: 'formId',
  recipientField: 'emailFieldId',
  smartList: 'smartListId',
  replyToField: 'emailFieldId',
};
const idKindOf = (name: string): string | undefined =>
  ID_PROPERTIES[name] ?? (/^[a-z]\w*Id$/.test(name) ? name : undefined);

/**
 * The original service's v2 operations (tag "v2 (original service)", docs/v2.md) sit at their
 * full /api/v2 paths. They read form-encoded or JSON bodies and ignore names they do not know,
 * as the original did, so the checks of strict JSON bodies and query strings are not theirs;
 * every other matrix is.
 */
const isV2 = (op: { path: string }) => op.path.startsWith('/api/v2/');
const base = (op: { path: string }) => (isV2(op) ? '' : API_PREFIX);

const BAD_PATH_IDS = ['abc', '1.5', '0', '-1', '99999999999'];

/**
 * The kind of id a path parameter takes, where the name alone does not say: under
 * /subaccount/{subaccountId}/themes/ and /forms/, themeId and formId name the subaccount's
 * theme and form (elsewhere, the account's own). Fixture ids are kept by kind.
 */
function kindOf(op: { path: string }, param: string): string {
  if (param === 'themeId' && op.path.startsWith('/subaccount/{subaccountId}/themes/')) return 'subThemeId';
  if (param === 'formId' && op.path.startsWith('/subaccount/{subaccountId}/forms/')) return 'subFormId';
  return param;
}

/** Ids of kinds that are strings (themeId), and a well-formed one that exists nowhere; integers use MAX_ID. */
const NOWHERE_IDS: Record<string, string> = { themeId: 'th_zzzzzzzzzzzzzzzz', subThemeId: 'th_zzzzzzzzzzzzzzzz' };
const nowhere = (op: Operation, param: string): Id => NOWHERE_IDS[kindOf(op, param)] ?? MAX_ID;
/** Numbers that JavaScript's Number() reads but that are not written the one plain way. */
const MISSPELT_NUMBERS = ['0x10', '+1', '1e0', '01', ' 1', '1 ', '1.', '0b1', '\t1'];
/** Text that no input takes: a NUL, lone surrogates, a reversed pair. */
const BAD_TEXT = ['a\u0000b', '\u0000', 'a\ud800b', 'a\udfffb', '\udc00\ud800'];
/** Percent-escapes that are not UTF-8 (a lone surrogate's bytes, a stray byte, an overlong NUL). */
const NOT_UTF8_ESCAPES = ['%ED%A0%80', '%FF', 'a%C3', '%C0%80'];
const ERROR_KEYS = new Set(['status', 'error', 'code', 'details']);

// ---------------------------------------------------------------- schema helpers

function makeAjv(coerceTypes: boolean | 'array') {
  const ajv = new Ajv.default({ coerceTypes, allErrors: true, strict: false });
  addFormats.default(ajv);
  return ajv;
}
const bodyAjv = makeAjv(false);
const queryAjv = makeAjv('array');

/** The JSON types a schema accepts, or 'any' when it does not restrict them. */
function acceptedTypes(s: Schema): Set<string> | 'any' {
  if (s.type !== undefined) return new Set(Array.isArray(s.type) ? s.type : [s.type]);
  const branches = s.anyOf ?? s.oneOf;
  if (Array.isArray(branches)) {
    const all = new Set<string>();
    for (const b of branches as Schema[]) {
      const t = acceptedTypes(b);
      if (t === 'any') return 'any';
      t.forEach((x) => all.add(x));
    }
    return all;
  }
  if (s.const !== undefined) return new Set([jsonType(s.const)]);
  if (Array.isArray(s.enum)) return new Set((s.enum as unknown[]).map(jsonType));
  return 'any';
}

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function accepts(types: Set<string>, v: unknown): boolean {
  const t = jsonType(v);
  return types.has(t) || (t === 'integer' && types.has('number'));
}

function isIdSchema(s: Schema): boolean {
  if (s.type === 'integer' && s.maximum === MAX_ID) return true;
  return ((s.anyOf ?? s.oneOf ?? []) as Schema[]).some(isIdSchema);
}

/** Paths (as the error details name them) to every string in a body, with a setter for it. */
function stringLeaves(
  value: unknown,
  path = 'body',
  out: { property: string; set(v: string): unknown }[] = [],
  rebuild: (v: unknown) => unknown = (v) => v,
) {
  if (typeof value === 'string') out.push({ property: path, set: (v) => rebuild(v) });
  else if (Array.isArray(value))
    value.forEach((item, i) =>
      stringLeaves(item, `${path}[${i}]`, out, (v) => rebuild(value.map((x, j) => (j === i ? v : x)))),
    );
  else if (typeof value === 'object' && value !== null) {
    for (const [k, item] of Object.entries(value))
      stringLeaves(item, `${path}.${k}`, out, (v) => rebuild({ ...value, [k]: v }));
  }
  return out;
}

/** Paths to every string with a maxLength, through nested objects (and object/string branches of unions). */
function boundedStrings(
  s: Schema,
  path: string[] = [],
  out = new Map<string, { path: string[]; maxLength: number }>(),
) {
  if (typeof s.maxLength === 'number' && path.length > 0) {
    const key = path.join('.');
    if (!out.has(key)) out.set(key, { path, maxLength: s.maxLength });
  }
  for (const [name, sub] of Object.entries((s.properties ?? {}) as Record<string, Schema>))
    boundedStrings(sub, [...path, name], out);
  for (const branch of (s.anyOf ?? s.oneOf ?? []) as Schema[]) boundedStrings(branch, path, out);
  return [...out.values()];
}

function setAt(obj: Record<string, any>, path: string[], value: unknown): Record<string, any> {
  const copy = structuredClone(obj);
  let at = copy;
  for (const p of path.slice(0, -1)) {
    if (typeof at[p] !== 'object' || at[p] === null || Array.isArray(at[p])) at[p] = {};
    at = at[p];
  }
  at[path[path.length - 1]!] = value;
  return copy;
}

// ---------------------------------------------------------------- the app and its route table

const app = await startTestApp();
const docReply = await app.request('GET', `${API_PREFIX}/openapi.json`);
assert.equal(docReply.status, 200, 'the OpenAPI document is served');
const doc = docReply.body as Schema;

/** Resolves #/components/... refs against the document. */
function compileBody(ajv: ReturnType<typeof makeAjv>, schema: Schema) {
  return ajv.compile({ ...schema, components: doc.components });
}

const operations: Operation[] = [];
for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Schema>)) {
  for (const [method, op] of Object.entries(item)) {
    if (!HTTP_METHODS.has(method)) continue;
    const parameters = ((op as Schema).parameters ?? []) as Schema[];
    operations.push({
      key: `${method.toUpperCase()} ${path}`,
      method: method.toUpperCase(),
      path,
      pathParams: [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!),
      // A parameter with a default is listed as required too; only one without is needed.
      query: parameters
        .filter((p) => p.in === 'query')
        .map((p) => ({
          name: p.name as string,
          schema: p.schema as Schema,
          required: p.required === true && (p.schema as Schema).default === undefined,
        })),
      body: (op as Schema).requestBody?.content?.['application/json']?.schema as Schema | undefined,
      takesBody: (op as Schema).requestBody !== undefined,
    });
  }
}
const bodyValidators = new Map(operations.filter((o) => o.body).map((o) => [o.key, compileBody(bodyAjv, o.body!)]));

// ---------------------------------------------------------------- fixture state (filled in `before`)

const MARK = `secret${randomBytes(4).toString('hex')}`; // in every name of A's: must never reach B
let a: TestAccount;
let b: TestAccount;
/** Path parameter → A's ids; the first is the one used for A's own requests. */
const aIds: Record<string, Id[]> = {};
/** Path parameter → B's own id. */
const bIds: Ids = {};
let revokedToken = '';
let expiredToken = '';
const unknownToken = `${PAT_PREFIX}${randomBytes(32).toString('base64url')}`;
let baselineA: unknown;
let baselineB: unknown;

const first = (ids: Record<string, Id[]>): Ids => Object.fromEntries(Object.entries(ids).map(([k, v]) => [k, v[0]!]));

/** The path with values (ids by kind, see kindOf), or overrides (by parameter name) where given. */
function fillPath(op: Operation, values: Ids, overrides: Ids = {}): string {
  return op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = overrides[name] ?? values[kindOf(op, name)];
    if (v === undefined) {
      throw new Error(
        `No fixture id for path parameter {${name}} of ${op.key}: extend the fixture in test/route-matrix.test.ts`,
      );
    }
    return encodeURIComponent(String(v));
  });
}

function validBody(op: Operation, ids: Ids): Record<string, unknown> | undefined {
  if (!op.body) return undefined;
  const make = VALID_BODIES[op.key];
  if (!make)
    throw new Error(
      `${op.key} takes a JSON body but VALID_BODIES in test/support/route-bodies.ts has no valid body for it`,
    );
  return make(ids);
}

/** The operation's required query parameters (REQUIRED_QUERIES) followed by more, as "?..." or "". */
function withQuery(op: Operation, more = ''): string {
  const given = more.replace(/^\?/, '');
  const named = new Set(given.split('&').map((p) => p.split('=')[0]));
  const required = Object.entries(REQUIRED_QUERIES[op.key] ?? {})
    .filter(([name]) => !named.has(name))
    .map(([name, value]) => `${name}=${encodeURIComponent(value())}`);
  const parts = [...required, given].filter((p) => p !== '');
  return parts.length > 0 ? `?${parts.join('&')}` : '';
}

let requests = 0;

/** Every request goes through here: nothing may ever answer 5xx. */
async function call(method: string, path: string, options: RequestOptions, what: string): Promise<Reply> {
  requests++;
  const res = await app.request(method, path, options);
  assert.ok(res.status < 500, `${what}: ${method} ${path} answered ${res.status} ${res.text.slice(0, 500)}`);
  return res;
}

function assertError(res: Reply, status: number, what: string, code?: string): void {
  const where = `${what} (got ${res.status} ${res.text.slice(0, 300)})`;
  assert.equal(res.status, status, where);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, where);
  const body = res.body;
  assert.ok(body && typeof body === 'object' && !Array.isArray(body), where);
  assert.equal(body.status, 'error', where);
  assert.equal(typeof body.error, 'string', where);
  assert.ok(body.error.length > 0, where);
  assert.match(body.code, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, where);
  if (code !== undefined) assert.equal(body.code, code, where);
  for (const k of Object.keys(body)) assert.ok(ERROR_KEYS.has(k), `${where}: unexpected key ${k}`);
  if (body.details !== undefined) {
    assert.ok(Array.isArray(body.details) && body.details.length > 0, where);
    for (const d of body.details) {
      assert.deepEqual(Object.keys(d).sort(), ['message', 'property'], where);
      assert.equal(typeof d.property, 'string', where);
      assert.equal(typeof d.message, 'string', where);
    }
  }
}

function assertDetail(res: Reply, property: string, what: string): void {
  const props = ((res.body?.details ?? []) as { property: string }[]).map((d) => d.property);
  assert.ok(props.includes(property), `${what}: details should name ${property}, got ${JSON.stringify(props)}`);
}

async function ok(res: Promise<Reply>, what: string): Promise<any> {
  const r = await res;
  assert.equal(r.status, 200, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.body;
}

async function created(res: Promise<Reply>, what: string): Promise<any> {
  const r = await res;
  assert.equal(r.status, 201, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.body;
}

let loggedJobs = 2_000_000;

/** A message of the account's mail log, as a send job without SMTP_URL writes one; returns its id. */
async function logMessage(acc: TestAccount, formId: number, submissionId: number, subject: string): Promise<number> {
  const jobId = ++loggedJobs;
  const db = app.server.ctx.db;
  await insertMail(db, {
    account_id: acc.accountId,
    form_id: formId,
    email_id: 1,
    submission_id: submissionId,
    job_id: jobId,
    kind: 'notification',
    sender: 'formwork@forms.test',
    recipients: '["team@example.com"]',
    reply_to: null,
    subject,
    text_body: subject,
    html_body: null,
    attachments: '[]',
    created_at: Date.now(),
  });
  return (await db.selectFrom('mail_log').select('id').where('job_id', '=', jobId).executeTakeFirstOrThrow()).id;
}

/** Everything an account can read about itself. */
async function snapshot(acc: TestAccount): Promise<unknown> {
  const forms = await ok(acc.get('/forms?pageSize=100'), 'list forms');
  const deleted = await ok(acc.get('/forms?deleted=true&pageSize=100'), 'list deleted forms');
  const formDetails: unknown[] = [];
  for (const f of forms.forms) {
    formDetails.push(await ok(acc.get(`/forms/${f.id}?withFields=true`), 'read form'));
    formDetails.push(await ok(acc.get(`/forms/${f.id}/fields`), 'list fields'));
    for (const kind of ['confirmations', 'notifications']) {
      const list = await ok(acc.get(`/forms/${f.id}/${kind}`), `list ${kind}`);
      formDetails.push(list);
      for (const e of list[kind]) formDetails.push(await ok(acc.get(`/${kind}/${e.id}`), `read ${kind}`));
    }
    const submissions = await ok(
      acc.get(`/forms/${f.id}/submissions?pageSize=100&expandData=true&prettyName=true`),
      'list submissions',
    );
    formDetails.push(submissions);
    for (const s of submissions.submissions)
      formDetails.push(await ok(acc.get(`/submissions/${s.id}`), 'read submission'));
    const integrations = await ok(acc.get(`/forms/${f.id}/integrations`), 'list integrations');
    formDetails.push(integrations);
    for (const i of integrations.integrations) {
      formDetails.push(await ok(acc.get(`/forms/${f.id}/integrations/${i.id}`), 'read integration'));
      formDetails.push(await ok(acc.get(`/forms/${f.id}/integrations/${i.id}/runs`), 'list runs'));
    }
    const webhooks = await ok(acc.get(`/form/${f.id}/webhook`), 'list webhooks');
    formDetails.push(webhooks);
    for (const w of webhooks.webhooks) {
      formDetails.push(await ok(acc.get(`/webhook/${w.id}`), 'read webhook'));
      formDetails.push(await ok(acc.get(`/webhook/${w.id}/deliveries`), 'list deliveries'));
    }
  }
  const users = await ok(acc.get('/users'), 'list users');
  const permissions: unknown[] = [];
  for (const u of users.users) permissions.push(await ok(acc.get(`/users/${u.id}/permissions`), 'list permissions'));
  const tokens: unknown[] = [await ok(acc.get('/tokens'), 'list own tokens')];
  for (const u of users.users) tokens.push(await ok(acc.get(`/users/${u.id}/tokens`), 'list tokens'));
  const clients = await ok(acc.get('/oauth-clients'), 'list OAuth clients');
  const mail = await ok(acc.get('/mail-log?pageSize=100'), 'list the mail log');
  const smartLists = await ok(acc.get('/smartlists?pageSize=100'), 'list smart lists');
  for (const l of smartLists.smartLists) {
    formDetails.push(await ok(acc.get(`/smartlists/${l.id}`), 'read smart list'));
    const options = await ok(acc.get(`/smartlists/${l.id}/options?pageSize=100`), 'list options');
    formDetails.push(options);
    for (const o of options.options)
      formDetails.push(await ok(acc.get(`/smartlists/${l.id}/options/${o.id}`), 'read option'));
  }
  const themes = await ok(acc.get('/themes?pageSize=100'), 'list themes');
  for (const t of themes.themes) formDetails.push(await ok(acc.get(`/themes/${t.id}`), 'read theme'));
  const subaccounts = await ok(acc.get('/subaccount?pageSize=100'), 'list subaccounts');
  for (const s of subaccounts.subaccounts) {
    const subThemes = await ok(acc.get(`/subaccount/${s.id}/themes?pageSize=100`), 'list subaccount themes');
    formDetails.push(subThemes);
    for (const t of subThemes.themes)
      formDetails.push(await ok(acc.get(`/subaccount/${s.id}/themes/${t.id}/forms?pageSize=100`), 'list theme forms'));
  }
  const portals = await ok(acc.get('/portal?pageSize=100'), 'list portals');
  for (const p of portals.portals) formDetails.push(await ok(acc.get(`/portal/${p.id}`), 'read portal'));
  const folders = await ok(acc.get('/folders?perPage=100'), 'list folders');
  const folderDetails: unknown[] = [];
  const walk = async (list: any[]): Promise<void> => {
    for (const f of list) {
      folderDetails.push(await ok(acc.get(`/folders/${f.id}`), 'read folder'));
      await walk(f.subfolders);
    }
  };
  await walk(folders.folders);
  return {
    forms,
    deleted,
    formDetails,
    smartLists,
    themes,
    subaccounts,
    portals,
    folders,
    folderDetails,
    users,
    permissions,
    tokens,
    clients,
    mail,
  };
}

/** The last test of each matrix: nothing it sent changed A's or B's data. */
async function assertUnchanged(t: { diagnostic(message: string): void }): Promise<void> {
  assert.deepEqual(await snapshot(a), baselineA, "account A's data changed");
  assert.deepEqual(await snapshot(b), baselineB, "account B's data changed");
  t.diagnostic(`${requests} matrix requests so far`);
}

/** Each combination of A's and B's ids for the path parameters with at least one of A's. */
function crossPathVariants(op: Operation): Ids[] {
  let combos: { ids: Ids; foreign: boolean }[] = [{ ids: {}, foreign: false }];
  for (const p of op.pathParams) {
    const options = [
      ...(aIds[kindOf(op, p)] ?? []).map((id) => ({ id, foreign: true })),
      ...(bIds[kindOf(op, p)] !== undefined ? [{ id: bIds[kindOf(op, p)]!, foreign: false }] : []),
    ];
    if (options.length === 0)
      throw new Error(
        `No fixture id for path parameter {${p}} of ${op.key}: extend the fixture in test/route-matrix.test.ts`,
      );
    combos = combos.flatMap((c) =>
      options.map((o) => ({ ids: { ...c.ids, [kindOf(op, p)]: o.id }, foreign: c.foreign || o.foreign })),
    );
  }
  return combos.filter((c) => c.foreign).map((c) => c.ids);
}

function bodyIdProperties(op: Operation): { name: string; kind: string | undefined }[] {
  return Object.entries((op.body?.properties ?? {}) as Record<string, Schema>)
    .filter(([, s]) => isIdSchema(s))
    .map(([name]) => ({ name, kind: idKindOf(name) }));
}

function queryIdProperties(op: Operation): { name: string; kind: string | undefined }[] {
  return op.query.filter((q) => isIdSchema(q.schema)).map((q) => ({ name: q.name, kind: idKindOf(q.name) }));
}

// ---------------------------------------------------------------- the matrices

describe(`route matrix (${dialectName})`, () => {
  before(async () => {
    a = await app.account(`A ${MARK}`);
    b = await app.account('B');
    const db = app.server.db.kysely;

    // A: a folder with a subfolder, a form in the folder with fields (one select, one with
    // logic on it), a second form in the subfolder, and a deleted form.
    const folder = await ok(a.post('/folders', { name: `Folder ${MARK}` }), 'create folder');
    const subfolder = await ok(
      a.post('/folders', { name: `Subfolder ${MARK}`, parent: folder.id }),
      'create subfolder',
    );
    const form = await ok(
      a.post('/forms', {
        name: `Form ${MARK}`,
        folder: folder.id,
        submitButtonTitle: 'Send',
        settings: { description: `About ${MARK}`, language: 'en', labelPosition: 'left' },
        fields: [
          { type: 'name', label: `Name ${MARK}`, required: true },
          { type: 'email', label: `Email ${MARK}`, unique: true },
          {
            type: 'select',
            label: `Topic ${MARK}`,
            options: [
              { label: 'Sales', value: 'sales' },
              { label: 'Support', value: 'support' },
            ],
            defaultValue: 'sales',
          },
          { type: 'number', label: `Age ${MARK}`, attributes: { min: 0, max: 130 } },
          { type: 'file', label: `Attachment ${MARK}` },
        ],
      }),
      'create form',
    );
    const select = form.fields.find((f: any) => f.type === 'select');
    const fileField = form.fields.find((f: any) => f.type === 'file');
    const withLogic = await ok(
      a.post(`/forms/${form.id}/fields`, {
        type: 'textarea',
        label: `Ticket ${MARK}`,
        logic: {
          action: 'show',
          conditional: 'all',
          checks: [{ field: select.id, condition: 'equals', option: 'support' }],
        },
      }),
      'create field with logic',
    );
    const second = await ok(
      a.post('/forms', {
        name: `Second ${MARK}`,
        folder: subfolder.id,
        fields: [{ type: 'text', label: `Note ${MARK}` }],
      }),
      'create form',
    );
    const gone = await ok(
      a.post('/forms', { name: `Deleted ${MARK}`, fields: [{ type: 'text', label: `Gone ${MARK}` }] }),
      'create form',
    );
    // A webhook on the first form, whose deliveries the submission below starts. It points at
    // a name of the loopback address, which the matrix's app refuses (WEBHOOK_ALLOW_PRIVATE is
    // off): the attempt fails at once, without the network, and is logged.
    const webhook = await ok(
      a.post(`/form/${form.id}/webhook`, { url: `http://localhost:9/${MARK}`, handshakeKey: MARK }),
      'create webhook',
    );
    // A document-merge integration on the first form: the worker makes a document of the submission below.
    const integration = await created(
      a.post(`/forms/${form.id}/integrations/docmerge`, {
        name: `Merge ${MARK}`,
        template: { filename: 'matrix.docx', content: MATRIX_TEMPLATE },
        fileName: `Doc ${MARK} {submission_id}`,
      }),
      'create integration',
    );
    // A submission in each form (the deleted form's one made before it was deleted).
    const [nameField, emailField, , ageField] = form.fields;
    const submission = await ok(
      a.post(`/forms/${form.id}/submissions`, {
        fields: [
          { id: nameField.id, value: { first: 'Ann', last: MARK } },
          { id: emailField.id, value: { value: `ann-${MARK}@example.com` } },
          { id: select.id, value: { subvalues: [{ subvalue: 'support' }] } },
          { id: ageField.id, value: 30 },
          { id: withLogic.id, value: `Ticket about ${MARK}` },
          { id: fileField.id, value: `notes.txt;${Buffer.from(`Notes on ${MARK}`).toString('base64')}` },
        ],
      }),
      'create submission',
    );
    const secondSubmission = await ok(
      a.post(`/forms/${second.id}/submissions`, { fields: [{ id: second.fields[0].id, value: `Note ${MARK}` }] }),
      'create submission',
    );
    const goneSubmission = await ok(
      a.post(`/forms/${gone.id}/submissions`, { fields: [{ id: gone.fields[0].id, value: `Gone ${MARK}` }] }),
      'create submission',
    );
    await ok(a.delete(`/forms/${gone.id}`), 'delete form');
    // A member with a level on the first form, and an OAuth client.
    const member = await ok(
      a.post('/users', { email: `member-${MARK}@example.com`, name: `Member ${MARK}`, role: 'member' }),
      'create member',
    );
    await ok(a.put(`/users/${member.id}/permissions/${form.id}`, { level: 'edit' }), 'give a level');
    const client = await ok(
      a.post('/oauth-clients', { name: `App ${MARK}`, redirectUris: ['https://example.com/a'] }),
      'create client',
    );
    // Personal access tokens: the member's, and one of A's own.
    const memberToken = await ok(
      a.post(`/users/${member.id}/tokens`, { name: `Member token ${MARK}` }),
      'create member token',
    );
    const ownToken = await ok(a.post('/tokens', { name: `Own token ${MARK}` }), 'create own token');
    const confirmation = await created(
      a.post(`/forms/${form.id}/confirmations`, {
        name: `Thanks ${MARK}`,
        subject: `Thanks ${MARK}`,
        message: '{{ all_fields }}',
        recipientField: emailField.id,
      }),
      'create confirmation',
    );
    const notification = await created(
      a.post(`/forms/${form.id}/notifications`, {
        name: `Notify ${MARK}`,
        subject: `New ${MARK}`,
        message: '{{ all_fields }}',
        recipients: [`team-${MARK}@example.com`],
      }),
      'create notification',
    );
    // A smart list with options, which a field of the first form takes its options from.
    const smartList = await created(a.post('/smartlists', { name: `List ${MARK}`, useImages: true }), 'create list');
    const listOption = await created(
      a.post(`/smartlists/${smartList.id}/options`, { label: `Red ${MARK}`, value: 'red' }),
      'create option',
    );
    await ok(
      a.post(`/smartlists/${smartList.id}/bulkoptions`, { options: [{ label: `Blue ${MARK}`, value: 'blue' }] }),
      'bulk options',
    );
    await ok(
      a.post(`/forms/${form.id}/fields`, { type: 'radio', label: `Colour ${MARK}`, smartList: smartList.id }),
      'create field using the list',
    );
    // A theme the first form uses; a subaccount holding a copy of the form and of the theme, the one on the other.
    const theme = await created(
      a.post('/themes', { name: `Theme ${MARK}`, customCss: `.fw-title::after { content: "${MARK}" }` }),
      'create theme',
    );
    await ok(a.put(`/forms/${form.id}`, { themeId: theme.id }), 'give the form the theme');
    const sub = await created(
      a.post('/subaccount', { name: `Sub ${MARK}`, email: `sub-${MARK}@example.com` }),
      'create subaccount',
    );
    const subForm = await created(a.post(`/subaccount/${sub.id}/form/${form.id}/copy`), 'copy form into subaccount');
    const subTheme = (
      await created(a.post(`/subaccount/${sub.id}/theme/${theme.id}/copy`), 'copy theme into subaccount')
    ).themeId;
    await ok(a.put(`/subaccount/${sub.id}/forms/${subForm.id}/theme`, { themeId: subTheme }), 'assign theme');
    Object.assign(aIds, {
      themeId: [theme.id],
      subaccountId: [sub.id],
      subFormId: [subForm.id],
      subThemeId: [subTheme],
    });
    // A portal with the first form and a user. Its user's id is not among userId's fixtures (account
    // users): the portal routes' {userId} answers 404 for an account user's id, which the matrices take.
    const portal = await created(a.post('/portal', { name: `Portal ${MARK}`, description: `About ${MARK}` }), 'portal');
    await ok(a.post(`/portal/${portal.id}/form`, { formId: form.id, required: true }), 'portal form');
    await ok(
      a.post(`/portal/${portal.id}/user`, { email: `portal-${MARK}@example.com`, name: `P ${MARK}` }),
      'portal user',
    );
    Object.assign(aIds, {
      portalId: [portal.id],
      smartListId: [smartList.id],
      optionId: [listOption.id],
      emailFieldId: [emailField.id],
      confirmationId: [confirmation.id],
      notificationId: [notification.id],
      messageId: [await logMessage(a, form.id, submission.id, `New ${MARK}`)],
      userId: [member.id],
      tokenId: [memberToken.id, ownToken.id],
      clientId: [client.id],
      formId: [form.id, second.id, gone.id],
      fieldId: [fileField.id, select.id, withLogic.id],
      folderId: [folder.id, subfolder.id],
      submissionId: [submission.id, secondSubmission.id, goneSubmission.id],
      webhookId: [webhook.id],
      integrationId: [integration.id],
      partialSubmissionId: [(await savePartialOf(app, a, form.id)).id],
    });

    // B: not empty, so that "not found" cannot come from an empty account.
    const bFolder = await ok(b.post('/folders', { name: 'B folder' }), 'create B folder');
    const bForm = await ok(
      b.post('/forms', {
        name: 'B form',
        folder: bFolder.id,
        fields: [
          { type: 'text', label: 'B field' },
          { type: 'email', label: 'B email' },
        ],
      }),
      'create B form',
    );
    const bWebhook = await ok(b.post(`/form/${bForm.id}/webhook`, { url: 'http://localhost:9/b' }), 'create B webhook');
    const bIntegration = await created(
      b.post(`/forms/${bForm.id}/integrations/docmerge`, {
        template: { filename: 'b.docx', content: MATRIX_TEMPLATE },
      }),
      'create B integration',
    );
    const bSubmission = await ok(
      b.post(`/forms/${bForm.id}/submissions`, { fields: [{ id: bForm.fields[0].id, value: 'B note' }] }),
      'create B submission',
    );
    const bMember = await ok(
      b.post('/users', {
        email: `b-member-${randomBytes(4).toString('hex')}@example.com`,
        name: 'B member',
        role: 'member',
      }),
      'create B member',
    );
    const bClient = await ok(
      b.post('/oauth-clients', { name: 'B app', redirectUris: ['https://example.com/b'] }),
      'create B client',
    );
    const bToken = await ok(b.post(`/users/${bMember.id}/tokens`, { name: 'B member token' }), 'create B member token');
    const bConfirmation = await created(
      b.post(`/forms/${bForm.id}/confirmations`, {
        subject: 'B thanks',
        message: 'B',
        recipientField: bForm.fields[1].id,
      }),
      'create B confirmation',
    );
    const bNotification = await created(
      b.post(`/forms/${bForm.id}/notifications`, { subject: 'B new', message: 'B', recipients: ['b@example.com'] }),
      'create B notification',
    );
    const bList = await created(b.post('/smartlists', { name: 'B list' }), 'create B list');
    const bOption = await created(b.post(`/smartlists/${bList.id}/options`, { label: 'B option' }), 'create B option');
    const bTheme = await created(b.post('/themes', { name: 'B theme' }), 'create B theme');
    const bSub = await created(b.post('/subaccount', { name: 'B sub', email: 'b-sub@example.com' }), 'create B sub');
    const bSubForm = await created(b.post(`/subaccount/${bSub.id}/form/${bForm.id}/copy`), 'copy B form');
    const bSubTheme = (await created(b.post(`/subaccount/${bSub.id}/theme/${bTheme.id}/copy`), 'copy B theme')).themeId;
    Object.assign(bIds, {
      themeId: bTheme.id,
      subaccountId: bSub.id,
      subFormId: bSubForm.id,
      subThemeId: bSubTheme,
    });
    const bPortal = await created(b.post('/portal', { name: 'B portal' }), 'create B portal');
    await ok(b.post(`/portal/${bPortal.id}/form`, { formId: bForm.id }), 'B portal form');
    await ok(b.post(`/portal/${bPortal.id}/user`, { email: 'b-portal@example.com', name: 'B user' }), 'B portal user');
    Object.assign(bIds, {
      portalId: bPortal.id,
      smartListId: bList.id,
      optionId: bOption.id,
      emailFieldId: bForm.fields[1].id,
      confirmationId: bConfirmation.id,
      notificationId: bNotification.id,
      messageId: await logMessage(b, bForm.id, bSubmission.id, 'B new'),
      tokenId: bToken.id,
      formId: bForm.id,
      fieldId: bForm.fields[0].id,
      folderId: bFolder.id,
      submissionId: bSubmission.id,
      partialSubmissionId: (await savePartialOf(app, b, bForm.id)).id,
      userId: bMember.id,
      clientId: bClient.id,
      webhookId: bWebhook.id,
      integrationId: bIntegration.id,
    });
    // One logged (refused) attempt for each webhook.
    await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
    const deliveryOf = async (acc: TestAccount, webhookId: number): Promise<number> => {
      const log = await ok(acc.get(`/webhook/${webhookId}/deliveries`), 'list deliveries');
      assert.equal(log.deliveries.length, 1, JSON.stringify(log));
      return log.deliveries[0].id;
    };
    aIds.deliveryId = [await deliveryOf(a, webhook.id)];
    bIds.deliveryId = await deliveryOf(b, bWebhook.id);
    // The document each integration made.
    const documentOf = async (acc: TestAccount, submissionId: number): Promise<number> => {
      const record = await ok(acc.get(`/submissions/${submissionId}`), 'read submission');
      assert.equal(record.documents.length, 1, JSON.stringify(record.documents));
      return record.documents[0].id;
    };
    aIds.documentId = [await documentOf(a, submission.id)];
    bIds.documentId = await documentOf(b, bSubmission.id);

    // A revoked and an expired token of A's; each worked before.
    const extra = await createPersonalToken(app.server.ctx, a.userId, 'to revoke');
    await ok(app.request('GET', `${API_PREFIX}/forms`, { token: extra.token }), 'extra token works');
    assert.equal(await revokeToken(db, extra.tokenId, Date.now()), true);
    revokedToken = extra.token;
    expiredToken = newToken(PAT_PREFIX);
    const now = Date.now();
    await insertToken(
      db,
      {
        accountId: a.accountId,
        userId: a.userId,
        hash: hashToken(expiredToken),
        kind: 'pat',
        name: 'expired',
        expiresAt: now - 60_000,
      },
      now - 120_000,
    );

    baselineA = await snapshot(a);
    baselineB = await snapshot(b);
  });
  after(() => app.close());

  describe('route table', () => {
    it(`lists at least ${MIN_OPERATIONS} operations`, () => {
      assert.ok(
        operations.length >= MIN_OPERATIONS,
        `only ${operations.length} operations in the OpenAPI document: ${operations.map((o) => o.key).join(', ')}`,
      );
      for (const op of operations) assert.ok(op.path.startsWith('/'), op.key);
    });

    it('has a fixture id for every path parameter', () => {
      const missing = operations.flatMap((op) =>
        op.pathParams
          .filter((p) => !aIds[kindOf(op, p)] || bIds[kindOf(op, p)] === undefined)
          .map((p) => `{${p}} of ${op.key}`),
      );
      assert.deepEqual(missing, [], `extend the fixture of test/route-matrix.test.ts for: ${missing.join(', ')}`);
    });

    it('knows what every id-shaped body and query property refers to', () => {
      const unknown = operations.flatMap((op) =>
        [
          ...bodyIdProperties(op).map((p) => ({ ...p, in: 'body' })),
          ...queryIdProperties(op).map((p) => ({ ...p, in: 'query' })),
        ]
          .filter((p) => !p.kind || !aIds[p.kind])
          .map((p) => `${p.in}.${p.name} of ${op.key}`),
      );
      assert.deepEqual(unknown, [], `add to ID_PROPERTIES in test/route-matrix.test.ts: ${unknown.join(', ')}`);
    });

    it('has a value for every required query parameter, and no stale ones', () => {
      const missing = operations.flatMap((op) =>
        op.query.filter((q) => q.required && !REQUIRED_QUERIES[op.key]?.[q.name]).map((q) => `${q.name} of ${op.key}`),
      );
      assert.deepEqual(missing, [], `add to REQUIRED_QUERIES in test/route-matrix.test.ts: ${missing.join(', ')}`);
      const stale = Object.entries(REQUIRED_QUERIES).flatMap(([key, params]) =>
        Object.keys(params)
          .filter(
            (name) => !operations.some((op) => op.key === key && op.query.some((q) => q.name === name && q.required)),
          )
          .map((name) => `${name} of ${key}`),
      );
      assert.deepEqual(
        stale,
        [],
        `REQUIRED_QUERIES entries that match no required query parameter: ${stale.join(', ')}`,
      );
    });

    it('has a valid body for every operation that takes one, and no stale ones', () => {
      const withBody = operations.filter((o) => o.body);
      const missing = withBody.filter((o) => !VALID_BODIES[o.key]).map((o) => o.key);
      assert.deepEqual(missing, [], `add to VALID_BODIES in test/support/route-bodies.ts: ${missing.join(', ')}`);
      const stale = Object.keys(VALID_BODIES).filter((k) => !withBody.some((o) => o.key === k));
      assert.deepEqual(stale, [], `VALID_BODIES entries that match no operation with a body: ${stale.join(', ')}`);
      for (const op of withBody) {
        const validate = bodyValidators.get(op.key)!;
        assert.ok(
          validate(validBody(op, first(aIds))),
          `the valid body of ${op.key} does not match its schema: ${JSON.stringify(validate.errors)}`,
        );
      }
    });
  });

  describe('authentication', () => {
    const variants: { name: string; headers: Record<string, string>; code: string }[] = [
      { name: 'no Authorization header', headers: {}, code: 'token_missing' },
      { name: 'Bearer nope', headers: { authorization: 'Bearer nope' }, code: 'token_malformed' },
      { name: 'Basic abc', headers: { authorization: 'Basic abc' }, code: 'token_malformed' },
      { name: 'empty Bearer', headers: { authorization: 'Bearer ' }, code: 'token_malformed' },
    ];
    const tokenVariants = (): { name: string; token: string }[] => [
      { name: 'unknown token', token: unknownToken },
      { name: 'revoked token', token: revokedToken },
      { name: 'expired token', token: expiredToken },
    ];

    for (const op of operations) {
      it(`${op.key} answers 401 without a live token`, async () => {
        const url = `${base(op)}${fillPath(op, first(aIds))}`;
        const body = validBody(op, first(aIds));
        // RFC 6750 3: the answer names the scheme, and what was wrong with a token sent.
        const challenge = (code: string) =>
          code === 'token_missing'
            ? 'Bearer realm="formwork"'
            : `Bearer realm="formwork", error="${code === 'token_invalid' ? 'invalid_token' : 'invalid_request'}"`;
        for (const v of variants) {
          const res = await call(op.method, url, { headers: v.headers, body }, v.name);
          assertError(res, 401, `${op.key} with ${v.name}`, v.code);
          assert.equal(res.headers.get('www-authenticate'), challenge(v.code), `${op.key} with ${v.name}`);
        }
        for (const v of tokenVariants()) {
          const res = await call(op.method, url, { token: v.token, body }, v.name);
          assertError(res, 401, `${op.key} with an ${v.name}`, 'token_invalid');
          assert.equal(res.headers.get('www-authenticate'), challenge('token_invalid'), `${op.key} with an ${v.name}`);
        }
        // Authentication comes first: bad input says nothing to a caller without a token.
        const badUrl = `${base(op)}${fillPath(op, {}, Object.fromEntries(op.pathParams.map((p) => [p, 'abc'])))}`;
        const res = await call(op.method, `${badUrl}?bogus=1`, op.body ? { raw: '{bad' } : {}, 'no token, bad input');
        assertError(res, 401, `${op.key} with no token and bad input`, 'token_missing');
      });
    }

    it('changed nothing', assertUnchanged);
  });

  describe('cross-account', () => {
    for (const op of operations) {
      it(`${op.key} with A's ids answers 404 to B`, async (t) => {
        let checked = 0;
        const expect404 = async (ids: Ids, query: string, body: unknown, what: string) => {
          const url = `${base(op)}${fillPath(op, ids)}${withQuery(op, query)}`;
          const res = await call(op.method, url, { token: b.token, body }, what);
          assertError(res, 404, `${op.key} by B ${what} (${url})`);
          assert.ok(!res.text.includes(MARK), `${op.key} by B ${what} shows A's data`);
          checked++;
        };

        // A's ids in the path, alone or mixed with B's own.
        if (op.pathParams.length > 0) {
          for (const ids of crossPathVariants(op))
            await expect404(ids, '', validBody(op, bIds), `path ${JSON.stringify(ids)}`);
        }
        // A's ids in an id-valued query or body property, on B's own resources.
        for (const q of queryIdProperties(op)) {
          for (const id of aIds[q.kind!] ?? [])
            await expect404(bIds, `?${q.name}=${id}`, validBody(op, bIds), `query ${q.name}=${id}`);
        }
        for (const p of bodyIdProperties(op)) {
          for (const id of aIds[p.kind!] ?? [])
            await expect404(bIds, '', { ...validBody(op, bIds), [p.name]: id }, `body ${p.name}=${id}`);
        }
        // Listings take no ids: B sees only its own.
        if (op.method === 'GET' && op.pathParams.length === 0) {
          const flags = op.query.filter(
            (q) => acceptedTypes(q.schema) !== 'any' && (acceptedTypes(q.schema) as Set<string>).has('boolean'),
          );
          for (const query of ['', ...flags.map((f) => `?${f.name}=true`)]) {
            const res = await call(
              'GET',
              `${base(op)}${op.path}${withQuery(op, query)}`,
              { token: b.token },
              'B lists',
            );
            assert.equal(res.status, 200, `${op.key}${query} by B: ${res.text.slice(0, 300)}`);
            assert.ok(!res.text.includes(MARK), `${op.key}${query} by B shows A's data`);
            checked++;
          }
        }
        if (checked === 0) t.diagnostic(`${op.key} takes no account-scoped ids; nothing to cross`);
      });
    }

    it("changed nothing of A's or B's", assertUnchanged);
  });

  describe('bad input', () => {
    for (const op of operations) {
      const ids = () => first(aIds);
      const url = () => `${base(op)}${fillPath(op, ids())}`;

      if (op.pathParams.length > 0) {
        it(`${op.key} rejects bad path ids`, async () => {
          for (const param of op.pathParams) {
            for (const bad of [...BAD_PATH_IDS, ...MISSPELT_NUMBERS]) {
              const path = `${base(op)}${fillPath(op, ids(), { [param]: bad })}`;
              const res = await call(
                op.method,
                path,
                { token: a.token, body: validBody(op, ids()) },
                `${param}=${bad}`,
              );
              assertError(res, 400, `${op.key} with ${param}=${bad}`, 'validation_failed');
              assertDetail(res, `path.${param}`, `${op.key} with ${param}=${bad}`);
            }
          }
        });
      }

      const idInputs = [
        ...bodyIdProperties(op).map((p) => ({ ...p, in: 'body' })),
        ...queryIdProperties(op).map((p) => ({ ...p, in: 'query' })),
      ];
      if (op.pathParams.length > 0 || idInputs.length > 0) {
        it(`${op.key} answers 404 for the largest id, which exists nowhere`, async () => {
          const body = validBody(op, ids());
          const expect404 = async (path: string, query: string, sent: unknown, what: string) => {
            const res = await call(
              op.method,
              `${base(op)}${path}${withQuery(op, query)}`,
              { token: a.token, body: sent },
              what,
            );
            assertError(res, 404, `${op.key} with ${what}`);
          };
          for (const param of op.pathParams)
            await expect404(
              fillPath(op, ids(), { [param]: nowhere(op, param) }),
              '',
              body,
              `${param}=${nowhere(op, param)}`,
            );
          for (const p of idInputs) {
            if (p.in === 'query')
              await expect404(fillPath(op, ids()), `?${p.name}=${MAX_ID}`, body, `query ${p.name}=${MAX_ID}`);
            else await expect404(fillPath(op, ids()), '', { ...body, [p.name]: MAX_ID }, `body ${p.name}=${MAX_ID}`);
          }
        });
      }

      if (op.body && !isV2(op)) {
        it(`${op.key} rejects bodies that are not a valid JSON object`, async () => {
          const valid = JSON.stringify(validBody(op, ids()));
          const cases: {
            what: string;
            raw: string;
            code: string;
            status?: number;
            headers?: Record<string, string>;
          }[] = [
            { what: 'malformed JSON', raw: '{bad', code: 'invalid_json' },
            { what: 'truncated JSON', raw: valid.slice(0, -1), code: 'invalid_json' },
            { what: 'a __proto__ key', raw: `{"__proto__":{"admin":true},${valid.slice(1)}`, code: 'invalid_json' },
            {
              what: 'a constructor.prototype key',
              raw: `{"constructor":{"prototype":{"admin":true}},${valid.slice(1)}`,
              code: 'invalid_json',
            },
            { what: 'an empty body', raw: '', code: 'validation_failed' },
            { what: 'a JSON array', raw: `[${valid}]`, code: 'validation_failed' },
            { what: 'a JSON string', raw: '"hello"', code: 'validation_failed' },
            { what: 'JSON null', raw: 'null', code: 'validation_failed' },
            { what: 'a JSON number', raw: '42', code: 'validation_failed' },
            { what: 'JSON true', raw: 'true', code: 'validation_failed' },
            {
              what: 'a text/plain body',
              raw: valid,
              code: 'unsupported_media_type',
              status: 415,
              headers: { 'content-type': 'text/plain' },
            },
          ];
          for (const c of cases) {
            const res = await call(op.method, url(), { token: a.token, raw: c.raw, headers: c.headers }, c.what);
            assertError(res, c.status ?? 400, `${op.key} with ${c.what}`, c.code);
          }
        });

        it(`${op.key} rejects unknown and wrongly typed properties`, async () => {
          const valid = validBody(op, ids())!;
          const validate = bodyValidators.get(op.key)!;
          const send = async (body: unknown, what: string, property: string) => {
            assert.equal(validate(body), false, `generator bug: ${what} is valid for ${op.key}`);
            const res = await call(op.method, url(), { token: a.token, body }, what);
            assertError(res, 400, `${op.key} with ${what}`, 'validation_failed');
            assertDetail(res, property, `${op.key} with ${what}`);
          };
          await send({ ...valid, surprise: 1 }, 'an unknown property', 'body.surprise');
          const candidates: [string, unknown][] = [
            ['a number', 12345],
            ['a fractional number', 1.5],
            ['a string', 'wrong'],
            ['a boolean', true],
            ['an object', {}],
            ['an array', []],
            ['null', null],
          ];
          for (const [name, schema] of Object.entries((op.body!.properties ?? {}) as Record<string, Schema>)) {
            const types = acceptedTypes(schema);
            if (types === 'any') continue;
            let sent = 0;
            for (const [label, value] of candidates) {
              if (accepts(types, value)) continue;
              await send({ ...valid, [name]: value }, `${label} as ${name}`, `body.${name}`);
              sent++;
            }
            assert.ok(sent > 0, `${op.key}: no wrong type found for ${name}`);
          }
        });

        const strings = boundedStrings(op.body);
        if (strings.length > 0) {
          it(`${op.key} rejects over-long strings`, async () => {
            const valid = validBody(op, ids())!;
            const validate = bodyValidators.get(op.key)!;
            for (const s of strings) {
              const property = `body.${s.path.join('.')}`;
              for (const length of new Set([s.maxLength + 1, Math.max(s.maxLength + 1, 100_001)])) {
                const body = setAt(valid, s.path, 'x'.repeat(length));
                if (validate(body)) continue; // another branch of a union takes it
                const res = await call(op.method, url(), { token: a.token, body }, `${property} of ${length}`);
                assertError(res, 400, `${op.key} with ${length} characters in ${property}`, 'validation_failed');
                assertDetail(res, property, `${op.key} with ${length} characters in ${property}`);
              }
            }
          });
        }
      }

      if (!op.takesBody && ['POST', 'PUT', 'PATCH', 'DELETE'].includes(op.method) && !isV2(op)) {
        it(`${op.key} refuses a body, as it takes none`, async () => {
          const res = await call(op.method, url(), { token: a.token, body: { bogus: 1 } }, 'a body');
          assertError(res, 400, `${op.key} with a body`, 'validation_failed');
          assertDetail(res, 'body.bogus', `${op.key} with a body`);
        });
      }

      if (op.query.length > 0 && !isV2(op)) {
        it(`${op.key} rejects unknown query values`, async () => {
          const body = validBody(op, ids());
          const send = async (query: string, what: string, property: string) => {
            const res = await call(op.method, `${url()}${withQuery(op, query)}`, { token: a.token, body }, what);
            assertError(res, 400, `${op.key} with ${what}`, 'validation_failed');
            assertDetail(res, property, `${op.key} with ${what}`);
          };
          await send('bogus=1', 'an unknown query parameter', 'query.bogus');
          for (const q of op.query) {
            const types = acceptedTypes(q.schema);
            const values = new Set<string>();
            if (Array.isArray(q.schema.enum)) values.add('sideways');
            if (types !== 'any' && types.has('boolean')) ['maybe', 'yes', '2'].forEach((v) => values.add(v));
            if (types !== 'any' && types.has('integer')) {
              ['-5', 'abc', '1.5', '', '1e400'].forEach((v) => values.add(v));
              if (typeof q.schema.maximum === 'number') values.add(String(q.schema.maximum + 1));
            }
            if (typeof q.schema.maxLength === 'number') values.add('x'.repeat(q.schema.maxLength + 1));
            const validate = queryAjv.compile({ type: 'object', properties: { [q.name]: q.schema } });
            for (const v of values) {
              if (validate({ [q.name]: v })) continue; // coerced into something valid
              await send(`${q.name}=${encodeURIComponent(v)}`, `${q.name}=${v.slice(0, 20)}`, `query.${q.name}`);
            }
            // The same parameter twice is not one value.
            const pair = types !== 'any' && types.has('boolean') ? ['true', 'false'] : ['1', '2'];
            if (!validate({ [q.name]: [...pair] }))
              await send(`${q.name}=${pair[0]}&${q.name}=${pair[1]}`, `${q.name} twice`, `query.${q.name}`);
            // Numbers are written one way; ajv's coercion alone would take all of these.
            if (types !== 'any' && (types.has('integer') || types.has('number')) && !types.has('string')) {
              for (const v of MISSPELT_NUMBERS)
                await send(`${q.name}=${encodeURIComponent(v)}`, `${q.name}=${JSON.stringify(v)}`, `query.${q.name}`);
            }
          }
        });
      }

      it(`${op.key} refuses NUL, lone surrogates and bytes that are not UTF-8 in every input`, async () => {
        const body = validBody(op, ids());
        const refused = async (path: string, options: RequestOptions, what: string, property: string) => {
          const res = await call(op.method, path, { token: a.token, ...options }, what);
          assertError(res, 400, `${op.key} with ${what}`, 'invalid_characters');
          assertDetail(res, property, `${op.key} with ${what}`);
        };
        for (const param of op.pathParams) {
          await refused(
            `${base(op)}${fillPath(op, ids(), { [param]: '\u0000' })}`,
            { body },
            `NUL as ${param}`,
            `path.${param}`,
          );
        }
        for (const q of op.query) {
          await refused(`${url()}${withQuery(op, `${q.name}=1%00`)}`, { body }, `NUL in ${q.name}`, `query.${q.name}`);
          for (const escape of NOT_UTF8_ESCAPES)
            await refused(
              `${url()}${withQuery(op, `${q.name}=${escape}`)}`,
              { body },
              `${escape} in ${q.name}`,
              `query.${q.name}`,
            );
        }
        if (body) {
          const leaves = stringLeaves(body);
          assert.ok(leaves.length > 0, `${op.key}: its valid body has no string to spoil`);
          for (const leaf of leaves) {
            for (const bad of BAD_TEXT)
              await refused(
                url(),
                { body: leaf.set(bad) },
                `${JSON.stringify(bad)} at ${leaf.property}`,
                leaf.property,
              );
          }
          // Where the schema allows a string the valid body leaves out.
          for (const s of boundedStrings(op.body!)) {
            const property = `body.${s.path.join('.')}`;
            await refused(url(), { body: setAt(body, s.path, 'x\u0000') }, `NUL at ${property}`, property);
          }
          await refused(url(), { body: { ...body, ['na\u0000me']: 1 } }, 'a NUL in a property name', 'body');
          const json = JSON.stringify(body);
          // JSON.stringify escapes lone surrogates; a client may write the escape itself.
          await refused(
            url(),
            { raw: `${json.slice(0, -1)},"x":"a${String.raw`\udbff`}"}` },
            'a \\udbff escape',
            'body.x',
          );
          const bytes = Buffer.concat([
            Buffer.from(`${json.slice(0, -1)},"x":"`),
            Buffer.from([0xff, 0xc3]),
            Buffer.from('"}'),
          ]);
          const res = await fetch(`${app.url}${url()}`, {
            method: op.method,
            headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
            body: bytes,
          });
          requests++;
          const text = await res.text();
          const reply = { status: res.status, headers: res.headers, body: JSON.parse(text), text };
          assertError(reply, 400, `${op.key} with bytes that are not UTF-8`, 'invalid_characters');
          assertDetail(reply, 'body', `${op.key} with bytes that are not UTF-8`);
        }
      });
    }

    it("changed nothing of A's", assertUnchanged);
  });

  describe('legacy /api/v2 aliases', () => {
    const legacy = (op: Operation, ids: Ids, json: boolean, overrides: Ids = {}) =>
      `/api/v2${fillPath(op, ids, overrides)}${json ? '.json' : ''}`;

    it('describes the same operations at /api/v2/openapi.json, with the /api/v2 server', async () => {
      const res = await call('GET', '/api/v2/openapi.json', {}, 'v2 document');
      assert.equal(res.status, 200, res.text.slice(0, 300));
      assert.deepEqual(res.body.servers, [{ url: `${app.config.publicUrl}/api/v2` }]);
      assert.deepEqual({ ...res.body, servers: doc.servers }, doc);
    });

    // v2025 operations whose path v2 has too (/form/{formId}/webhook, /portal/{portalId}, …) answer there in v2's manner.
    const aliased = operations.filter((o) => !isV2(o) && !isV2Path(o.path.replace(/\{\w+\}/g, '1')));
    for (const op of aliased.filter((o) => o.method === 'GET')) {
      it(`${op.key} reads the same under /api/v2, with and without .json`, async () => {
        const ids = first(aIds);
        const flags = op.query.filter(
          (q) => acceptedTypes(q.schema) !== 'any' && (acceptedTypes(q.schema) as Set<string>).has('boolean'),
        );
        for (const query of ['', ...flags.map((f) => `?${f.name}=true`)]) {
          const current = await call(
            'GET',
            `${base(op)}${fillPath(op, ids)}${withQuery(op, query)}`,
            { token: a.token },
            'v2025',
          );
          assert.equal(current.status, 200, `${op.key}${query}: ${current.text.slice(0, 300)}`);
          for (const json of [true, false]) {
            const url = `${legacy(op, ids, json)}${withQuery(op, query)}`;
            const old = await call('GET', url, { token: a.token }, 'legacy');
            assert.equal(old.status, 200, `${url}: ${old.text.slice(0, 300)}`);
            assert.deepEqual(old.body, current.body, url);
          }
        }
      });
    }

    for (const op of aliased) {
      it(`${op.key} under /api/v2 checks tokens, accounts and ids too`, async () => {
        const ids = first(aIds);
        const body = validBody(op, ids);
        const url = `${legacy(op, ids, true)}${withQuery(op)}`;
        assertError(
          await call(op.method, url, { body }, 'legacy, no token'),
          401,
          `${url} without a token`,
          'token_missing',
        );
        assertError(
          await call(op.method, url, { token: revokedToken, body }, 'legacy, revoked'),
          401,
          `${url} with a revoked token`,
          'token_invalid',
        );
        if (op.pathParams.length > 0) {
          const res = await call(op.method, url, { token: b.token, body: validBody(op, bIds) }, 'legacy, B');
          assertError(res, 404, `${url} by B`);
          assert.ok(!res.text.includes(MARK), `${url} by B shows A's data`);
          for (const param of op.pathParams) {
            const bad = legacy(op, ids, true, { [param]: 'abc' });
            assertError(
              await call(op.method, bad, { token: a.token, body }, 'legacy, bad id'),
              400,
              bad,
              'validation_failed',
            );
          }
        }
        if (op.body) {
          assertError(
            await call(op.method, url, { token: a.token, raw: '{bad' }, 'legacy, bad JSON'),
            400,
            `${url} with malformed JSON`,
            'invalid_json',
          );
          const extra = { ...body, surprise: 1 };
          assertError(
            await call(op.method, url, { token: a.token, body: extra }, 'legacy, unknown property'),
            400,
            `${url} with an unknown property`,
            'validation_failed',
          );
        }
      });
    }

    it("changed nothing of A's", assertUnchanged);
  });
});
