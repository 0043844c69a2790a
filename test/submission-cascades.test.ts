/**
 * What a submission's rows hang on, without PostgreSQL's foreign keys (migration 0036): a
 * unique value never outlives its submission, whatever edits and deletes of it race, and a
 * form's or an account's row deleted (by hand: the service only marks a form deleted) takes
 * its submissions and their unique values with it. On SQLite the foreign keys do the same.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { dialectName, withApps, type TestAccount, type TestApp } from './support/helpers.js';

describe(`a submission's rows hang on it (${dialectName})`, () => {
  let app: TestApp;
  let second: TestApp;
  let a: TestAccount;
  withApps((apps) => ({ app, second, a } = apps));

  const uniqueForm = async (account: TestAccount, name: string) => {
    const form = (
      await account.post('/forms', {
        name,
        fields: [
          { type: 'email', label: 'Email', unique: true },
          { type: 'text', label: 'Note' },
        ],
      })
    ).body as { id: number; fields: { id: number }[] };
    return { id: form.id, email: form.fields[0]!.id, note: form.fields[1]!.id };
  };

  const orphans = async () =>
    (
      await sql<{ n: number }>`
        SELECT count(*) AS n FROM submission_unique_values u
        WHERE NOT EXISTS (SELECT 1 FROM submissions s WHERE s.id = u.submission_id)`.execute(app.server.ctx.db)
    ).rows[0]!.n;

  it('leaves no unique value behind when edits and deletes of the same submissions race', async () => {
    const form = await uniqueForm(a, 'Races');
    const ids: number[] = [];
    for (let i = 0; i < 40; i++) {
      const res = await a.post(`/forms/${form.id}/submissions`, {
        fields: [{ id: form.email, value: `first${i}@example.com` }],
      });
      assert.equal(res.status, 200, res.text);
      ids.push(res.body.id);
    }
    // Each submission is edited (a new address: its unique value is rewritten) through one
    // process and deleted through the other, at once.
    const statuses = await Promise.all(
      ids.flatMap((id, i) => [
        second
          .request('PUT', `/api/v2025/submissions/${id}`, {
            token: a.token,
            body: { fields: [{ id: form.email, value: `second${i}@example.com` }] },
          })
          .then((r) => r.status),
        a.delete(`/submissions/${id}`).then((r) => {
          assert.equal(r.status, 200, r.text);
          return r.status;
        }),
      ]),
    );
    for (const status of statuses) assert.ok(status === 200 || status === 404, `status ${status}`);

    assert.equal(Number(await orphans()), 0);
    // Both addresses of every deleted submission are free again.
    for (let i = 0; i < 40; i++) {
      for (const address of [`first${i}@example.com`, `second${i}@example.com`]) {
        const res = await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.email, value: address }] });
        assert.equal(res.status, 200, `${address}: ${res.text}`);
      }
    }
  });

  it("takes a form's submissions and their unique values with the form's row, and an account's with its own", async () => {
    const db = app.server.ctx.db;
    const b = await app.account();
    const kept = await uniqueForm(a, 'Kept');
    const gone = await uniqueForm(a, 'Gone');
    const ofB = await uniqueForm(b, 'Of B');
    for (const [account, form] of [
      [a, kept],
      [a, gone],
      [b, ofB],
    ] as const) {
      for (let i = 0; i < 3; i++) {
        const res = await account.post(`/forms/${form.id}/submissions`, {
          fields: [{ id: form.email, value: `p${i}@example.com` }],
        });
        assert.equal(res.status, 200, res.text);
      }
    }
    const rowsOf = async (formId: number) =>
      [
        (await db.selectFrom('submissions').select('id').where('form_id', '=', formId).execute()).length,
        (await db.selectFrom('submission_unique_values').select('form_id').where('form_id', '=', formId).execute())
          .length,
      ] as const;

    await db.deleteFrom('forms').where('id', '=', gone.id).execute();
    assert.deepEqual(await rowsOf(gone.id), [0, 0]);
    assert.deepEqual(await rowsOf(kept.id), [3, 3]);
    assert.deepEqual(await rowsOf(ofB.id), [3, 3]);

    await db.deleteFrom('accounts').where('id', '=', b.accountId).execute();
    assert.deepEqual(await rowsOf(ofB.id), [0, 0]);
    assert.deepEqual(await rowsOf(kept.id), [3, 3]);
    assert.equal(Number(await orphans()), 0);
  });
});
