import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dialectName, withApps, type TestAccount, type TestApp } from './support/helpers.js';

// Many submissions at once go through one group commit on SQLite (src/db/write-batcher.ts):
// each must still stand or fall alone.
describe(`concurrent submissions (${dialectName})`, () => {
  let app: TestApp;
  let second: TestApp;
  let a: TestAccount;
  withApps((apps) => ({ app, second, a } = apps));

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

  it('deletes a submission once when several deletes of it arrive at once, through two apps', async () => {
    const form = (await a.post('/forms', { name: 'Deleted at once', fields: [{ type: 'text', label: 'Note' }] })).body;
    const ids: number[] = [];
    for (let i = 0; i < 10; i++)
      ids.push(
        (await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: `n${i}` }] })).body
          .id,
      );
    const replies = await Promise.all(
      ids.flatMap((id) => [
        a.delete(`/submissions/${id}`),
        a.delete(`/submissions/${id}`),
        second.request('DELETE', `/api/v2025/submissions/${id}`, { token: a.token }),
      ]),
    );
    for (let i = 0; i < ids.length; i++) {
      const statuses = replies.slice(3 * i, 3 * i + 3).map((r) => r.status);
      assert.deepEqual(
        [...statuses].sort(),
        [200, 404, 404],
        `submission ${ids[i]}: ${replies
          .slice(3 * i, 3 * i + 3)
          .map((r) => r.text)
          .join(' ')}`,
      );
    }
    assert.equal((await a.get(`/forms/${form.id}`)).body.submissionsCount, 0, 'counted down once each');
    assert.equal((await a.get(`/forms/${form.id}/submissions`)).body.total, 0);
    const made = await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: 'after' }] });
    assert.equal(made.status, 200);
    assert.equal((await a.get(`/forms/${form.id}`)).body.submissionsCount, 1);
  });

  it('keeps the keyword index right when one burst edits, deletes and creates the same submissions', async () => {
    // On SQLite a batch writes its full-text rows at its end, one per submission: the last
    // edit's, none for a deletion, and none for a job that failed.
    const form = (
      await a.post('/forms', {
        name: 'Index burst',
        fields: [
          { type: 'text', label: 'Note' },
          { type: 'email', label: 'Email', unique: true },
        ],
      })
    ).body;
    const [note, email] = form.fields.map((f: any) => f.id);
    const create = (word: string, address: string) =>
      a.post(`/forms/${form.id}/submissions`, {
        fields: [
          { id: note, value: word },
          { id: email, value: address },
        ],
      });
    const s1 = (await create('alphaword', 'one@example.com')).body;
    const s2 = (await create('betaword', 'two@example.com')).body;
    const burst = await Promise.all([
      a.put(`/submissions/${s1.id}`, { fields: [{ id: note, value: 'gammaword' }] }),
      a.put(`/submissions/${s1.id}`, { fields: [{ id: note, value: 'deltaword' }] }),
      a.delete(`/submissions/${s2.id}`),
      create('epsilonword', 'three@example.com'),
      create('zetaword', 'three@example.com'),
    ]);
    assert.deepEqual(
      burst.slice(0, 3).map((r) => r.status),
      [200, 200, 200],
      burst.map((r) => r.text).join('\n'),
    );
    // Of the two creates with one email, one went in and the other failed alone.
    const created = burst.slice(3).filter((r) => r.status === 200);
    assert.equal(created.length, 1);
    const found = async (word: string) =>
      (await a.get(`/forms/${form.id}/submissions?keyword=${word}`)).body.submissions.map((s: any) => s.id);
    const kept = (await a.get(`/submissions/${s1.id}`)).body.data.find((d: any) => d.field === note).value;
    assert.ok(kept === 'gammaword' || kept === 'deltaword', kept);
    assert.deepEqual(await found(kept), [s1.id]);
    assert.deepEqual(await found(kept === 'gammaword' ? 'deltaword' : 'gammaword'), []);
    assert.deepEqual(await found('alphaword'), []);
    assert.deepEqual(await found('betaword'), []);
    const word = created[0]!.body.data.find((d: any) => d.field === note).value;
    assert.deepEqual(await found(word), [created[0]!.body.id]);
    assert.deepEqual(await found(word === 'epsilonword' ? 'zetaword' : 'epsilonword'), []);
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

  it('lets exactly submissionLimit creates in when many more arrive at once, through two apps', async () => {
    const LIMIT = 7;
    const form = (
      await a.post('/forms', {
        name: 'Limited',
        settings: { submissionLimit: LIMIT },
        fields: [{ type: 'text', label: 'Note' }],
      })
    ).body;
    const note = form.fields[0].id;
    const viaSecond = (body: unknown) =>
      second.request('POST', `/api/v2025/forms/${form.id}/submissions`, { token: a.token, body });
    const replies = await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const body = { fields: [{ id: note, value: `note ${i}` }] };
        return i % 2 === 0 ? a.post(`/forms/${form.id}/submissions`, body) : viaSecond(body);
      }),
    );
    const ok = replies.filter((r) => r.status === 200);
    assert.equal(ok.length, LIMIT, replies.map((r) => r.status).join(' '));
    for (const r of replies.filter((r) => r.status !== 200)) {
      assert.equal(r.status, 409, r.text);
      assert.equal(r.body.code, 'form_full');
    }
    assert.equal((await a.get(`/forms/${form.id}/submissions?pageSize=100`)).body.total, LIMIT);
    assert.equal((await a.get(`/forms/${form.id}`)).body.submissionsCount, LIMIT);

    // A deletion makes room for exactly one more.
    assert.equal((await a.delete(`/submissions/${ok[0]!.body.id}`)).status, 200);
    const again = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 === 0 ? a.post(`/forms/${form.id}/submissions`, { fields: [] }) : viaSecond({ fields: [] })).then(
          (r) => r.status,
        ),
      ),
    );
    assert.deepEqual(again.sort(), [200, ...Array<number>(9).fill(409)]);
  });

  it('lets exactly submissionLimit hosted-page submits in when many more arrive at once', async () => {
    const LIMIT = 4;
    const form = (
      await a.post('/forms', {
        name: 'Limited page',
        settings: { submissionLimit: LIMIT },
        fields: [{ type: 'text', label: 'Name' }],
      })
    ).body;
    const path = new URL(form.url).pathname;
    const tokens: string[] = [];
    for (let i = 0; i < 30; i++) {
      const page = await app.request('GET', path);
      assert.equal(page.status, 200);
      tokens.push(
        /name="_fw" value="([^"]*)"/
          .exec(page.text)![1]!
          .replace(/&#(\d+);/g, (_, c: string) => String.fromCharCode(Number(c))),
      );
    }
    // Past the page's minimum time to submit.
    app.server.ctx.clock.advance(4000);
    const replies = await Promise.all(
      tokens.map((token, i) =>
        app.request('POST', path, {
          raw: new URLSearchParams({ _fw: token, website: '', [`f${form.fields[0].id}`]: `Person ${i}` }).toString(),
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
      ),
    );
    const statuses = replies.map((r) => r.status).sort();
    // A submit that finds the form full gets the closed page (403).
    assert.deepEqual(statuses, [...Array<number>(LIMIT).fill(200), ...Array<number>(30 - LIMIT).fill(403)]);
    assert.equal((await a.get(`/forms/${form.id}`)).body.submissionsCount, LIMIT);
  });
});
