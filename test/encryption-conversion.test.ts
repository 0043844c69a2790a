import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { runConversion } from '../src/modules/encryption/convert.js';
import { prefillToken } from '../src/modules/hosted/tokens.js';
import type { ConversionPayload } from '../src/modules/encryption/service.js';
import { waitFor, withWorkingApp } from './support/worker-app.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { ok } from './support/submission-fixtures.js';

const PASSWORD = 'turn it on and off';
const header = { headers: { 'x-formwork-encryption-password': PASSWORD } };

describe(`turning encryption on and off (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;

  withWorkingApp((s) => ({ app, a } = s));

  /** A plain form with n submissions whose values are v0, v1, …, and a unique email. */
  async function plainForm(n: number) {
    const form = await ok(
      a.post('/forms', {
        name: 'Convert',
        fields: [
          { type: 'text', label: 'T' },
          { type: 'email', label: 'E', unique: true },
        ],
      }),
      'form',
    );
    const [t, e] = form.fields.map((f: any) => f.id);
    // Rows straight into the database would skip the index; the API is fast enough for a few hundred.
    for (let i = 0; i < n; i++)
      await ok(
        a.post(`/forms/${form.id}/submissions`, {
          fields: [
            { id: t, value: `value${i} marmot` },
            { id: e, value: `p${i}@example.org` },
          ],
        }),
        'submit',
      );
    return { form, t, e };
  }

  const rows = (formId: number) =>
    app.server.db.kysely
      .selectFrom('submissions')
      .select(['id', 'data', 'pretty_name'])
      .where('form_id', '=', formId)
      .orderBy('id')
      .execute();
  const uniqueValues = (formId: number) =>
    app.server.db.kysely
      .selectFrom('submission_unique_values')
      .select('value_norm')
      .where('form_id', '=', formId)
      .execute();
  async function indexHolds(formId: number, word: string): Promise<boolean> {
    const db = app.server.db.kysely;
    if (dialectName === 'postgres') {
      const r = await sql<{
        n: number;
      }>`SELECT count(*) AS n FROM submissions WHERE form_id = ${formId} AND search_vector @@ to_tsquery('simple', ${word})`.execute(
        db,
      );
      return Number(r.rows[0]!.n) > 0;
    }
    const r = await sql<{
      n: number;
    }>`SELECT count(*) AS n FROM submissions_fts WHERE submissions_fts MATCH ${word}`.execute(db);
    return Number(r.rows[0]!.n) > 0;
  }

  it('seals existing submissions in the background, then opens them again', async () => {
    const { form, t, e } = await plainForm(30);
    assert.equal(await indexHolds(form.id, 'marmot'), true);

    const turned = await ok(a.put(`/forms/${form.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'turn on');
    assert.equal(turned.isEncrypted, true);
    await waitFor('encryption to finish', async () =>
      (await ok(a.get(`/forms/${form.id}`))).encryptionState === null ? true : undefined,
    );

    const sealed = await rows(form.id);
    assert.equal(sealed.length, 30);
    for (const r of sealed) {
      assert.match(r.data, /^enc1:/);
      assert.equal(r.pretty_name, null);
    }
    assert.ok(
      (await uniqueValues(form.id)).every((u) => u.value_norm.startsWith('h1:')),
      'unique values are HMACs',
    );
    assert.equal(await indexHolds(form.id, 'marmot'), false, 'no word left in the index');

    // Reads need the password; search works by opening rows; uniqueness still holds across the conversion.
    assert.equal((await a.get(`/forms/${form.id}/submissions?data=true`)).status, 401);
    const found = await ok(a.get(`/forms/${form.id}/submissions?keyword=value7`, header), 'search');
    assert.equal(found.total, 1);
    assert.equal(
      (await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: e, value: 'p3@example.org' }] })).status,
      400,
    );

    // Another change while one runs is refused; turning off needs the right password.
    assert.equal((await a.put(`/forms/${form.id}`, { isEncrypted: false })).status, 400);
    assert.equal(
      (await a.put(`/forms/${form.id}`, { isEncrypted: false, encryptionPassword: 'not it at all' })).status,
      401,
    );
    await ok(a.put(`/forms/${form.id}`, { isEncrypted: false, encryptionPassword: PASSWORD }), 'turn off');
    await waitFor('decryption to finish', async () => {
      const f = await ok(a.get(`/forms/${form.id}`));
      return f.encryptionState === null && f.isEncrypted === false ? true : undefined;
    });
    const opened = await rows(form.id);
    assert.ok(opened.every((r) => !r.data.startsWith('enc1:')));
    assert.equal(await indexHolds(form.id, 'marmot'), true, 'the words are back in the index');
    const plainRead = await ok(
      a.get(`/forms/${form.id}/submissions?keyword=value7&data=true`),
      'search without password',
    );
    assert.equal(plainRead.submissions[0].data[String(t)].value, 'value7 marmot');
    assert.equal(
      (await uniqueValues(form.id)).some((u) => u.value_norm.startsWith('h1:')),
      false,
    );
  });

  it('carries the private key in a decryption job only until the job is done', async () => {
    const { form } = await plainForm(3);
    await ok(a.put(`/forms/${form.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'turn on');
    await waitFor('encryption to finish', async () =>
      (await ok(a.get(`/forms/${form.id}`))).encryptionState === null ? true : undefined,
    );
    await ok(a.put(`/forms/${form.id}`, { isEncrypted: false, encryptionPassword: PASSWORD }), 'turn off');
    await waitFor('decryption to finish', async () =>
      (await ok(a.get(`/forms/${form.id}`))).encryptionState === null ? true : undefined,
    );
    // The worker writes a job's end a moment after the job's own transaction (run ends are
    // gathered into one write), so the form can read as converted while its job still runs.
    const jobsOfForm = async () =>
      (
        await app.server.db.kysely
          .selectFrom('jobs')
          .select(['payload', 'state'])
          .where('kind', '=', 'forms.encryption-conversion')
          .orderBy('id')
          .execute()
      )
        .map((j) => ({ ...j, payload: JSON.parse(j.payload) }))
        .filter((j) => j.payload.formId === form.id);
    const ofForm = await waitFor('both conversion jobs to end', async () => {
      const jobs = await jobsOfForm();
      return jobs.length === 2 && jobs.every((j) => j.state === 'done' || j.state === 'failed') ? jobs : undefined;
    });
    assert.deepEqual(
      ofForm.map((j) => [j.state, j.payload.direction, 'key' in j.payload]),
      [
        ['done', 'encrypt', false],
        ['done', 'decrypt', false],
      ],
    );
  });

  it("seals an encrypted form's prefill values under the link's own key, and drops clear ones when encryption is turned on", async () => {
    const { form, t } = await plainForm(0);
    const prefill = async () =>
      ok(a.post(`/forms/${form.id}/prefill`, { fields: [{ id: t, value: 'Prefilled Pia' }] }));
    const stored = (url: string) =>
      app.server.db.kysely
        .selectFrom('prefill_tokens')
        .select('data')
        .where('id', '=', new URL(url).searchParams.get('prefill')!.split('.')[0]!)
        .executeTakeFirst();
    const page = async (url: string) => {
      const u = new URL(url);
      return (await app.request('GET', `${u.pathname}${u.search}`)).text;
    };
    const clear = await prefill();
    assert.match((await stored(clear.url))!.data, /Prefilled Pia/, 'a plain form keeps its values in the clear');

    await ok(a.put(`/forms/${form.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'turn on');
    await waitFor('encryption to finish', async () =>
      (await ok(a.get(`/forms/${form.id}`))).encryptionState === null ? true : undefined,
    );
    assert.equal(await stored(clear.url), undefined, 'the clear values are gone');
    assert.match(await page(clear.url), /prefilled link has expired/);
    // A clear row of an encrypted form (written past the conversion) is not served either.
    const late = prefillToken(app.server.ctx.config.secretKey, false);
    await app.server.db.kysely
      .insertInto('prefill_tokens')
      .values({
        id: late.id,
        account_id: a.accountId,
        form_id: form.id,
        data: JSON.stringify({ [t]: 'Late Lou' }),
        created_at: Date.now(),
        expires_at: Date.now() + 86_400_000,
      })
      .execute();
    assert.match(await page(`${form.url}?prefill=${late.token}`), /prefilled link has expired/);

    const sealed = await prefill();
    const [, , key] = sealed.token.split('.');
    assert.equal(key.length, 22, 'the link carries the key');
    const row = (await stored(sealed.url))!;
    assert.match(row.data, /^fenc1:/);
    assert.ok(!row.data.includes('Pia') && !row.data.includes(key));
    assert.match(await page(sealed.url), /value="Prefilled Pia"/, 'the page opens them without the password');
    const withoutKey = sealed.url.replace(`.${key}`, '');
    assert.match(await page(withoutKey), /prefilled link has expired/);
    const otherKey = sealed.url.replace(key, key.startsWith('A') ? `B${key.slice(1)}` : `A${key.slice(1)}`);
    assert.match(await page(otherKey), /prefilled link has expired/);

    await ok(a.put(`/forms/${form.id}`, { isEncrypted: false, encryptionPassword: PASSWORD }), 'turn off');
    await waitFor('decryption to finish', async () =>
      (await ok(a.get(`/forms/${form.id}`))).isEncrypted === false ? true : undefined,
    );
    assert.match(await page(sealed.url), /value="Prefilled Pia"/, 'a sealed link still opens after encryption is off');
  });

  it('resumes a conversion from its checkpoint after a crash, converting each row once', async () => {
    // An app without a worker: the job the form update enqueues is run here by hand, with a
    // checkpoint that fails in the third batch, as a worker dying there would.
    const bare = await startTestApp();
    try {
      const acc = await bare.account();
      const form = await ok(acc.post('/forms', { name: 'Crash', fields: [{ type: 'text', label: 'T' }] }), 'form');
      const t = form.fields[0].id;
      for (let i = 0; i < 450; i++)
        await ok(acc.post(`/forms/${form.id}/submissions`, { fields: [{ id: t, value: `value${i}` }] }), 'submit');
      await ok(acc.put(`/forms/${form.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'turn on');
      assert.equal((await ok(acc.get(`/forms/${form.id}`))).encryptionState, 'encrypting');

      const payload: ConversionPayload = { formId: form.id, accountId: acc.accountId, direction: 'encrypt' };
      const stored = () =>
        bare.server.db.kysely
          .selectFrom('submissions')
          .select(['id', 'data'])
          .where('form_id', '=', form.id)
          .orderBy('id')
          .execute();
      let saved: unknown = null;
      let batches = 0;
      class Crash extends Error {}
      await assert.rejects(
        runConversion(bare.server.ctx, payload, null, async (p) => {
          if (++batches === 3) throw new Crash();
          saved = p; // what committed with its batch
        }),
        Crash,
      );
      const halfway = await stored();
      assert.equal(
        halfway.filter((r) => r.data.startsWith('enc1:')).length,
        400,
        'two batches of 200 committed; the third rolled back',
      );
      const before = new Map(halfway.map((r) => [r.id, r.data]));

      await runConversion(bare.server.ctx, payload, saved, async (p) => {
        saved = p;
      });
      const done = await stored();
      assert.ok(done.every((r) => r.data.startsWith('enc1:')));
      for (const r of done)
        if (before.get(r.id)!.startsWith('enc1:'))
          assert.equal(r.data, before.get(r.id), 'a row sealed before the crash is not sealed again');
      assert.equal((await ok(acc.get(`/forms/${form.id}`))).encryptionState, null);
      const all = await ok(acc.get(`/forms/${form.id}/submissions?data=true&pageSize=100&order=ASC`, header), 'read');
      assert.equal(all.total, 450);
      assert.equal(all.submissions[0].data[String(t)].value, 'value0');
    } finally {
      await bare.close();
    }
  });
});
