/**
 * Partial submissions (what people saved on a hosted page to finish later) through a form's
 * encryption changes: the conversion brings them along with the submissions
 * (src/modules/encryption/convert.ts, src/modules/partials/conversion.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { transact } from '../src/db/transaction.js';
import { publicKeyOf } from '../src/modules/encryption/keys.js';
import { runConversion } from '../src/modules/encryption/convert.js';
import type { ConversionPayload } from '../src/modules/encryption/service.js';
import { toDefinition } from '../src/modules/fields/definition.js';
import { listFields } from '../src/modules/fields/repository.js';
import { savePartial } from '../src/modules/partials/service.js';
import { resumeHash, sealForOwner, sealForResume } from '../src/modules/partials/sealing.js';
import { waitFor, withWorkingApp } from './support/worker-app.js';
import { dialectName, expectStatus, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { savePartialOf } from './support/partials.js';
import { ok } from './support/submission-fixtures.js';

const FIRST = 'correct horse';
const SECOND = 'second pass';
const withPassword = (password: string) => ({ headers: { 'x-formwork-encryption-password': password } });

interface Form {
  id: number;
  path: string;
  note: number;
  email: number;
}

/** A form with a text and an email field (the email names a partial), keeping partials. */
async function makeForm(acc: TestAccount, encryption: { isEncrypted?: true; encryptionPassword?: string } = {}) {
  const form = await ok(
    acc.post('/forms', {
      name: 'Partials',
      fields: [
        { type: 'text', label: 'Note' },
        { type: 'email', label: 'Email' },
      ],
      settings: { saveAndResume: true },
      ...encryption,
    }),
    'form',
  );
  return {
    id: form.id,
    path: new URL(form.url).pathname,
    note: form.fields[0].id,
    email: form.fields[1].id,
  } satisfies Form;
}

const values = (form: Form, note: string, email: string) => [
  { id: form.note, value: note },
  { id: form.email, value: email },
];

