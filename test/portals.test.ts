/**
 * Portals (issue 15, points 4 and 5): the API of spec section 4.7 with POST /portal added, the
 * avatar through the shared image checks, and the portal page: a sign-in link by email
 * (through a real SMTP server, or into the mail log), single use and expiring, signing in only
 * from the confirmation page it opens, in the same browser (against login CSRF), a session
 * cookie, the user's forms with whether they have submitted each, and submissions made on the
 * hosted page tied to the signed-in portal user. Cross-account 404s and member 403s of every
 * operation are in the route and permission matrices.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { drainBytes } from '../src/modules/images/part.js';
import { prunePortalSigninsJob } from '../src/modules/portals/jobs.js';
import { SESSION_TTL_MS } from '../src/modules/portals/session.js';
import { SIGNIN_LINK_TTL_MS } from '../src/modules/portals/signin-link.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker } from '../src/jobs/worker.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { startSmtpSink, type SmtpSink } from './support/smtp.js';

// A real 1×1 PNG.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);

function expectError(res: Reply, status: number, code: string): void {
  assert.equal(res.status, status, res.text.slice(0, 500));
  assert.equal(res.body.status, 'error');
  assert.equal(res.body.code, code, res.text.slice(0, 500));
}

function ok(res: Reply, status = 200): any {
  assert.equal(res.status, status, res.text.slice(0, 500));
  return res.body;
}

async function upload(app: TestApp, path: string, parts: [string, Buffer | string, string?][], token: string) {
  const form = new FormData();
  for (const [name, value, filename] of parts) {
    if (typeof value === 'string') form.append(name, value);
    else form.append(name, new Blob([value], { type: 'image/png' }), filename);
  }
  const res = await fetch(`${app.url}/api/v2025${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: form,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text } as Reply;
}

/** A request to a public page with a cookie jar of one cookie, never following redirects. */
async function page(
  app: TestApp,
  method: string,
  path: string,
  opts: { cookie?: string; form?: Record<string, string>; json?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.cookie) headers.cookie = opts.cookie;
  let body: string | undefined;
  if (opts.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(opts.form).toString();
  } else if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  }
  const res = await fetch(`${app.url}${path}`, { method, headers, body, redirect: 'manual' });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const pathOf = (url: string) => new URL(url).pathname;
