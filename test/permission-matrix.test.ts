/**
 * The permission matrix, generated from the route table: every operation of the OpenAPI
 * document declares its access (x-formwork-access: a scope, perhaps the admin role, perhaps
 * a level on the form it addresses), and test/support/access-rules.json says, apart from the
 * code, what each operation's rule should be: the declarations must match it, so that a rule
 * declared wrongly in a route fails here instead of being taken as the truth. Every operation
 * is then called by the owner, an admin, a member at each level (and at none), and by tokens
 * holding a single scope; what each caller gets, 200 or 403, follows from the expected rule;
 * each allowed call runs on fresh resources of its own, so that deletes and edits do not
 * disturb the next case. Calls on another account's ids (404) are the cross-account matrix
 * of route-matrix.test.ts.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { API_PREFIX } from '../src/app.js';
import { hashToken, newToken } from '../src/crypto/secrets.js';
import { SCOPES, type RouteAccess, type Scope } from '../src/http/access.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker } from '../src/jobs/worker.js';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { insertMail } from '../src/modules/emails/repository.js';
import { LEVELS, levelAtLeast, type Level } from '../src/modules/permissions/levels.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { MATRIX_TEMPLATE, VALID_BODIES } from './support/route-bodies.js';
import { savePartialOf } from './support/partials.js';

interface Operation {
  key: string;
  operationId: string | undefined;
  method: string;
  path: string;
  /** What the route declares (x-formwork-access). */
  access: RouteAccess;
  /** What the table says it should be; undefined when the table lacks the operation. */
  expected: RouteAccess | undefined;
  requiredQuery: string[];
  /** The status of success that the operation documents (200, or 201 for some creates). */
  success: number;
}

const ACCESS_RULES = 'test/support/access-rules.json';
/** "METHOD /path" → the operation's operationId and its access rule, as it should be. */
const accessRules = JSON.parse(readFileSync(new URL('./support/access-rules.json', import.meta.url), 'utf8')) as Record<
  string,
  RouteAccess & { operationId: string }
>;

/** Values for required query parameters, from the fixture's ids. */
type Ids = Record<string, number | string>;
const QUERIES: Record<string, (ids: Ids) => string> = {
  search: () => 'anything',
  fieldId: (ids) => String(ids.fieldId),
};

/** Operations that need their resource in a particular state first. */
const DELETED_FORM = new Set(['POST /forms/{formId}/restore']);

interface Caller {
  name: string;
  token: string;
  role: 'owner' | 'admin' | 'member';
  /** A member's level on the forms it is given; null for none. */
  level?: Level | null;
  /** The user the token acts for. */
  userId?: number;
  /** Only this scope (OAuth-like token); undefined means every scope. */
  scope?: Scope;
}

let app: TestApp;
let owner: TestAccount;
const callers: Caller[] = [];
let operations: Operation[] = [];

function expected(op: Operation, caller: Caller): { status: number; code?: string } {
  // An operation missing from the table fails the table test; here it is held to its declaration.
  const rule = op.expected ?? op.access;
  if (caller.scope !== undefined && caller.scope !== rule.scope) return { status: 403, code: 'insufficient_scope' };
  if (caller.role !== 'member') return { status: 200 };
  if (rule.role === 'admin') return { status: 403, code: 'admin_required' };
  if (rule.level === undefined) return { status: 200 };
  if (!caller.level || !levelAtLeast(caller.level, rule.level))
    return { status: 403, code: 'form_permission_required' };
  return { status: 200 };
}

async function ok<T = any>(promise: Promise<{ status: number; body: T; text: string }>, what: string): Promise<T> {
  const res = await promise;
  assert.equal(res.status, 200, `${what}: ${res.status} ${res.text.slice(0, 300)}`);
  return res.body;
}

/**
 * Fresh resources for one call, made by the owner: a folder, a form in it with a select
 * and a file field and a submission holding a file, a member to manage with a level on the form, and an OAuth
 * client. The calling member gets its level on the new form.
 */
/**
 * A denied call changes nothing, and neither does a GET, so the callers denied one operation,
 * and all the callers of a GET, share one set of resources, every member given its level on
 * the form (a call wrongly allowed or wrongly refused still fails its own case). The other
 * allowed calls change what they address and get resources of their own. /tokens/{tokenId}
 * names the caller's own token, so those keep their own.
 */
