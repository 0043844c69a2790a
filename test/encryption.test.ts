import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { bytesUnder } from './support/disk.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { toWindowStart } from './support/quota.js';
import { assertHourBounds, ok } from './support/submission-fixtures.js';

const PASSWORD = 'correct horse battery staple';
const header = (password = PASSWORD) => ({ headers: { 'x-formwork-encryption-password': password } });

/** Values distinctive enough that finding one in storage can only mean it was stored in the clear. */
const SECRET = {
  first: 'Quokkabel',
  last: 'Zanzibarova',
  email: 'quokka.zanzibar@example.org',
  note: 'Plutonium-Marmalade-4471',
};

function assertError(res: Reply, status: number, code: string, what: string): void {
  assert.equal(res.status, status, `${what}: ${res.status} ${res.text.slice(0, 300)}`);
  assert.equal(res.body.status, 'error', what);
  assert.equal(res.body.code, code, `${what}: ${res.text.slice(0, 300)}`);
}

/** Every byte the service has written: the SQLite files, or every row of every table on PostgreSQL, and the data directory. */
async function everythingStored(app: TestApp): Promise<string> {
  const parts = [bytesUnder(app.config.dataDir)];
  if (dialectName === 'postgres') {
    const db = app.server.db.kysely;
    const tables = await sql<{
      tablename: string;
    }>`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`.execute(db);
    for (const { tablename } of tables.rows) {
      const rows = await sql<{ r: unknown }>`SELECT row_to_json(t) AS r FROM ${sql.table(tablename)} t`.execute(db);
      parts.push(JSON.stringify(rows.rows));
    }
  }
  return parts.join('\n');
}