function stored(app: TestApp, id: number) {
  return app.server.db.kysely
    .selectFrom('partial_submissions')
    .select(['id', 'data', 'resume_data', 'pretty_name'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
}

/** What the page's resume link shows. */
async function resumedPage(app: TestApp, form: Form, token: string): Promise<string> {
  const page = await app.request('GET', `${form.path}?resume=${encodeURIComponent(token)}`);
  assert.equal(page.status, 200, page.text);
  return page.text;
}

/** The values a partial's API detail holds, by field id. */
function dataOf(detail: { data: { field: number; value: unknown }[] }): Record<number, unknown> {
  return Object.fromEntries(detail.data.map((e) => [e.field, e.value]));
}

describe(`partial submissions through encryption changes (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;

  withWorkingApp((s) => ({ app, a } = s));

  async function change(formId: number, body: object): Promise<void> {
    await ok(a.put(`/forms/${formId}`, body), 'encryption change');
    await waitFor('the conversion to finish', async () =>
      (await ok(a.get(`/forms/${formId}`))).encryptionState === null ? true : undefined,
    );
  }

  /** The form's partials as the list shows them with data, names and a keyword. */
  async function listed(form: Form, query: string, options = {}) {
    return expectStatus(await a.get(`/form/${form.id}/partialsubmission?${query}`, options), 200, `list ${query}`);
  }

  it('are opened when encryption is turned off, and stay readable when it is turned on with another password', async () => {
    const form = await makeForm(a, { isEncrypted: true, encryptionPassword: FIRST });
    const saved = await savePartialOf(app, a, form.id, values(form, 'marmot notes', 'pia@example.org'));
    await ok(a.post(`/forms/${form.id}/submissions`, { fields: values(form, 'done', 'done@example.org') }), 'submit');
    const first = await ok(a.get(`/partialsubmission/${saved.id}`, withPassword(FIRST)), 'read sealed');
    assert.equal(dataOf(first)[form.note], 'marmot notes');

    await change(form.id, { isEncrypted: false, encryptionPassword: FIRST });
    const opened = expectStatus(await a.get(`/partialsubmission/${saved.id}`), 200, 'read after turning off');
    assert.deepEqual(dataOf(opened), { [form.note]: 'marmot notes', [form.email]: 'pia@example.org' });
    assert.equal(opened.prettyName, 'pia@example.org');
    const plainList = await listed(form, 'data=true&prettyName=true');
    assert.equal(plainList.total, 1);
    assert.equal(plainList.partialSubmissions[0].data[String(form.note)].value, 'marmot notes');
    assert.equal(plainList.partialSubmissions[0].prettyName, 'pia@example.org');
    assert.equal((await listed(form, 'keyword=marmot')).total, 1);
    assert.equal((await listed(form, 'keyword=nothere')).total, 0);
    let row = await stored(app, saved.id);
    assert.ok(!row.data.startsWith('penc1:') && row.data.includes('marmot notes'), 'stored in the clear');
    assert.equal(row.resume_data, null, 'no sealed resume copy is left');
    assert.equal(row.pretty_name, 'pia@example.org');
    assert.match(await resumedPage(app, form, saved.resumeToken), /value="marmot notes"/);
    // The submissions came along as before.
    assert.equal((await ok(a.get(`/forms/${form.id}/submissions?keyword=done`))).total, 1);

    await change(form.id, { isEncrypted: true, encryptionPassword: SECOND });
    assert.equal((await a.get(`/partialsubmission/${saved.id}`)).status, 401);
    assert.equal((await a.get(`/partialsubmission/${saved.id}`, withPassword(FIRST))).status, 401);
    const again = expectStatus(await a.get(`/partialsubmission/${saved.id}`, withPassword(SECOND)), 200, 'read');
    assert.equal(dataOf(again)[form.note], 'marmot notes');
    const sealedList = await listed(form, 'data=true&prettyName=true', withPassword(SECOND));
    assert.equal(sealedList.partialSubmissions[0].data[String(form.note)].value, 'marmot notes');
    assert.equal(sealedList.partialSubmissions[0].prettyName, 'pia@example.org');
    assert.equal((await listed(form, 'keyword=marmot', withPassword(SECOND))).total, 1);
    row = await stored(app, saved.id);
    assert.equal(row.pretty_name, null, 'an encrypted form keeps no pretty name');
    assert.match(await resumedPage(app, form, saved.resumeToken), /value="marmot notes"/);

    // Saved again from its link, it is sealed as the form is now; and opened again when encryption goes off.
    const resave = await app.request('POST', `${form.path}/partial`, {
      body: { fields: values(form, 'marmot again', 'pia@example.org'), website: '', _resume: saved.resumeToken },
    });
    expectStatus(resave, 200, 'save again');
    row = await stored(app, saved.id);
    assert.match(row.data, /^penc1:/);
    assert.match(row.resume_data!, /^renc1:/);
    assert.match(await resumedPage(app, form, saved.resumeToken), /value="marmot again"/);
    await change(form.id, { isEncrypted: false, encryptionPassword: SECOND });
    const last = expectStatus(await a.get(`/partialsubmission/${saved.id}`), 200, 'read after turning off again');
    assert.equal(dataOf(last)[form.note], 'marmot again');
    assert.match(await resumedPage(app, form, saved.resumeToken), /value="marmot again"/);
  });

  it('saved in the clear stay resumable when encryption is turned on, without a pretty name', async () => {
    const form = await makeForm(a);
    const saved = await savePartialOf(app, a, form.id, values(form, 'clear otter', 'oli@example.org'));
    assert.equal((await stored(app, saved.id)).pretty_name, 'oli@example.org');

    await change(form.id, { isEncrypted: true, encryptionPassword: FIRST });
    const row = await stored(app, saved.id);
    // docs/encryption.md: the resume copy could only be sealed with the token, which the service does not keep.
    assert.ok(!row.data.startsWith('penc1:'), 'left in the clear, so that its link still resumes it');
    assert.equal(row.pretty_name, null);
    assert.equal((await a.get(`/partialsubmission/${saved.id}`)).status, 401);
    const read = expectStatus(await a.get(`/partialsubmission/${saved.id}`, withPassword(FIRST)), 200, 'read');
    assert.equal(read.prettyName, 'oli@example.org');
    const list = await listed(form, 'data=true&prettyName=true&keyword=otter', withPassword(FIRST));
    assert.equal(list.total, 1);
    assert.equal(list.partialSubmissions[0].prettyName, 'oli@example.org');
    assert.match(await resumedPage(app, form, saved.resumeToken), /value="clear otter"/);
  });

  it('that do not open leave the list and the conversion working', async () => {
    const form = await makeForm(a, { isEncrypted: true, encryptionPassword: FIRST });
    const good = await savePartialOf(app, a, form.id, values(form, 'good gecko', 'good@example.org'));
    const bad = await savePartialOf(app, a, form.id, values(form, 'bad badger', 'bad@example.org'));
    // The good one's sealed values on the bad one's row: bound to their row, they do not open there.
    const goodRow = await stored(app, good.id);
    await app.server.db.kysely
      .updateTable('partial_submissions')
      .set({ data: goodRow.data })
      .where('id', '=', bad.id)
      .execute();
    expectStatus(
      await a.get(`/partialsubmission/${bad.id}`, withPassword(FIRST)),
      500,
      'read the bad one',
      'submission_integrity_failed',
    );
    const sealedList = await listed(form, 'data=true&prettyName=true&order=ASC', withPassword(FIRST));
    assert.deepEqual(
      sealedList.partialSubmissions.map((p: any) => [p.id, p.prettyName, p.data?.[String(form.note)]?.value]),
      [
        [good.id, 'good@example.org', 'good gecko'],
        [bad.id, null, undefined],
      ],
    );
    assert.equal((await listed(form, 'keyword=gecko', withPassword(FIRST))).total, 1);

    await change(form.id, { isEncrypted: false, encryptionPassword: FIRST });
    assert.equal((await ok(a.get(`/forms/${form.id}`))).isEncrypted, false);
    assert.ok(!(await stored(app, good.id)).data.startsWith('penc1:'));
    assert.match((await stored(app, bad.id)).data, /^penc1:/, 'left as it was');
    expectStatus(await a.get(`/partialsubmission/${bad.id}`), 409, 'read the bad one', 'submission_sealed');
    const plainList = await listed(form, 'data=true&prettyName=true&order=ASC');
    assert.deepEqual(
      plainList.partialSubmissions.map((p: any) => [p.id, p.prettyName, p.data?.[String(form.note)]?.value]),
      [
        [good.id, 'good@example.org', 'good gecko'],
        [bad.id, null, undefined],
      ],
    );
    assert.equal((await listed(form, 'keyword=gecko')).total, 1);
    // Its person still resumes it from their own sealed copy, and a save stores it as the form is now.
    assert.match(await resumedPage(app, form, bad.resumeToken), /value="bad badger"/);
    expectStatus(
      await app.request('POST', `${form.path}/partial`, {
        body: { fields: values(form, 'bad badger', 'bad@example.org'), website: '', _resume: bad.resumeToken },
      }),
      200,
      'save again',
    );
    const saved = expectStatus(await a.get(`/partialsubmission/${bad.id}`), 200, 'read after saving again');
    assert.equal(dataOf(saved)[form.note], 'bad badger');
    assert.equal((await stored(app, bad.id)).resume_data, null);
  });
});

describe(`the conversion of partial submissions, run by hand (${dialectName})`, () => {
  // An app without a worker: the job that the form update enqueues is run here.
  let bare: TestApp;
  let acc: TestAccount;
  before(async () => {
    bare = await startTestApp();
    acc = await bare.account();
  });
  after(() => bare.close());

  async function conversionPayload(formId: number): Promise<ConversionPayload> {
    const jobs = await bare.server.db.kysely
      .selectFrom('jobs')
      .select('payload')
      .where('kind', '=', 'forms.encryption-conversion')
      .orderBy('id', 'desc')
      .execute();
    const payload = jobs.map((j) => JSON.parse(j.payload) as ConversionPayload).find((p) => p.formId === formId);
    assert.ok(payload, 'the form update enqueued the conversion');
    return payload;
  }

  const rows = (formId: number) =>
    bare.server.db.kysely
      .selectFrom('partial_submissions')
      .select(['id', 'data', 'resume_data', 'pretty_name'])
      .where('form_id', '=', formId)
      .orderBy('id')
      .execute();

  it('opens them in batches, resuming after a crash from its checkpoint, each row once', async () => {
    const form = await makeForm(acc, { isEncrypted: true, encryptionPassword: FIRST });
    for (let i = 0; i < 3; i++)
      await ok(acc.post(`/forms/${form.id}/submissions`, { fields: values(form, `sub${i}`, `s${i}@example.org`) }));
    const first = await savePartialOf(bare, acc, form.id, values(form, 'value0', 'p0@example.org'));
    // The rest straight into the table, sealed as a save seals them: 450 through the page is slow.
    const formRow = await bare.server.db.kysely
      .selectFrom('forms')
      .selectAll()
      .where('id', '=', form.id)
      .executeTakeFirstOrThrow();
    const key = publicKeyOf(formRow)!;
    const now = Date.now();
    for (let i = 1; i < 450; i++) {
      const token = `token-${form.id}-${i}`;
      const { id } = await bare.server.db.kysely
        .insertInto('partial_submissions')
        .values({
          account_id: acc.accountId,
          form_id: form.id,
          resume_hash: resumeHash(token),
          data: '',
          resume_data: null,
          pretty_name: null,
          user_agent: 'test',
          remote_addr: '127.0.0.1',
          created_at: now,
          updated_at: now,
          expires_at: now + 86_400_000,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const json = JSON.stringify({ [form.note]: `value${i}`, [form.email]: `p${i}@example.org` });
      await bare.server.db.kysely
        .updateTable('partial_submissions')
        .set({ data: sealForOwner(formRow, key, json, id), resume_data: sealForResume(token, json, id) })
        .where('id', '=', id)
        .execute();
    }

    await ok(acc.put(`/forms/${form.id}`, { isEncrypted: false, encryptionPassword: FIRST }), 'turn off');
    assert.equal((await ok(acc.get(`/forms/${form.id}`))).encryptionState, 'decrypting');
    // A save from a resumed page meanwhile is stored the new way, its sealed resume copy gone.
    expectStatus(
      await bare.request('POST', `${form.path}/partial`, {
        body: { fields: values(form, 'value0 again', 'p0@example.org'), website: '', _resume: first.resumeToken },
      }),
      200,
      'save while decrypting',
    );
    const resaved = (await rows(form.id)).find((r) => r.id === first.id)!;
    assert.ok(!resaved.data.startsWith('penc1:'));
    assert.equal(resaved.resume_data, null);

    const payload = await conversionPayload(form.id);
    let saved: unknown = null;
    let calls = 0;
    class Crash extends Error {}
    // One batch of submissions, two of partials commit; the third batch of partials dies.
    await assert.rejects(
      runConversion(bare.server.ctx, payload, null, async (p) => {
        if (++calls === 4) throw new Crash();
        saved = p;
      }),
      Crash,
    );
    const halfway = await rows(form.id);
    assert.equal(halfway.filter((r) => !r.data.startsWith('penc1:')).length, 400, 'two batches of 200 committed');
    assert.deepEqual(saved, { after: halfway[399]!.id, partials: true });
    assert.equal((await ok(acc.get(`/forms/${form.id}`))).encryptionState, 'decrypting');
    const before = new Map(halfway.map((r) => [r.id, r.data]));

    let resumedCalls = 0;
    await runConversion(bare.server.ctx, payload, saved, async (p) => {
      resumedCalls++;
      saved = p;
    });
    assert.equal(resumedCalls, 1, 'only the batch that was lost is done again');
    const done = await rows(form.id);
    for (const r of done) {
      assert.ok(!r.data.startsWith('penc1:'), `partial ${r.id} is open`);
      assert.equal(r.resume_data, null);
      assert.match(r.pretty_name ?? '', /^p\d+@example\.org$/);
      if (!before.get(r.id)!.startsWith('penc1:')) assert.equal(r.data, before.get(r.id), 'converted once');
    }
    const form2 = await ok(acc.get(`/forms/${form.id}`));
    assert.equal(form2.encryptionState, null);
    assert.equal(form2.isEncrypted, false);
    const all = await ok(
      acc.get(`/form/${form.id}/partialsubmission?data=true&pageSize=100&order=ASC&keyword=value449`),
    );
    assert.equal(all.total, 1);
    assert.equal(all.partialSubmissions[0].data[String(form.note)].value, 'value449');
    const submissions = await ok(acc.get(`/forms/${form.id}/submissions?data=true`), 'submissions');
    assert.equal(submissions.total, 3);
    assert.match(await resumedPage(bare, form, `token-${form.id}-7`), /value="value7"/);
  });

  it('stores a save whose page read the form before the change as the form is when it commits', async () => {
    const form = await makeForm(acc, { isEncrypted: true, encryptionPassword: FIRST });
    const read = () =>
      bare.server.db.kysely.selectFrom('forms').selectAll().where('id', '=', form.id).executeTakeFirstOrThrow();
    const stale = await read();
    await ok(acc.put(`/forms/${form.id}`, { isEncrypted: false, encryptionPassword: FIRST }), 'turn off');
    await runConversion(bare.server.ctx, await conversionPayload(form.id), null, async () => {});
    assert.equal((await read()).encryption_key, null);

    const ctx = bare.server.ctx;
    const fields = (await listFields(ctx.db, acc.accountId, form.id)).map((r) => ({ id: r.id, ...toDefinition(r) }));
    const late = await transact(ctx.db, (trx) =>
      savePartial(
        ctx,
        trx,
        { ...stale, submissions_count: 0, submissions_version: 0 },
        fields,
        new Map([[form.note, 'late lynx']]),
        undefined,
        {
          userAgent: 'test',
          remoteAddr: '127.0.0.1',
        },
      ),
    );
    const row = (await rows(form.id)).find((r) => r.id === late.id)!;
    assert.ok(!row.data.startsWith('penc1:'), 'not sealed to a key the form no longer holds');
    const detail = expectStatus(await acc.get(`/partialsubmission/${late.id}`), 200, 'read the late save');
    assert.equal(dataOf(detail)[form.note], 'late lynx');
  });
});