const sharedFixtures = new Map<string, Promise<Ids>>();

function fixtureFor(op: Operation, caller: Caller, denied: boolean): Promise<Ids> {
  if ((!denied && op.method !== 'GET') || op.path.startsWith('/tokens/')) return fixture(op, caller, [caller]);
  let shared = sharedFixtures.get(op.key);
  if (!shared) {
    shared = fixture(op, caller, callers);
    sharedFixtures.set(op.key, shared);
  }
  return shared;
}

/**
 * The ids an operation names: in its path, in its required query and in the body it is sent
 * (read off by making the body from a recording stand-in).
 */
const namesOf = new Map<string, Set<string>>();
function idsNamed(op: Operation): Set<string> {
  let names = namesOf.get(op.key);
  if (!names) {
    const found = new Set([...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!));
    for (const name of op.requiredQuery) if (name === 'fieldId') found.add(name);
    const recorder = new Proxy({} as Ids, { get: (_, name) => (found.add(String(name)), 1) });
    VALID_BODIES[op.key]?.(recorder);
    names = found;
    namesOf.set(op.key, names);
  }
  return names;
}

/**
 * Fresh resources for one call on op, only those it names (a form always: the members' levels
 * are on it); each caller of levelled is given its level on the form.
 */
let fixturesMade = 0;
async function fixture(op: Operation, caller: Caller, levelled: Caller[]): Promise<Ids> {
  fixturesMade++;
  const named = idsNamed(op);
  const folder = named.has('folderId')
    ? await ok(owner.post('/folders', { name: 'Matrix folder' }), 'folder')
    : undefined;
  const form = await ok(
    owner.post('/forms', {
      name: 'Matrix form',
      ...(folder && { folder: folder.id }),
      fields: [
        {
          type: 'select',
          label: 'Topic',
          options: [
            { label: 'Sales', value: 'sales' },
            { label: 'Support', value: 'support' },
          ],
        },
        { type: 'file', label: 'Attachment' },
        { type: 'email', label: 'Email' },
      ],
    }),
    'form',
  );
  const [select, field, emailField] = form.fields;
  // The mail log's messages belong to a submission.
  const submission =
    named.has('submissionId') || named.has('messageId')
      ? await ok(
          owner.post(`/forms/${form.id}/submissions`, {
            fields: [
              { id: select.id, value: 'sales' },
              { id: field.id, value: 'a.txt;aGVsbG8=' },
            ],
          }),
          'submission',
        )
      : undefined;
  const target = named.has('userId') || named.has('tokenId') ? await targetUser(form.id) : undefined;
  const client = named.has('clientId')
    ? await ok(owner.post('/oauth-clients', { name: 'Matrix app', redirectUris: ['https://example.com/cb'] }), 'client')
    : undefined;
  for (const { level, userId } of levelled)
    if (level && userId) await ok(owner.put(`/users/${userId}/permissions/${form.id}`, { level }), 'caller level');
  if (DELETED_FORM.has(op.key)) await ok(owner.delete(`/forms/${form.id}`), 'delete form');
  const hooks: Record<string, number> = {};
  if (op.path.includes('{webhookId}')) {
    // A name of the loopback address, which this app refuses (WEBHOOK_ALLOW_PRIVATE is off):
    // a delivery fails at once, without the network, and is logged.
    const webhook = await ok(owner.post(`/form/${form.id}/webhook`, { url: 'http://localhost:9/matrix' }), 'webhook');
    hooks.webhookId = webhook.id;
    if (op.path.includes('{deliveryId}')) {
      await ok(owner.post(`/forms/${form.id}/submissions`, { fields: [{ id: select.id, value: 'support' }] }), 'event');
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      const log = await ok(owner.get(`/webhook/${webhook.id}/deliveries`), 'deliveries');
      hooks.deliveryId = log.deliveries[0].id;
    }
  }
  if (op.path.includes('{integrationId}') || op.path.includes('{documentId}')) {
    const integration = await owner.post(`/forms/${form.id}/integrations/docmerge`, {
      template: { filename: 'matrix.docx', content: MATRIX_TEMPLATE },
    });
    assert.equal(integration.status, 201, `integration: ${integration.text}`);
    hooks.integrationId = integration.body.id;
    if (op.path.includes('{documentId}')) {
      // The fixture's submission was made before the integration: the document is made from a new one.
      const made = await ok(
        owner.post(`/forms/${form.id}/submissions`, { fields: [{ id: select.id, value: 'support' }] }),
        'submission with a document',
      );
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      const record = await ok(owner.get(`/submissions/${made.id}`), 'its record');
      hooks.documentId = record.documents[0].id;
      hooks.submissionId = made.id;
    }
  }
  // /tokens/{tokenId} names one of the caller's own tokens; /users/{userId}/tokens/{tokenId} one of the target's.
  const tokenOf = op.path.startsWith('/tokens/') ? caller.userId! : target?.id;
  const token =
    named.has('tokenId') && tokenOf !== undefined
      ? await createPersonalToken(app.server.ctx, tokenOf, 'Matrix token')
      : undefined;
  const emails = await emailFixture(op, form.id, emailField.id, submission?.id);
  const partial = op.path.includes('{partialSubmissionId}') ? await savePartialOf(app, owner, form.id) : undefined;
  const lists = op.path.includes('{smartListId}') ? await smartListFixture() : {};
  const themes =
    op.path.includes('{themeId}') || op.path.includes('{subaccountId}') ? await themeFixture(op, form.id) : {};
  const portal = op.path.includes('{portalId}') ? await portalFixture(op, form.id) : {};
  return {
    ...emails,
    ...lists,
    ...(partial && { partialSubmissionId: partial.id }),
    emailFieldId: emailField.id,
    formId: form.id,
    fieldId: field.id,
    ...(folder && { folderId: folder.id }),
    ...(submission && { submissionId: submission.id }),
    ...(target && { userId: target.id }),
    ...(client && { clientId: client.id }),
    ...(token && { tokenId: token.tokenId }),
    ...hooks,
    // Last: under /subaccount/{subaccountId}/forms/ and /themes/, formId and themeId are the subaccount's.
    ...themes,
    // Last: a portal route's {userId} is the portal user's.
    ...portal,
  };
}