const unescape = (s: string) =>
  s.replace(/&#(\d+);/g, (_, c: string) => String.fromCharCode(Number(c))).replace(/&amp;/g, '&');
/** What a browser sends with a post from one of the service's own pages. */
const SAME_ORIGIN = { 'sec-fetch-site': 'same-origin' };

describe(`portals (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;

  before(async () => {
    app = await startTestApp({ OPTION_IMAGE_MAX_BYTES: '4096' });
    a = await app.account();
    b = await app.account();
  });
  after(() => app.close());

  async function newForm(acc: TestAccount, name: string): Promise<any> {
    return ok(await acc.post('/forms', { name, fields: [{ type: 'text', label: 'Note' }] }));
  }

  it('creates, lists, reads, updates and deletes portals for good', async () => {
    const created = ok(await a.post('/portal', { name: 'Clients', description: 'For <our> clients' }), 201);
    assert.equal(created.name, 'Clients');
    assert.equal(created.description, 'For <our> clients');
    assert.match(created.url, /^http:\/\/forms\.test\/p\/[A-Za-z0-9_-]{16,}$/);
    assert.equal(created.avatar, null);
    assert.deepEqual([created.formsCount, created.usersCount, created.forms, created.users], [0, 0, [], []]);
    assert.match(created.created, /Z$/);

    assert.deepEqual(ok(await a.get(`/portal/${created.id}`)), created);
    const second = ok(await a.post('/portal', { name: 'Staff' }), 201);
    assert.equal(second.description, null);

    const listed = ok(await a.get('/portal'));
    assert.deepEqual(
      listed.portals.map((p: any) => p.name),
      ['Clients', 'Staff'],
    );
    assert.deepEqual([listed.total, listed.pages, listed.pageNumber, listed.pageSize], [2, 1, 1, 25]);
    assert.equal(listed.portals[0].forms, undefined, 'the listing carries no forms or users');
    const paged = ok(await a.get('/portal?pageSize=1&pageNumber=2'));
    assert.deepEqual([paged.portals.length, paged.portals[0].name, paged.pages], [1, 'Staff', 2]);
    assert.equal(ok(await b.get('/portal')).total, 0, 'B sees none of them');

    const updated = ok(await a.put(`/portal/${created.id}`, { name: 'Customers', description: null }));
    assert.deepEqual([updated.name, updated.description], ['Customers', null]);
    expectError(await a.put(`/portal/${created.id}`, {}), 400, 'validation_failed');
    expectError(await a.put(`/portal/${created.id}`, { name: '' }), 400, 'validation_failed');
    expectError(await a.post('/portal', { name: 'x', users: [] }), 400, 'validation_failed');

    // The /api/v2 path answers the same portal in v2's manner (docs/v2.md).
    const legacy = await app.request('GET', `/api/v2/portal/${created.id}.json`, { token: a.token });
    assert.equal(legacy.body.id, String(created.id));
    assert.equal(legacy.body.name, ok(await a.get(`/portal/${created.id}`)).name);

    for (const res of [
      await b.get(`/portal/${created.id}`),
      await b.put(`/portal/${created.id}`, { name: 'Mine' }),
      await b.delete(`/portal/${created.id}`),
      await b.post(`/portal/${created.id}/copy`),
    ])
      expectError(res, 404, 'portal_not_found');

    assert.deepEqual(ok(await a.delete(`/portal/${created.id}`)), { id: created.id });
    expectError(await a.get(`/portal/${created.id}`), 404, 'portal_not_found');
    expectError(await a.delete(`/portal/${created.id}`), 404, 'portal_not_found');
    assert.equal((await app.request('GET', pathOf(created.url))).status, 404, 'its page is gone');
  });

  it('adds, changes and removes portal forms, refusing other accounts’ and repeated ones', async () => {
    const portal = ok(await a.post('/portal', { name: 'Forms' }), 201);
    const form = await newForm(a, 'Intake');
    const other = await newForm(a, 'Survey');
    const bForm = await newForm(b, 'B form');

    const added = ok(
      await a.post(`/portal/${portal.id}/form`, {
        formId: form.id,
        dueDate: '2026-12-01T17:00:00-05:00',
        required: true,
      }),
    );
    assert.deepEqual(
      { ...added, created: undefined, updated: undefined },
      {
        portalId: portal.id,
        formId: form.id,
        name: 'Intake',
        url: form.url,
        dueDate: '2026-12-01T22:00:00.000Z',
        required: true,
        created: undefined,
        updated: undefined,
      },
    );
    const plain = ok(await a.post(`/portal/${portal.id}/form`, { formId: other.id }));
    assert.deepEqual([plain.dueDate, plain.required], [null, false]);

    expectError(await a.post(`/portal/${portal.id}/form`, { formId: form.id }), 400, 'invalid_portal_form');
    expectError(await a.post(`/portal/${portal.id}/form`, { formId: bForm.id }), 404, 'form_not_found');
    expectError(await a.post(`/portal/${portal.id}/form`, { formId: 2147483647 }), 404, 'form_not_found');
    expectError(
      await a.post(`/portal/${portal.id}/form`, { formId: form.id, dueDate: 'soon' }),
      400,
      'validation_failed',
    );
    expectError(await a.post(`/portal/${portal.id}/form`, {}), 400, 'validation_failed');
    expectError(await b.post(`/portal/${portal.id}/form`, { formId: bForm.id }), 404, 'portal_not_found');

    const changed = ok(await a.put(`/portal/${portal.id}/form/${form.id}`, { dueDate: null, required: false }));
    assert.deepEqual([changed.dueDate, changed.required], [null, false]);
    const dated = ok(await a.put(`/portal/${portal.id}/form/${other.id}`, { dueDate: '2027-01-02T03:04:05Z' }));
    assert.deepEqual([dated.dueDate, dated.required], ['2027-01-02T03:04:05.000Z', false]);
    expectError(await a.put(`/portal/${portal.id}/form/${form.id}`, {}), 400, 'validation_failed');
    // Dates whose instant falls past the years 0000–9999 in UTC: refused, and nothing changed (the portal still reads).
    for (const dueDate of ['9999-12-31T23:59:59-14:00', '0000-01-01T00:00:00+14:00']) {
      expectError(await a.put(`/portal/${portal.id}/form/${other.id}`, { dueDate }), 400, 'validation_failed');
      expectError(await a.post(`/portal/${portal.id}/form`, { formId: form.id, dueDate }), 400, 'validation_failed');
    }
    const kept = ok(await a.get(`/portal/${portal.id}`)).forms.find((f: { formId: number }) => f.formId === other.id);
    assert.equal(kept.dueDate, '2027-01-02T03:04:05.000Z');
    const outside = await newForm(a, 'Outside');
    expectError(
      await a.put(`/portal/${portal.id}/form/${outside.id}`, { required: true }),
      404,
      'portal_form_not_found',
    );
    expectError(await a.delete(`/portal/${portal.id}/form/${outside.id}`), 404, 'portal_form_not_found');

    const read = ok(await a.get(`/portal/${portal.id}`));
    assert.deepEqual(
      read.forms.map((f: any) => f.formId),
      [form.id, other.id],
    );
    assert.equal(read.formsCount, 2);

    // A deleted form leaves the portal's records; adding one is a 404.
    ok(await a.delete(`/forms/${other.id}`));
    assert.deepEqual(
      ok(await a.get(`/portal/${portal.id}`)).forms.map((f: any) => f.formId),
      [form.id],
    );
    const gone = await newForm(a, 'Gone');
    ok(await a.delete(`/forms/${gone.id}`));
    expectError(await a.post(`/portal/${portal.id}/form`, { formId: gone.id }), 404, 'form_not_found');

    assert.deepEqual(ok(await a.delete(`/portal/${portal.id}/form/${form.id}`)), {
      portalId: portal.id,
      formId: form.id,
    });
    expectError(await a.delete(`/portal/${portal.id}/form/${form.id}`), 404, 'portal_form_not_found');
    ok(await a.get(`/forms/${form.id}`));
  });

  it('adds, changes and removes portal users, one per address', async () => {
    const portal = ok(await a.post('/portal', { name: 'People' }), 201);
    const withUser = ok(await a.post(`/portal/${portal.id}/user`, { email: 'Ann@Example.com', name: 'Ann' }));
    assert.equal(withUser.usersCount, 1);
    const [ann] = withUser.users;
    assert.deepEqual(
      { email: ann.email, name: ann.name, portalId: ann.portalId, lastSignIn: ann.lastSignIn },
      { email: 'Ann@Example.com', name: 'Ann', portalId: portal.id, lastSignIn: null },
    );
    expectError(
      await a.post(`/portal/${portal.id}/user`, { email: 'ann@example.COM', name: 'Ann again' }),
      400,
      'invalid_portal_user',
    );
    expectError(
      await a.post(`/portal/${portal.id}/user`, { email: 'not an address', name: 'X' }),
      400,
      'validation_failed',
    );
    expectError(await a.post(`/portal/${portal.id}/user`, { email: 'x@example.com' }), 400, 'validation_failed');
    const bob = ok(await a.post(`/portal/${portal.id}/user`, { email: 'bob@example.com', name: 'Bob' })).users.find(
      (u: any) => u.name === 'Bob',
    );

    const renamed = ok(
      await a.put(`/portal/${portal.id}/user/${ann.id}`, { name: 'Ann Lee', email: 'ann@example.org' }),
    );
    assert.deepEqual([renamed.id, renamed.name, renamed.email], [ann.id, 'Ann Lee', 'ann@example.org']);
    expectError(
      await a.put(`/portal/${portal.id}/user/${ann.id}`, { email: 'BOB@example.com' }),
      400,
      'invalid_portal_user',
    );
    expectError(await a.put(`/portal/${portal.id}/user/${ann.id}`, {}), 400, 'validation_failed');
    // Another portal's user, and another account's.
    const otherPortal = ok(await a.post('/portal', { name: 'Other' }), 201);
    expectError(await a.put(`/portal/${otherPortal.id}/user/${ann.id}`, { name: 'X' }), 404, 'portal_user_not_found');
    expectError(await b.put(`/portal/${portal.id}/user/${ann.id}`, { name: 'X' }), 404, 'portal_not_found');
    expectError(await b.delete(`/portal/${portal.id}/user/${ann.id}`), 404, 'portal_not_found');

    assert.deepEqual(ok(await a.delete(`/portal/${portal.id}/user/${bob.id}`)), {
      portalId: portal.id,
      userId: bob.id,
    });
    expectError(await a.delete(`/portal/${portal.id}/user/${bob.id}`), 404, 'portal_user_not_found');
    assert.deepEqual(
      ok(await a.get(`/portal/${portal.id}`)).users.map((u: any) => u.email),
      ['ann@example.org'],
    );
  });

  it('takes a PNG avatar told by its bytes, serves it, and refuses a renamed text file and an oversize file', async () => {
    const portal = ok(await a.post('/portal', { name: 'Avatar' }), 201);
    const path = `/portal/${portal.id}/avatar`;
    const set = ok(await upload(app, path, [['image', PNG, 'logo.png']], a.token));
    assert.deepEqual({ ...set.avatar, url: undefined }, { contentType: 'image/png', size: PNG.length, url: undefined });
    assert.match(set.avatar.url, /^http:\/\/forms\.test\/p\/[^/]+\/avatar\?v=/);

    const served = await fetch(`${app.url}${pathOf(set.avatar.url)}${new URL(set.avatar.url).search}`);
    assert.equal(served.status, 200);
    assert.equal(served.headers.get('content-type'), 'image/png');
    assert.match(served.headers.get('cache-control') ?? '', /immutable/);
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), PNG);

    const keyOf = async () =>
      (
        await app.server.ctx.db
          .selectFrom('portals')
          .select('avatar_key')
          .where('id', '=', portal.id)
          .executeTakeFirstOrThrow()
      ).avatar_key;
    const first = await keyOf();

    expectError(
      await upload(app, path, [['image', Buffer.from('just some text\n'), 'notes.png']], a.token),
      400,
      'invalid_image',
    );
    expectError(
      await upload(app, path, [['image', Buffer.concat([PNG, Buffer.alloc(8 * 1024)]), 'big.png']], a.token),
      400,
      'invalid_image',
    );
    expectError(
      await upload(
        app,
        path,
        [['image', Buffer.concat([PNG, Buffer.alloc(drainBytes(4096) + 1024)]), 'huge.png']],
        a.token,
      ),
      400,
      'invalid_image',
    );
    expectError(await upload(app, path, [['picture', PNG, 'logo.png']], a.token), 400, 'invalid_image');
    expectError(await upload(app, path, [['image', PNG, 'x.png']], b.token), 404, 'portal_not_found');
    // A body without its closing boundary is refused, not read as far as it goes: cut short in a
    // file (which would set a truncated image) or in a field, or sent under another boundary
    // (no part to the parser, which would remove the image).
    const raw = (body: Buffer | string, boundary = 'cut') =>
      app.request('POST', `/api/v2025${path}`, {
        raw: body as string,
        headers: { authorization: `Bearer ${a.token}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      });
    const filePart = `--cut\r\ncontent-disposition: form-data; name="image"; filename="a.png"\r\ncontent-type: image/png\r\n\r\n`;
    for (const [what, body] of [
      ['a file cut short', Buffer.concat([Buffer.from(filePart), PNG.subarray(0, PNG.length - 10)])],
      ['a field cut short', '--cut\r\ncontent-disposition: form-data; name="image"\r\n\r\nnull\r\n'],
      ['another boundary', '--other\r\ncontent-disposition: form-data; name="image"\r\n\r\nnull\r\n--other--\r\n'],
      ['no boundary at all', 'not multipart at all'],
    ] as const) {
      const res = await raw(body);
      expectError(res, 400, 'invalid_image');
      // The parser itself fails a file part cut short; the rest it would take as whole.
      if (what !== 'a file cut short') assert.match(res.body.error, /closing boundary/, `${what}: ${res.body.error}`);
    }
    assert.equal(await keyOf(), first, 'refused uploads changed nothing');
    const whole = ok(await raw(Buffer.concat([Buffer.from(filePart), PNG, Buffer.from('\r\n--cut--\r\n')])));
    assert.equal(whole.avatar.size, PNG.length, 'the same body with its closing boundary is taken');
    assert.notEqual(await keyOf(), first);

    // A copy has its own file of the avatar, the forms, and no users.
    const form = await newForm(a, 'Copied form');
    ok(await a.post(`/portal/${portal.id}/form`, { formId: form.id, required: true }));
    ok(await a.post(`/portal/${portal.id}/user`, { email: 'kept@example.com', name: 'Kept' }));
    const copy = ok(await a.post(`/portal/${portal.id}/copy`));
    assert.equal(copy.name, 'Avatar (copy)');
    assert.notEqual(copy.id, portal.id);
    assert.notEqual(copy.url, portal.url);
    assert.deepEqual(
      copy.forms.map((f: any) => [f.formId, f.required]),
      [[form.id, true]],
    );
    assert.deepEqual(copy.users, []);
    assert.equal(copy.avatar.size, PNG.length);
    assert.notEqual(copy.avatar.url, set.avatar.url);

    // No body removes the avatar, as DELETE does; the old files go once the worker runs.
    const removed = ok(await upload(app, path, [], a.token));
    assert.equal(removed.avatar, null);
    const gone = await fetch(`${app.url}${pathOf(set.avatar.url)}`);
    assert.equal(gone.status, 404);
    await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
    assert.equal(await app.server.ctx.storage.head(first!), undefined);
    assert.deepEqual(ok(await a.delete(`/portal/${copy.id}/avatar`)), { id: copy.id });
    assert.deepEqual(ok(await a.delete(`/portal/${copy.id}/avatar`)), { id: copy.id }, 'also when there is none');
    expectError(await b.delete(`/portal/${copy.id}/avatar`), 404, 'portal_not_found');
  });

  it('lets members read portals and refuses them changes', async () => {
    const portal = ok(await a.post('/portal', { name: 'Read only' }), 201);
    const member = ok(await a.post('/users', { email: `m-${Date.now()}@example.com`, name: 'M', role: 'member' }));
    const token = (await createPersonalToken(app.server.ctx, member.id)).token;
    assert.equal((await app.request('GET', `/api/v2025/portal/${portal.id}`, { token })).status, 200);
    expectError(
      await app.request('PUT', `/api/v2025/portal/${portal.id}`, { token, body: { name: 'No' } }),
      403,
      'admin_required',
    );
  });
});

