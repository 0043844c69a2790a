import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

// Many submissions at once go through one group commit on SQLite (src/db/write-batcher.ts):
// each must still stand or fall alone.
describe(`concurrent submissions (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  before(async () => {
    app = await startTestApp();
    a = await app.account();
  });
  after(() => app.close());

  it('commits every good submission of a burst and refuses only the duplicates of a unique value', async () => {
    const form = (
      await a.post('/forms', {
        name: 'Burst',
        fields: [
          { type: 'email', label: 'Email', unique: true },
          { type: 'text', label: 'Note' },
        ],
      })
    ).body;
    const [email, note] = form.fields.map((f: any) => f.id);
    const bodies = Array.from({ length: 40 }, (_, i) => ({
      fields: [
        { id: email, value: i % 10 === 0 ? 'same@example.com' : `person${i}@example.com` },
        { id: note, value: `note ${i}` },
      ],
    }));
    const replies = await Promise.all(bodies.map((b) => a.post(`/forms/${form.id}/submissions`, b)));
    const ok = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status !== 200);
    assert.equal(ok.length, 37, 'all but three of the four same@example.com');
    assert.equal(refused.length, 3);
    for (const r of refused) assert.ok(r.status === 400 || r.status === 409, `${r.status} ${r.text}`);
    assert.equal(new Set(ok.map((r) => r.body.id)).size, 37);

    const list = await a.get(`/forms/${form.id}/submissions?pageSize=100`);
    assert.equal(list.body.total, 37);
    assert.equal((await a.get(`/forms/${form.id}`)).body.submissionsCount, 37);
    assert.equal(
      (await a.get(`/forms/${form.id}/submissions?search[0][fieldId]=${email}&search[0][value]=same@example.com`)).body
        .total,
      1,
    );
    for (const r of ok) assert.equal((await a.get(`/submissions/${r.body.id}`)).status, 200);
  });

  it('keeps totals of filtered lists right through creates, edits and deletes (they are cached per form)', async () => {
    const form = (await a.post('/forms', { name: 'Totals', fields: [{ type: 'text', label: 'Note' }] })).body;
    const note = form.fields[0].id;
    const total = async () => (await a.get(`/forms/${form.id}/submissions?keyword=marmalade`)).body.total;
    const byField = async () =>
      (await a.get(`/forms/${form.id}/submissions?search[0][fieldId]=${note}&search[0][value]=marmalade*`)).body.total;
    const first = (await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: note, value: 'marmalade toast' }] }))
      .body;
    assert.deepEqual([await total(), await byField()], [1, 1]);
    const second = (await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: note, value: 'marmalade jar' }] }))
      .body;
    assert.deepEqual([await total(), await byField()], [2, 2]);
    await a.put(`/submissions/${first.id}`, { fields: [{ id: note, value: 'plain toast' }] });
    assert.deepEqual([await total(), await byField()], [1, 1], 'an edit moves the total');
    await a.delete(`/submissions/${second.id}`);
    assert.deepEqual([await total(), await byField()], [0, 0]);
  });
});