/** A member to manage, with the view level on the form. */
async function targetUser(formId: number): Promise<{ id: number }> {
  const target = await ok(
    owner.post('/users', {
      email: `target-${randomBytes(5).toString('hex')}@example.com`,
      name: 'Target',
      role: 'member',
    }),
    'user',
  );
  await ok(owner.put(`/users/${target.id}/permissions/${formId}`, { level: 'view' }), 'target level');
  return target;
}

/**
 * A theme of the owner's (not the default, not locked) and, for the /subaccount operations, a
 * subaccount with a copy of the form and of the theme. Under /subaccount/{subaccountId}/themes/
 * the themeId is the subaccount's copy; under /subaccount/{subaccountId}/forms/ the formId is
 * the subaccount's copy of the form, and subThemeId the theme its body names.
 */
async function themeFixture(op: Operation, formId: number): Promise<Ids> {
  const theme = await owner.post('/themes', { name: 'Matrix theme' });
  assert.equal(theme.status, 201, theme.text);
  if (!op.path.startsWith('/subaccount/')) return { themeId: theme.body.id };
  const sub = await owner.post('/subaccount', {
    name: 'Matrix subaccount',
    email: `matrix-${randomBytes(5).toString('hex')}@example.com`,
  });
  assert.equal(sub.status, 201, sub.text);
  const subaccountId = sub.body.id as number;
  const subForm = await owner.post(`/subaccount/${subaccountId}/form/${formId}/copy`);
  assert.equal(subForm.status, 201, subForm.text);
  const subTheme = await owner.post(`/subaccount/${subaccountId}/theme/${theme.body.id}/copy`);
  assert.equal(subTheme.status, 201, subTheme.text);
  const subThemeId = subTheme.body.themeId as string;
  if (op.path.startsWith('/subaccount/{subaccountId}/themes/'))
    return { subaccountId, themeId: subThemeId, subThemeId };
  if (op.path.startsWith('/subaccount/{subaccountId}/forms/'))
    return { subaccountId, formId: subForm.body.id as number, subThemeId };
  return { subaccountId, themeId: theme.body.id, subThemeId };
}