describe(`the portal page (${dialectName})`, () => {
  let smtp: SmtpSink;
  let app: TestApp;
  let a: TestAccount;
  let portal: any;
  let form: any;
  let other: any;
  const runJobs = () => createWorker(app.server.ctx, { kinds: jobKinds }).runDue();

  before(async () => {
    smtp = await startSmtpSink();
    app = await startTestApp({
      SMTP_URL: smtp.url,
      MAIL_FROM: 'Portal Desk <desk@forms.test>',
      PUBLIC_SUBMIT_MIN_SECONDS: '0',
    });
    a = await app.account();
    portal = ok(await a.post('/portal', { name: 'Grants <2026>', description: 'Forms for applicants' }), 201);
    form = ok(await a.post('/forms', { name: 'Application', fields: [{ type: 'text', label: 'Note' }] }));
    other = ok(await a.post('/forms', { name: 'Budget', fields: [{ type: 'text', label: 'Note' }] }));
    ok(await a.post(`/portal/${portal.id}/form`, { formId: form.id, dueDate: '2026-01-15T12:00:00Z', required: true }));
    ok(await a.post(`/portal/${portal.id}/form`, { formId: other.id }));
    ok(await a.post(`/portal/${portal.id}/user`, { email: 'ann@example.com', name: 'Ann <Lee>' }));
  });
  after(async () => {
    await app.close();
    await smtp.close();
  });

  const portalPath = () => pathOf(portal.url);

  /** Asks for a link as a form post and returns the link the email carries. */
  async function linkFor(email: string): Promise<string | undefined> {
    const before = smtp.messages.length;
    const res = await page(app, 'POST', `${portalPath()}/signin`, { form: { email } });
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /a sign-in link is on its way/);
    await runJobs();
    const mail = smtp.messages.slice(before);
    if (mail.length === 0) return undefined;
    assert.equal(mail.length, 1);
    const found = /http:\/\/forms\.test(\/p\/[^\s"<]+\/signin\?token=[A-Za-z0-9_%-]+)/.exec(mail[0]!.decoded);
    assert.ok(found, mail[0]!.decoded);
    return found[1]!.replace(/&amp;/g, '&');
  }

  /** Opens the link's confirmation page, as a browser that holds `cookie` (its confirmation cookie, if any). */
  async function confirmation(link: string, cookie?: string) {
    const shown = await page(app, 'GET', link, { cookie });
    assert.equal(shown.status, 200, shown.text);
    const field = (name: string) => unescape(new RegExp(`name="${name}" value="([^"]*)"`).exec(shown.text)![1]!);
    const set = shown.headers.getSetCookie().find((c) => c.startsWith('fw_portal_confirm='));
    return { shown, form: { token: field('token'), confirm: field('confirm') }, cookie: set?.split(';')[0] ?? cookie };
  }

  /** What the confirmation page's button posts, from that page in the same browser. */
  function confirm(
    form: Record<string, string>,
    cookie: string | undefined,
    headers: Record<string, string> = SAME_ORIGIN,
  ) {
    return page(app, 'POST', `${portalPath()}/signin/confirm`, { form, cookie, headers });
  }

  /** Signs in with the link, as a person does: the confirmation page, then its button; the session cookie. */
  async function openLink(link: string): Promise<string> {
    const { form, cookie } = await confirmation(link);
    const opened = await confirm(form, cookie);
    assert.equal(opened.status, 303, opened.text);
    assert.equal(opened.headers.get('location'), portalPath());
    const set = opened.headers.getSetCookie().find((c) => c.startsWith('fw_portal='))!;
    return set.split(';')[0]!;
  }

  async function signIn(): Promise<string> {
    return openLink((await linkFor('ANN@example.com'))!);
  }

  it('shows a sign-in form, and answers the same for an address that is no user', async () => {
    const first = await page(app, 'GET', portalPath());
    assert.equal(first.status, 200);
    assert.match(first.text, /<h1 class="fw-title">Grants &#60;2026&#62;<\/h1>/);
    assert.match(first.text, /<label for="fwp-email">Email address<\/label>/);
    assert.match(first.text, /<html lang="en">/);
    assert.doesNotMatch(first.text, /Application/, 'no forms before signing in');

    const before = smtp.messages.length;
    const jobs = async () =>
      (await app.server.ctx.db.selectFrom('jobs').select(['kind', 'payload']).execute()).filter(
        (j) => j.kind === 'emails.portal_signin',
      );
    const jobsBefore = (await jobs()).length;
    const stranger = await page(app, 'POST', `${portalPath()}/signin`, { form: { email: 'nobody@example.com' } });
    const afterStranger = await jobs();
    const known = await page(app, 'POST', `${portalPath()}/signin`, { form: { email: 'ann@example.com' } });
    // The same work for any address: one job each, which finds out who it is for; no address in the clear.
    assert.equal(afterStranger.length, jobsBefore + 1);
    assert.equal((await jobs()).length, jobsBefore + 2);
    assert.ok(!JSON.stringify(await jobs()).includes('example.com'));
    assert.equal(stranger.status, known.status);
    assert.equal(stranger.text, known.text, 'the page tells nothing about who is a user');
    const json = [
      await page(app, 'POST', `${portalPath()}/signin`, { json: { email: 'nobody@example.com' } }),
      await page(app, 'POST', `${portalPath()}/signin`, { json: { email: 'ann@example.com' } }),
    ];
    assert.deepEqual(
      json.map((r) => [r.status, r.text]),
      [json[0]!.status, json[0]!.text].map(() => [json[0]!.status, json[0]!.text]),
    );
    assert.equal(json[0]!.status, 200);
    await runJobs();
    const sent = smtp.messages.slice(before);
    assert.equal(sent.length, 2, 'two links to ann, none to nobody');
    assert.ok(sent.every((m) => m.to[0] === 'ann@example.com'));
    assert.match(sent[0]!.from, /desk@forms\.test/);
    assert.ok(sent[0]!.decoded.includes('Grants &lt;2026&gt;'), 'the portal name is escaped in HTML');

    const bad = await page(app, 'POST', `${portalPath()}/signin`, { form: { email: 'not an address' } });
    assert.equal(bad.status, 400);
    assert.match(bad.text, /aria-invalid="true"/);
    const unknown = await page(app, 'GET', '/p/no-such-portal-key');
    assert.equal(unknown.status, 404);
  });

  it('signs in once per link, within its time, and shows the forms with due dates and what was submitted', async () => {
    const link = (await linkFor('ann@example.com'))!;
    const { form: confirmForm, cookie: confirmCookie } = await confirmation(link);
    const opened = await confirm(confirmForm, confirmCookie);
    assert.equal(opened.status, 303);
    const setCookie = opened.headers.getSetCookie().find((c) => c.startsWith('fw_portal='))!;
    assert.match(setCookie, /^fw_portal=[A-Za-z0-9_-]{40,};/);
    assert.match(setCookie, /; HttpOnly/);
    assert.match(setCookie, /; SameSite=Lax/);
    assert.match(setCookie, /; Path=\//);
    const cookie = setCookie.split(';')[0]!;

    // Single use: the same link again (its page, and its button again), a wrong token, and no token.
    const again = await page(app, 'GET', link);
    assert.equal(again.status, 400);
    assert.match(again.text, /expired or was already used/);
    assert.equal(again.headers.get('set-cookie'), null);
    const twice = await confirm(confirmForm, confirmCookie);
    assert.equal(twice.status, 400);
    assert.equal(twice.headers.get('set-cookie'), null);
    assert.equal((await page(app, 'GET', `${portalPath()}/signin?token=${'x'.repeat(43)}`)).status, 400);
    assert.equal((await page(app, 'GET', `${portalPath()}/signin`)).status, 400);
    // A link of this portal does not open another.
    const elsewhere = ok(await a.post('/portal', { name: 'Elsewhere' }), 201);
    const token = new URL(link, 'http://x').searchParams.get('token')!;
    const fresh = (await linkFor('ann@example.com'))!;
    assert.equal(
      (
        await page(
          app,
          'GET',
          `${pathOf(elsewhere.url)}/signin?token=${new URL(fresh, 'http://x').searchParams.get('token')}`,
        )
      ).status,
      400,
    );
    assert.notEqual(token, '');
    // Only hashes are stored.
    const stored = JSON.stringify(await app.server.ctx.db.selectFrom('portal_signin_tokens').selectAll().execute());
    assert.ok(!stored.includes(token));

    const shown = await page(app, 'GET', portalPath(), { cookie });
    assert.equal(shown.status, 200);
    assert.match(shown.headers.get('cache-control') ?? '', /no-store/);
    assert.match(shown.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
    assert.match(shown.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    assert.match(shown.text, /Signed in as <strong>Ann &#60;Lee&#62;<\/strong>/);
    assert.ok(shown.text.includes(`<a href="${pathOf(form.url)}">Application</a>`), shown.text);
    assert.ok(shown.text.includes(`<a href="${pathOf(other.url)}">Budget</a>`));
    assert.match(shown.text, /<time datetime="2026-01-15T12:00:00.000Z">15 Jan 2026, 12:00 UTC<\/time>/);
    assert.match(shown.text, /Required/);
    assert.equal((shown.text.match(/Not submitted yet|Overdue/g) ?? []).length, 2);

    // A submission on the hosted page while signed in is the user's; one without the cookie is not.
    const submit = async (f: any, withCookie: boolean) => {
      const { loadToken } = JSON.parse((await page(app, 'GET', `${pathOf(f.url)}/token`)).text);
      const res = await page(app, 'POST', pathOf(f.url), {
        cookie: withCookie ? cookie : undefined,
        json: { fields: [{ id: f.fields[0].id, value: 'hello' }], _fw: loadToken, website: '' },
      });
      assert.equal(res.status, 200, res.text);
    };
    await submit(other, false);
    let now = await page(app, 'GET', portalPath(), { cookie });
    assert.equal((now.text.match(/fwp-done/g) ?? []).length, 0);
    await submit(form, true);
    now = await page(app, 'GET', portalPath(), { cookie });
    assert.equal((now.text.match(/class="fwp-tag fwp-done"/g) ?? []).length, 1);
    assert.match(now.text, /Application<\/a><\/h2><ul class="fwp-facts"><li><span class="fwp-tag fwp-done">Submitted/);
    const ties = await app.server.ctx.db.selectFrom('portal_submissions').selectAll().execute();
    assert.equal(ties.length, 1);
    assert.equal(ties[0]!.form_id, form.id);
    // Deleting the submission unties it.
    ok(await a.delete(`/submissions/${ties[0]!.submission_id}`));
    now = await page(app, 'GET', portalPath(), { cookie });
    assert.equal((now.text.match(/class="fwp-tag fwp-done"/g) ?? []).length, 0);

    // The owner sees when the user last signed in.
    const users = ok(await a.get(`/portal/${portal.id}`)).users;
    assert.match(users[0].lastSignIn, /Z$/);

    // Signing out ends the session.
    const out = await page(app, 'POST', `${portalPath()}/signout`, { cookie });
    assert.equal(out.status, 303);
    assert.match(out.headers.get('set-cookie') ?? '', /fw_portal=; .*Max-Age=0/);
    assert.match((await page(app, 'GET', portalPath(), { cookie })).text, /Email me a sign-in link/);
  });

  it('signs no one in on the link alone: its page asks, and only its own button in the same browser signs in', async () => {
    // Mallory is a portal user who wants someone else's browser signed in to her account (login CSRF).
    ok(await a.post(`/portal/${portal.id}/user`, { email: 'mallory@example.com', name: 'Mallory' }));
    const link = (await linkFor('mallory@example.com'))!;
    const signedIn = (r: { headers: Headers }) => r.headers.getSetCookie().some((c) => /^fw_portal=[^;]/.test(c));

    // The victim's browser is made to open the link: a page that names the account and asks.
    const victim = await confirmation(link);
    assert.equal(signedIn(victim.shown), false, 'opening the link signs no one in');
    assert.match(victim.shown.text, /Sign in to this portal as <strong>Mallory<\/strong> \(mallory@example\.com\)\?/);
    assert.match(victim.shown.text, new RegExp(`action="${portalPath()}/signin/confirm"`));
    assert.match(victim.shown.headers.get('cache-control') ?? '', /no-store/);
    assert.match(victim.shown.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
    const set = victim.shown.headers.getSetCookie().find((c) => c.startsWith('fw_portal_confirm='))!;
    assert.match(set, /; HttpOnly/);
    assert.match(set, /; SameSite=Lax/);
    assert.ok(set.includes(`; Path=${portalPath()}/signin;`), set);
    assert.match((await page(app, 'GET', portalPath(), { cookie: victim.cookie })).text, /Email me a sign-in link/);
    // Nothing is used up by looking: the page opens again, with the same token for the same browser.
    const again = await confirmation(link, victim.cookie);
    assert.equal(again.form.confirm, victim.form.confirm);

    // Mallory's own browser gets its own page and token; neither works from another browser or site.
    const mallory = await confirmation(link);
    assert.notEqual(mallory.form.confirm, victim.form.confirm);
    const refused = [
      // her page's form auto-posted from her site: the victim's Lax cookie does not go with it
      await confirm(mallory.form, undefined, { 'sec-fetch-site': 'cross-site' }),
      // the same, from a browser that sends no Sec-Fetch-Site
      await confirm(mallory.form, undefined, { origin: 'https://evil.example' }),
      // her token with the victim's cookie: bound to her own cookie
      await confirm(mallory.form, victim.cookie, {}),
      // the victim's own token and cookie, but the post comes from another site
      await confirm(victim.form, victim.cookie, { 'sec-fetch-site': 'cross-site' }),
      await confirm(victim.form, victim.cookie, { 'sec-fetch-site': 'same-site' }),
      await confirm(victim.form, victim.cookie, { origin: 'https://evil.example' }),
      // no token, or no cookie
      await confirm({ token: victim.form.token }, victim.cookie),
      await confirm(victim.form, undefined),
    ];
    for (const r of refused) {
      assert.equal(r.status, 403, r.text);
      assert.match(r.text, /not confirmed on the page its link opens/);
      assert.equal(signedIn(r), false);
    }

    // The person who asked for the link, on its page in their browser: signed in, the link used up.
    const own = await confirm(victim.form, victim.cookie);
    assert.equal(own.status, 303, own.text);
    assert.ok(signedIn(own));
    assert.ok(own.headers.getSetCookie().some((c) => /^fw_portal_confirm=;.*Max-Age=0/.test(c)));
    const cookie = own.headers
      .getSetCookie()
      .find((c) => c.startsWith('fw_portal='))!
      .split(';')[0]!;
    assert.match((await page(app, 'GET', portalPath(), { cookie })).text, /Signed in as <strong>Mallory/);
    assert.equal((await page(app, 'GET', link)).status, 400);
    assert.equal((await confirm(mallory.form, mallory.cookie)).status, 400, 'used up');
  });

  it('lets links expire, and sessions end with time, with the user, and with a new address', async () => {
    // The tests above used up the hour's links of this user.
    app.server.ctx.clock.advance(3_600_000);
    const link = (await linkFor('ann@example.com'))!;
    app.server.ctx.clock.advance(SIGNIN_LINK_TTL_MS + 1);
    assert.equal((await page(app, 'GET', link)).status, 400, 'expired');

    const cookie = await signIn();
    assert.match((await page(app, 'GET', portalPath(), { cookie })).text, /Signed in as/);
    app.server.ctx.clock.advance(SESSION_TTL_MS + 1);
    assert.doesNotMatch((await page(app, 'GET', portalPath(), { cookie })).text, /Signed in as/, 'session over');

    const again = await signIn();
    const ann = ok(await a.get(`/portal/${portal.id}`)).users[0];
    ok(await a.put(`/portal/${portal.id}/user/${ann.id}`, { email: 'ann@example.org' }));
    assert.doesNotMatch((await page(app, 'GET', portalPath(), { cookie: again })).text, /Signed in as/, 'new address');
    ok(await a.put(`/portal/${portal.id}/user/${ann.id}`, { email: 'ann@example.com' }));

    const last = await signIn();
    ok(await a.delete(`/portal/${portal.id}/user/${ann.id}`));
    assert.doesNotMatch((await page(app, 'GET', portalPath(), { cookie: last })).text, /Signed in as/, 'user removed');
    // A link asked for before the user was removed sends nothing.
    ok(await a.post(`/portal/${portal.id}/user`, { email: 'ann@example.com', name: 'Ann' }));
    const before = smtp.messages.length;
    await page(app, 'POST', `${portalPath()}/signin`, { form: { email: 'ann@example.com' } });
    const ann2 = ok(await a.get(`/portal/${portal.id}`)).users[0];
    ok(await a.delete(`/portal/${portal.id}/user/${ann2.id}`));
    await runJobs();
    assert.equal(smtp.messages.length, before);
  });

  it('sends at most a few links per user an hour, and says the same past that', async () => {
    ok(await a.post(`/portal/${portal.id}/user`, { email: 'busy@example.com', name: 'Busy' }));
    const before = smtp.messages.length;
    const answers = new Set<string>();
    for (let i = 0; i < 7; i++) {
      const res = await page(app, 'POST', `${portalPath()}/signin`, { form: { email: 'busy@example.com' } });
      assert.equal(res.status, 200);
      answers.add(res.text);
    }
    assert.equal(answers.size, 1);
    await runJobs();
    assert.equal(smtp.messages.slice(before).filter((m) => m.to[0] === 'busy@example.com').length, 5);
  });

  it('deletes sign-in links and sessions a day after they expired, in the daily portals.prune', async () => {
    const DAY = 24 * 3_600_000;
    const user = ok(await a.post(`/portal/${portal.id}/user`, { email: 'tidy@example.com', name: 'Tidy' })).users.find(
      (u: any) => u.email === 'tidy@example.com',
    );
    const cookie = await openLink((await linkFor('tidy@example.com'))!);
    await linkFor('tidy@example.com'); // never opened
    const rows = async () => {
      const db = app.server.ctx.db;
      const links = await db
        .selectFrom('portal_signin_tokens')
        .select('id')
        .where('portal_user_id', '=', user.id)
        .execute();
      const sessions = await db
        .selectFrom('portal_sessions')
        .select('id')
        .where('portal_user_id', '=', user.id)
        .execute();
      return [links.length, sessions.length];
    };
    const prune = () =>
      prunePortalSigninsJob.handler(
        app.server.ctx,
        { id: 0, kind: prunePortalSigninsJob.name, payload: {}, progress: undefined, attempt: 1 },
        {
          signal: new AbortController().signal,
          checkpoint: async () => {},
          replacePayload: async () => {},
          atEnd: () => {},
        },
      );
    await prune();
    assert.deepEqual(await rows(), [2, 1], 'the used link, the unused one and the session');

    // Both links expired 30 minutes after they were made: kept for a day after that.
    app.server.ctx.clock.advance(DAY);
    await prune();
    assert.deepEqual(await rows(), [2, 1], 'expired for less than a day');
    app.server.ctx.clock.advance(SIGNIN_LINK_TTL_MS);
    await prune();
    assert.deepEqual(await rows(), [0, 1], 'the used and the unused link are gone; the live session stays');
    assert.match((await page(app, 'GET', portalPath(), { cookie })).text, /Signed in as <strong>Tidy/);

    app.server.ctx.clock.advance(SESSION_TTL_MS - DAY);
    await prune();
    assert.deepEqual(await rows(), [0, 1], 'the session expired less than a day ago');
    app.server.ctx.clock.advance(DAY);
    await prune();
    assert.deepEqual(await rows(), [0, 0], 'the session, a day after it expired');
    assert.doesNotMatch((await page(app, 'GET', portalPath(), { cookie })).text, /Signed in as/);
  });
});

describe(`portal sign-in links into the mail log (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  before(async () => {
    app = await startTestApp();
    a = await app.account();
  });
  after(() => app.close());

  it('logs the message with the link withheld, under the portal', async () => {
    const portal = ok(await a.post('/portal', { name: 'Logged' }), 201);
    ok(await a.post(`/portal/${portal.id}/user`, { email: 'log@example.com', name: 'Log' }));
    const res = await page(app, 'POST', `${pathOf(portal.url)}/signin`, { form: { email: 'log@example.com' } });
    assert.equal(res.status, 200);
    await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
    const log = ok(await a.get('/mail-log'));
    assert.equal(log.total, 1);
    const [m] = log.messages;
    assert.deepEqual(
      [m.kind, m.formId, m.portalId, m.emailId, m.submissionId, m.to],
      ['portal_signin', null, portal.id, null, null, ['log@example.com']],
    );
    assert.ok(m.text.includes('[the sign-in link is withheld from the mail log]'));
    assert.ok(!m.text.includes('token='));
  });
});