describe(`encrypted forms (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;
  let form: any;
  let ids: Record<string, number>;

  const fieldsOf = (values: { first: string; last: string; email: string; note: string }) => ({
    fields: [
      { id: ids.Name, value: { first: values.first, last: values.last } },
      { id: ids.Email, value: values.email },
      { id: ids.Note, value: values.note },
    ],
  });

  before(async () => {
    app = await startTestApp({ ENCRYPTION_PASSWORD_ATTEMPTS: '1000' });
    a = await app.account('A');
    b = await app.account('B');
    form = await ok(
      a.post('/forms', {
        name: 'Sealed',
        isEncrypted: true,
        encryptionPassword: PASSWORD,
        fields: [
          { type: 'name', label: 'Name', required: true },
          { type: 'email', label: 'Email', unique: true },
          { type: 'textarea', label: 'Note' },
        ],
      }),
      'create encrypted form',
    );
    ids = Object.fromEntries(form.fields.map((f: any) => [f.label, f.id]));
  });
  after(() => app.close());

  it('is created with a password that is never shown, and refuses an encryption request that lacks one', async () => {
    assert.equal(form.isEncrypted, true);
    assert.equal(form.encryptionState, null);
    assert.ok(!JSON.stringify(form).includes(PASSWORD));
    const read = await a.get(`/forms/${form.id}?withFields=true`);
    assert.ok(!read.text.includes(PASSWORD) && !/encryptionPassword|encryption_key|wrapped/.test(read.text), read.text);

    assertError(
      await a.post('/forms', { name: 'x', isEncrypted: true }),
      400,
      'encryption_password_required',
      'no password',
    );
    assertError(
      await a.post('/forms', { name: 'x', isEncrypted: true, encryptionPassword: 'short' }),
      400,
      'validation_failed',
      'short password',
    );
    assertError(
      await a.post('/forms', { name: 'x', encryptionPassword: PASSWORD }),
      400,
      'validation_failed',
      'password without encryption',
    );
  });

  it('takes submissions without the password and needs it, right, to read them back', async () => {
    const created = await ok(
      a.post(`/forms/${form.id}/submissions`, fieldsOf({ ...SECRET, email: 'one@example.org' })),
      'submit',
    );
    // The submitter gets back what they sent.
    assert.equal(created.data.find((d: any) => d.field === ids.Note).value, SECRET.note);

    assertError(await a.get(`/submissions/${created.id}`), 401, 'encryption_password_required', 'no header');
    assertError(
      await a.get(`/submissions/${created.id}`, header('wrong password!')),
      401,
      'encryption_password_invalid',
      'wrong password',
    );
    const read = await ok(a.get(`/submissions/${created.id}`, header()), 'read with password');
    assert.equal(read.prettyName, `${SECRET.first} ${SECRET.last}`);
    assert.deepEqual(read.data.find((d: any) => d.field === ids.Name).value, {
      first: SECRET.first,
      last: SECRET.last,
    });
    // The original service's header name works too.
    await ok(a.get(`/submissions/${created.id}`, { headers: { 'x-fs-encryption-password': PASSWORD } }), 'X-FS header');
    // Another account sees nothing, password or not.
    assertError(await b.get(`/submissions/${created.id}`, header()), 404, 'submission_not_found', 'other account');
    // A sealed row is written step by step (its data needs its id): its hour bounds its id too.
    await assertHourBounds(app.server.db.kysely, form.id);
  });

  it('lists without the password, but values, names and searches need it', async () => {
    const path = `/forms/${form.id}/submissions`;
    const plain = await ok(a.get(path), 'bare list');
    assert.ok(plain.total >= 1);
    assert.equal(plain.submissions[0].data, undefined);
    for (const q of [
      'data=true',
      'prettyName=true',
      'expandData=true',
      'dataFormat=standardized',
      'keyword=quokkabel',
      `search[0][fieldId]=${ids.Email}&search[0][value]=one@example.org`,
    ]) {
      assertError(await a.get(`${path}?${q}`), 401, 'encryption_password_required', q);
    }
    const withData = await ok(a.get(`${path}?data=true&prettyName=true`, header()), 'list with password');
    assert.equal(withData.submissions[0].prettyName, `${SECRET.first} ${SECRET.last}`);
    assert.equal(withData.submissions[0].data[String(ids.Note)].value, SECRET.note);

    const byKeyword = await ok(a.get(`${path}?keyword=zanzibar`, header()), 'keyword');
    assert.equal(byKeyword.total, 1);
    const byField = await ok(
      a.get(`${path}?search[0][fieldId]=${ids.Email}&search[0][value]=ONE@example.org`, header()),
      'field search',
    );
    assert.equal(byField.total, 1);
    const none = await ok(a.get(`${path}?keyword=nothing-like-this`, header()), 'no match');
    assert.equal(none.total, 0);
    // Across forms, encrypted forms index no words.
    assert.equal((await ok(a.get('/submissions?search=zanzibar'))).total, 0);

    const exported = await a.get(`/forms/${form.id}/submissions/export?format=ndjson`);
    assertError(exported, 401, 'encryption_password_required', 'export');
    const csv = await a.get(`/forms/${form.id}/submissions/export?format=csv&keyword=plutonium`, header());
    assert.equal(csv.status, 200);
    assert.match(csv.text, /Zanzibarova/);
    // A keyword of no words matches nothing, in the export as in the list: the header line alone.
    assert.equal((await ok(a.get(`${path}?keyword=${encodeURIComponent('!!!')}`, header()), 'no words')).total, 0);
    const noWords = await a.get(
      `/forms/${form.id}/submissions/export?format=csv&keyword=${encodeURIComponent('!!!')}`,
      header(),
    );
    assert.equal(noWords.status, 200);
    assert.equal(noWords.text.trimEnd().split('\r\n').length, 1, noWords.text.slice(0, 300));
  });

  it('keeps unique fields unique without storing their values', async () => {
    await ok(a.post(`/forms/${form.id}/submissions`, fieldsOf({ ...SECRET, email: 'twice@example.org' })), 'first');
    const again = await a.post(`/forms/${form.id}/submissions`, fieldsOf({ ...SECRET, email: 'TWICE@example.org' }));
    assertError(again, 400, 'not_unique', 'duplicate email');
  });

  it('edits with the password: opens, changes the named field, seals again', async () => {
    const created = await ok(
      a.post(`/forms/${form.id}/submissions`, fieldsOf({ ...SECRET, email: 'edit@example.org' })),
      'submit',
    );
    assertError(
      await a.put(`/submissions/${created.id}`, { fields: [{ id: ids.Note, value: 'changed' }] }),
      401,
      'encryption_password_required',
      'edit without',
    );
    const edited = await ok(
      a.put(`/submissions/${created.id}`, { fields: [{ id: ids.Note, value: 'changed' }] }, header()),
      'edit',
    );
    assert.equal(edited.data.find((d: any) => d.field === ids.Note).value, 'changed');
    assert.equal(edited.data.find((d: any) => d.field === ids.Email).value, 'edit@example.org');
    const row = await app.server.db.kysely
      .selectFrom('submissions')
      .select('data')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    assert.match(row.data, /^enc1:/);
    assert.ok(!row.data.includes('changed'));
  });

  it('writes none of the submitted values, nor the password, anywhere in the clear', async () => {
    // An idempotent submission too: its stored replay must not hold the values either.
    const res = await a.post(`/forms/${form.id}/submissions`, fieldsOf({ ...SECRET, email: SECRET.email }), {
      headers: { 'idempotency-key': 'sealed-1' },
    });
    assert.equal(res.status, 200, res.text);
    const replay = await a.post(`/forms/${form.id}/submissions`, fieldsOf({ ...SECRET, email: SECRET.email }), {
      headers: { 'idempotency-key': 'sealed-1' },
    });
    assert.equal(replay.status, 200);
    assert.equal(replay.body.id, res.body.id);
    assert.deepEqual(replay.body.data, [], 'a replay of an encrypted form carries no values');

    // A control: the same reading finds a value sent to a plain form.
    const plain = await ok(a.post('/forms', { name: 'Control', fields: [{ type: 'text', label: 'T' }] }), 'plain form');
    await ok(
      a.post(`/forms/${plain.id}/submissions`, { fields: [{ id: plain.fields[0].id, value: 'Control-Visible-9931' }] }),
      'plain submit',
    );
    const stored = await everythingStored(app);
    assert.ok(stored.includes('Control-Visible-9931'), 'the reading sees what is stored in the clear');
    for (const value of [
      SECRET.first,
      SECRET.last,
      SECRET.email,
      SECRET.note,
      PASSWORD,
      SECRET.first.toLowerCase(),
      SECRET.note.toLowerCase(),
    ]) {
      assert.ok(!stored.includes(value), `"${value}" is stored in the clear`);
    }
  });

  it('binds sealed data to its row: swapped between two submissions, it does not open', async () => {
    const one = await ok(
      a.post(`/forms/${form.id}/submissions`, fieldsOf({ ...SECRET, email: 'swap1@example.org' })),
      'one',
    );
    const two = await ok(
      a.post(`/forms/${form.id}/submissions`, fieldsOf({ ...SECRET, email: 'swap2@example.org' })),
      'two',
    );
    const db = app.server.db.kysely;
    const rows = await db
      .selectFrom('submissions')
      .select(['id', 'data'])
      .where('id', 'in', [one.id, two.id])
      .orderBy('id')
      .execute();
    await db.updateTable('submissions').set({ data: rows[1]!.data }).where('id', '=', one.id).execute();
    const res = await a.get(`/submissions/${one.id}`, header());
    assertError(res, 500, 'submission_integrity_failed', 'swapped data');
    await db.updateTable('submissions').set({ data: rows[0]!.data }).where('id', '=', one.id).execute();
    await ok(a.get(`/submissions/${one.id}`, header()), 'restored');
  });

  it('changes the password by re-wrapping the key, without touching the data', async () => {
    const other = await ok(
      a.post('/forms', {
        name: 'Rewrap',
        isEncrypted: true,
        encryptionPassword: PASSWORD,
        fields: [{ type: 'text', label: 'T' }],
      }),
      'form',
    );
    const fieldId = other.fields[0].id;
    const created = await ok(
      a.post(`/forms/${other.id}/submissions`, { fields: [{ id: fieldId, value: 'kept' }] }),
      'submit',
    );
    const before = await app.server.db.kysely
      .selectFrom('submissions')
      .select('data')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();

    assertError(
      await a.put(`/forms/${other.id}`, { newEncryptionPassword: 'a new password' }),
      400,
      'encryption_password_required',
      'no current password',
    );
    assertError(
      await a.put(`/forms/${other.id}`, {
        encryptionPassword: 'not the password',
        newEncryptionPassword: 'a new password',
      }),
      401,
      'encryption_password_invalid',
      'wrong current password',
    );
    await ok(
      a.put(`/forms/${other.id}`, { encryptionPassword: PASSWORD, newEncryptionPassword: 'a new password' }),
      'change password',
    );

    const afterChange = await app.server.db.kysely
      .selectFrom('submissions')
      .select('data')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    assert.equal(afterChange.data, before.data, 'the sealed data is untouched');
    assertError(
      await a.get(`/submissions/${created.id}`, header(PASSWORD)),
      401,
      'encryption_password_invalid',
      'old password',
    );
    const read = await ok(a.get(`/submissions/${created.id}`, header('a new password')), 'new password');
    assert.equal(read.data[0].value, 'kept');

    assertError(
      await a.put(`/forms/${form.id}`, { newEncryptionPassword: 'whatever123' }),
      400,
      'encryption_password_required',
      'needs the current one',
    );
    const plainForm = await ok(a.post('/forms', { name: 'Plain' }), 'plain form');
    assertError(
      await a.put(`/forms/${plainForm.id}`, { encryptionPassword: PASSWORD, newEncryptionPassword: 'whatever123' }),
      400,
      'validation_failed',
      'not encrypted',
    );
  });

  it('checks a password sent with no change, refuses new passwords a header cannot carry, and reads UTF-8 ones from it', async () => {
    const enc = await ok(
      a.post('/forms', { name: 'Checked', isEncrypted: true, encryptionPassword: PASSWORD }),
      'form',
    );
    assertError(
      await a.put(`/forms/${enc.id}`, { isEncrypted: true, encryptionPassword: 'not the password' }),
      401,
      'encryption_password_invalid',
      'isEncrypted: true again with a wrong password',
    );
    assertError(
      await a.put(`/forms/${enc.id}`, { name: 'Renamed', encryptionPassword: 'not the password' }),
      401,
      'encryption_password_invalid',
      'a wrong password beside another change',
    );
    assert.equal((await ok(a.get(`/forms/${enc.id}`))).name, 'Checked', 'nothing changed');
    await ok(a.put(`/forms/${enc.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'the right one');

    for (const bad of [' leading space', 'trailing space ', 'new\nline inside', 'tab\tinside']) {
      const res = await a.post('/forms', { name: 'x', isEncrypted: true, encryptionPassword: bad });
      assertError(res, 400, 'validation_failed', JSON.stringify(bad));
      assert.equal(res.body.details[0].property, 'body.encryptionPassword');
      assertError(
        await a.put(`/forms/${enc.id}`, { encryptionPassword: PASSWORD, newEncryptionPassword: bad }),
        400,
        'validation_failed',
        `new ${JSON.stringify(bad)}`,
      );
    }

    assertError(
      await a.put(`/forms/${enc.id}`, {
        encryptionPassword: 'not the password',
        newEncryptionPassword: ' spaced out ',
      }),
      400,
      'validation_failed',
      'the new password is refused before the current one is checked',
    );

    const unicode = 'pässwörd – 密码';
    const uf = await ok(
      a.post('/forms', {
        name: 'Unicode',
        isEncrypted: true,
        encryptionPassword: unicode,
        fields: [{ type: 'text', label: 'T' }],
      }),
      'unicode form',
    );
    const created = await ok(a.post(`/forms/${uf.id}/submissions`, { fields: [{ id: uf.fields[0].id, value: 'v' }] }));
    // Sent as UTF-8 bytes, as curl does (fetch refuses characters past Latin-1 in a header).
    const utf8AsLatin1 = Buffer.from(unicode).toString('latin1');
    const read = await ok(a.get(`/submissions/${created.id}`, header(utf8AsLatin1)), 'UTF-8 header');
    assert.equal(read.data[0].value, 'v');
    const latin = await ok(
      a.post('/forms', {
        name: 'Latin-1',
        isEncrypted: true,
        encryptionPassword: 'pässwörd',
        fields: [{ type: 'text', label: 'T' }],
      }),
    );
    const sub = await ok(
      a.post(`/forms/${latin.id}/submissions`, { fields: [{ id: latin.fields[0].id, value: 'w' }] }),
    );
    assert.equal((await ok(a.get(`/submissions/${sub.id}`, header('pässwörd')), 'Latin-1 header')).data[0].value, 'w');
  });

  it('throttles wrong passwords per form', async () => {
    // The service's scrypt cost: the six requests below must arrive while the first check runs,
    // to share it (with a cheap one, most would find the key already kept instead).
    const strict = await startTestApp({ ENCRYPTION_PASSWORD_ATTEMPTS: '3' }, undefined, { productionHashes: true });
    try {
      // To the start of a 15-minute throttle window, so that the guesses below do not straddle two.
      toWindowStart(strict.server.ctx.clock, 900_000);
      const acc = await strict.account();
      const f = await ok(
        acc.post('/forms', {
          name: 'F',
          isEncrypted: true,
          encryptionPassword: PASSWORD,
          fields: [{ type: 'text', label: 'T' }],
        }),
        'form',
      );
      const s = await ok(
        acc.post(`/forms/${f.id}/submissions`, { fields: [{ id: f.fields[0].id, value: 'x' }] }),
        'submit',
      );
      // Requests that come together with the right password share one check: one attempt, not six.
      const together = await Promise.all(Array.from({ length: 6 }, () => acc.get(`/submissions/${s.id}`, header())));
      assert.deepEqual(
        together.map((r) => r.status),
        [200, 200, 200, 200, 200, 200],
      );
      for (let i = 0; i < 2; i++)
        assertError(
          await acc.get(`/submissions/${s.id}`, header(`guess number ${i}`)),
          401,
          'encryption_password_invalid',
          `guess ${i}`,
        );
      const refused = await acc.get(`/submissions/${s.id}`, header('guess number 4'));
      assertError(refused, 429, 'rate_limited', 'fourth guess');
      assert.ok(Number(refused.headers.get('retry-after')) > 0);
    } finally {
      await strict.close();
    }
  });
});