/**
 * A portal for the operations that address one: with the fixture's form in it when the
 * operation addresses it (POST .../form adds it, so there it is not in yet), and a portal user.
 */
async function portalFixture(op: Operation, formId: number): Promise<Record<string, number>> {
  const portal = await owner.post('/portal', { name: 'Matrix portal' });
  assert.equal(portal.status, 201, portal.text);
  if (op.path.includes('/form/{formId}'))
    await ok(owner.post(`/portal/${portal.body.id}/form`, { formId }), 'portal form');
  const withUser = await ok(
    owner.post(`/portal/${portal.body.id}/user`, {
      email: `p-${randomBytes(5).toString('hex')}@example.com`,
      name: 'Matrix portal user',
    }),
    'portal user',
  );
  return { portalId: portal.body.id, userId: withUser.users[0].id };
}

/** A smart list (that uses images) with one option, no field using it, for the operations that address one. */
async function smartListFixture(): Promise<Ids> {
  const list = await owner.post('/smartlists', { name: 'Matrix list', useImages: true });
  assert.equal(list.status, 201, list.text);
  const option = await owner.post(`/smartlists/${list.body.id}/options`, { label: 'Matrix option' });
  assert.equal(option.status, 201, option.text);
  return { smartListId: list.body.id, optionId: option.body.id };
}

/** A confirmation, a notification and a message of the mail log, for the operations that address one. */
async function emailFixture(
  op: Operation,
  formId: number,
  emailFieldId: number,
  submissionId: number | undefined,
): Promise<Ids> {
  const ids: Ids = {};
  if (op.path.includes('{confirmationId}')) {
    const res = await owner.post(`/forms/${formId}/confirmations`, {
      subject: 'Thanks',
      message: 'Got it',
      recipientField: emailFieldId,
    });
    assert.equal(res.status, 201, res.text);
    ids.confirmationId = res.body.id;
  }
  if (op.path.includes('{notificationId}')) {
    const res = await owner.post(`/forms/${formId}/notifications`, {
      subject: 'New',
      message: 'New',
      recipients: ['team@example.com'],
    });
    assert.equal(res.status, 201, res.text);
    ids.notificationId = res.body.id;
  }
  if (op.path.includes('{messageId}')) {
    const jobId = ++mailJobs;
    await insertMail(app.server.ctx.db, {
      account_id: owner.accountId,
      form_id: formId,
      email_id: 1,
      submission_id: submissionId!,
      job_id: jobId,
      kind: 'notification',
      sender: 'formwork@forms.test',
      recipients: '["team@example.com"]',
      reply_to: null,
      subject: 'New',
      text_body: 'New',
      html_body: null,
      attachments: '[]',
      created_at: Date.now(),
    });
    const row = await app.server.ctx.db
      .selectFrom('mail_log')
      .select('id')
      .where('job_id', '=', jobId)
      .executeTakeFirstOrThrow();
    ids.messageId = row.id;
  }
  return ids;
}
let mailJobs = 1_000_000;

function urlOf(op: Operation, ids: Ids): string {
  const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const id = ids[name];
    if (id === undefined)
      throw new Error(`No fixture id for {${name}} of ${op.key}: extend fixture() in test/permission-matrix.test.ts`);
    return String(id);
  });
  const query = op.requiredQuery.map((name) => {
    const value = QUERIES[name];
    if (value === undefined)
      throw new Error(
        `No value for the required query parameter ${name} of ${op.key}: extend QUERIES in test/permission-matrix.test.ts`,
      );
    return `${name}=${encodeURIComponent(value(ids))}`;
  });
  // The v2 operations (docs/v2.md) are listed at their full /api/v2 paths.
  const prefix = op.path.startsWith('/api/v2/') ? '' : API_PREFIX;
  return `${prefix}${path}${query.length > 0 ? `?${query.join('&')}` : ''}`;
}

describe(`permission matrix (${dialectName})`, () => {
  before(async () => {
    app = await startTestApp();
    owner = await app.account();
    const doc = (await app.request('GET', `${API_PREFIX}/openapi.json`)).body as {
      paths: Record<string, Record<string, any>>;
    };
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (!['get', 'post', 'put', 'delete', 'patch'].includes(method)) continue;
        const parameters = (op.parameters ?? []) as {
          in: string;
          name: string;
          required?: boolean;
          schema: { default?: unknown };
        }[];
        const key = `${method.toUpperCase()} ${path}`;
        const { operationId: _id, ...rule } = accessRules[key] ?? { operationId: undefined };
        operations.push({
          key,
          operationId: op.operationId as string | undefined,
          method: method.toUpperCase(),
          path,
          access: op['x-formwork-access'] as RouteAccess,
          expected: key in accessRules ? (rule as RouteAccess) : undefined,
          requiredQuery: parameters
            .filter((p) => p.in === 'query' && p.required && p.schema.default === undefined)
            .map((p) => p.name),
          success: Number(Object.keys(op.responses ?? {}).find((s) => /^2\d\d$/.test(s)) ?? 200),
        });
      }
    }
    operations = operations.sort((x, y) => x.key.localeCompare(y.key));

    const db = app.server.db.kysely;
    callers.push({ name: 'owner', token: owner.token, role: 'owner', userId: owner.userId });
    const admin = await ok(
      owner.post('/users', {
        email: `admin-${randomBytes(5).toString('hex')}@example.com`,
        name: 'Admin',
        role: 'admin',
      }),
      'admin',
    );
    callers.push({
      name: 'admin',
      token: (await createPersonalToken(app.server.ctx, admin.id)).token,
      role: 'admin',
      userId: admin.id,
    });
    for (const level of [null, ...LEVELS]) {
      const member = await ok(
        owner.post('/users', {
          email: `member-${randomBytes(5).toString('hex')}@example.com`,
          name: `Member ${level}`,
          role: 'member',
        }),
        'member',
      );
      callers.push({
        name: `member with ${level ?? 'no'} level`,
        token: (await createPersonalToken(app.server.ctx, member.id)).token,
        role: 'member',
        level,
        userId: member.id,
      });
    }
    // Tokens of the owner's that hold one scope each, as OAuth grants do.
    for (const scope of SCOPES) {
      const token = newToken('fw_at_');
      await db
        .insertInto('access_tokens')
        .values({
          account_id: owner.accountId,
          user_id: owner.userId,
          token_hash: hashToken(token),
          kind: 'oauth',
          name: scope,
          created_at: Date.now(),
          expires_at: Date.now() + 3_600_000,
          scope,
        })
        .execute();
      callers.push({ name: `token with only ${scope}`, token, role: 'owner', scope, userId: owner.userId });
    }
  });
  after(() => app.close());

  it('finds every operation with a declared access, and enough of them', () => {
    assert.ok(operations.length >= 30, `only ${operations.length} operations`);
    for (const op of operations) {
      assert.ok(op.access && SCOPES.includes(op.access.scope), `${op.key} declares no access in the OpenAPI document`);
      if (op.access.level)
        assert.ok(
          op.path.includes(`{${op.access.formFrom}}`),
          `${op.key}: its level is taken from {${op.access.formFrom}}, which the path does not have`,
        );
    }
  });

  it(`declares on every operation the rule and the operationId that ${ACCESS_RULES} expects`, () => {
    const problems: string[] = [];
    for (const op of operations) {
      const name = `${op.key} (${op.operationId ?? 'no operationId'})`;
      const want = accessRules[op.key];
      if (!want) {
        problems.push(`${name} is missing from ${ACCESS_RULES}; it declares ${JSON.stringify(op.access)}`);
        continue;
      }
      if (want.operationId !== op.operationId)
        problems.push(
          `${op.key}: operationId ${JSON.stringify(op.operationId)}, but ${ACCESS_RULES} says ${want.operationId}`,
        );
      if (!isDeepStrictEqual(op.access, op.expected))
        problems.push(
          `${name} declares ${JSON.stringify(op.access)}, but ${ACCESS_RULES} expects ${JSON.stringify(op.expected)}`,
        );
    }
    const keys = new Set(operations.map((op) => op.key));
    for (const [key, want] of Object.entries(accessRules)) {
      if (!keys.has(key))
        problems.push(
          `${key} (${want.operationId}) is in ${ACCESS_RULES}, but the OpenAPI document has no such operation`,
        );
    }
    assert.deepEqual(problems, []);
  });

  it('gives every caller what the expected rules say, on every operation', async (t) => {
    const failures: string[] = [];
    let calls = 0;
    let denied = 0;
    for (const op of operations) {
      for (const caller of callers) {
        const want = expected(op, caller);
        const ids = await fixtureFor(op, caller, want.status === 403);
        const make = VALID_BODIES[op.key];
        const body = make ? make(ids) : undefined;
        const res = await app.request(op.method, urlOf(op, ids), { token: caller.token, body });
        calls++;
        if (want.status === 403) denied++;
        const got = res.status;
        const fine =
          want.status === 403
            ? got === 403 && res.body?.code === want.code && res.body?.status === 'error'
            : got === op.success;
        if (!fine)
          failures.push(
            `${op.key} by ${caller.name}: expected ${want.status === 200 ? op.success : want.status}${want.code ? ` ${want.code}` : ''}, got ${got} ${res.text.slice(0, 160)}`,
          );
      }
    }
    t.diagnostic(
      `${calls} calls, ${denied} expected 403, over ${operations.length} operations and ${callers.length} callers, on ${fixturesMade} sets of resources`,
    );
    assert.deepEqual(failures, []);
    // The matrix must exercise both outcomes for members at every level.
    assert.ok(denied > 0 && denied < calls);
  });

  it('lists to a member only the forms it holds a level on, and searches only those', async () => {
    const word = `w${randomBytes(4).toString('hex')}`;
    const mine = await ok(
      owner.post('/forms', { name: `Granted ${word}`, fields: [{ type: 'text', label: 'Note' }] }),
      'form',
    );
    const theirs = await ok(
      owner.post('/forms', { name: `Hidden ${word}`, fields: [{ type: 'text', label: 'Note' }] }),
      'form',
    );
    for (const f of [mine, theirs])
      await ok(
        owner.post(`/forms/${f.id}/submissions`, { fields: [{ id: f.fields[0].id, value: `${word} ${f.id}` }] }),
        'submission',
      );
    const member = await ok(
      owner.post('/users', { email: `lister-${word}@example.com`, name: 'Lister', role: 'member' }),
      'member',
    );
    await ok(owner.put(`/users/${member.id}/permissions/${mine.id}`, { level: 'view' }), 'level');
    const token = (await createPersonalToken(app.server.ctx, member.id)).token;

    const listed = await ok(app.request('GET', `${API_PREFIX}/forms?search=${word}`, { token }), 'member lists');
    assert.deepEqual(
      (listed.forms as { id: number }[]).map((f) => f.id),
      [mine.id],
    );
    assert.equal(listed.total, 1);
    assert.equal((await ok(owner.get(`/forms?search=${word}`), 'owner lists')).total, 2);

    const found = await ok(
      app.request('GET', `${API_PREFIX}/submissions?search=${word}`, { token }),
      'member searches',
    );
    assert.deepEqual(
      (found.submissions as { formId: number }[]).map((s) => s.formId),
      [mine.id],
    );
    assert.equal((await ok(owner.get(`/submissions?search=${word}`), 'owner searches')).total, 2);

    // Taking the level away hides the form again.
    await ok(owner.delete(`/users/${member.id}/permissions/${mine.id}`), 'revoke level');
    assert.equal(
      (await ok(app.request('GET', `${API_PREFIX}/forms?search=${word}`, { token }), 'member lists')).total,
      0,
    );
    assert.equal((await app.request('GET', `${API_PREFIX}/forms/${mine.id}`, { token })).status, 403);
  });

  it('gives a member who creates a form the full level on it', async () => {
    const member = callers.find((c) => c.role === 'member' && c.level === null)!;
    const form = await ok(
      app.request('POST', `${API_PREFIX}/forms`, { token: member.token, body: { name: 'Mine' } }),
      'member creates',
    );
    const granted = await ok(owner.get(`/users/${member.userId}/permissions`), 'permissions');
    assert.deepEqual(
      (granted.permissions as { formId: number; level: string }[])
        .filter((p) => p.formId === form.id)
        .map((p) => p.level),
      ['full'],
    );
    assert.equal((await app.request('DELETE', `${API_PREFIX}/forms/${form.id}`, { token: member.token })).status, 200);
  });
});
