/**
 * A deleted field's values stay in the submissions, hidden from every read; a search must not
 * find them either. Deleting a field, or changing what its values show as (its type, its
 * options' labels), enqueues the form's reindex, which the worker runs in batches.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker, type Worker } from '../src/jobs/worker.js';
import { reindexBatch, reindexJob } from '../src/modules/submissions/reindex.js';
import { dialectName, expectStatus, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

describe(`search after a field is deleted or changed (${dialectName})`, () => {
  let app: TestApp;
  let worker: Worker;
  let a: TestAccount;

  before(async () => {
    app = await startTestApp({ WORKER_POLL_MS: '60000' });
    worker = createWorker(app.server.ctx, { kinds: jobKinds });
    a = await app.account();
  });
  after(() => app.close());

  const ids = async (formId: number, query: string): Promise<number[]> =>
    (
      expectStatus(await a.get(`/forms/${formId}/submissions?${query}`), 200, query).submissions as { id: number }[]
    ).map((s) => s.id);

  it("takes a deleted field's values out of keyword searches and pretty names, and keeps the rest", async () => {
    const form = expectStatus(
      await a.post('/forms', {
        name: 'Reindexed',
        fields: [
          { type: 'name', label: 'Name' },
          { type: 'text', label: 'Secret' },
          { type: 'email', label: 'Email', unique: true },
        ],
      }),
      200,
      'form',
    );
    const [name, secret, email] = form.fields.map((f: { id: number }) => f.id) as [number, number, number];
    const made: number[] = [];
    for (let i = 0; i < 3; i++) {
      const s = expectStatus(
        await a.post(`/forms/${form.id}/submissions`, {
          fields: [
            { id: name, value: { first: 'Ada', last: `Lovelace${i}` } },
            { id: secret, value: `zebracode${i} common` },
            { id: email, value: `ada${i}@example.com` },
          ],
        }),
        200,
        'submit',
      );
      made.push(s.id);
    }
    assert.deepEqual(await ids(form.id, 'keyword=zebracode1'), [made[1]]);
    expectStatus(await a.delete(`/forms/${form.id}/fields/${secret}`), 200, 'delete the field');
    expectStatus(await a.delete(`/forms/${form.id}/fields/${name}`), 200, 'delete the name field');
    await worker.runDue();

    assert.deepEqual(await ids(form.id, 'keyword=zebracode1'), [], 'the deleted field is not searched');
    assert.deepEqual(await ids(form.id, 'keyword=common'), []);
    assert.deepEqual(await ids(form.id, 'keyword=lovelace2'), [], 'nor the deleted name');
    assert.deepEqual(await ids(form.id, 'keyword=ada2'), [made[2]], 'the email still is');
    const one = expectStatus(await a.get(`/submissions/${made[2]}`), 200, 'read');
    assert.equal(one.prettyName, 'ada2@example.com', 'the pretty name falls to the email');
    // The unique value stays: the same address is still refused.
    const again = await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: email, value: 'ada0@example.com' }] });
    expectStatus(again, 400, 'the same address', 'not_unique');
  });

  it('finds a radio value by its new label once the option is relabelled', async () => {
    const form = expectStatus(
      await a.post('/forms', {
        name: 'Relabelled',
        fields: [
          {
            type: 'radio',
            label: 'Plan',
            options: [
              { label: 'Basic tier', value: 'b' },
              { label: 'Gold', value: 'g' },
            ],
          },
        ],
      }),
      200,
      'form',
    );
    const plan = form.fields[0].id as number;
    const s = expectStatus(
      await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: plan, value: 'b' }] }),
      200,
      'submit',
    );
    assert.deepEqual(await ids(form.id, 'keyword=basic'), [s.id]);
    expectStatus(
      await a.put(`/forms/${form.id}/fields/${plan}`, {
        options: [
          { label: 'Starter', value: 'b' },
          { label: 'Gold', value: 'g' },
        ],
      }),
      200,
      'relabel',
    );
    await worker.runDue();
    assert.deepEqual(await ids(form.id, 'keyword=basic'), []);
    assert.deepEqual(await ids(form.id, 'keyword=starter'), [s.id]);
  });

  it("finds a value by its smart list option's new label once the option is relabelled", async () => {
    const list = expectStatus(await a.post('/smartlists', { name: 'Regions' }), 201, 'list');
    const north = expectStatus(
      await a.post(`/smartlists/${list.id}/options`, { label: 'Northern quarter', value: 'n' }),
      201,
      'option',
    );
    const form = expectStatus(
      await a.post('/forms', { name: 'Listed', fields: [{ type: 'select', label: 'Region', smartList: list.id }] }),
      200,
      'form',
    );
    const field = form.fields[0].id as number;
    const s = expectStatus(
      await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: field, value: 'n' }] }),
      200,
      'submit',
    );
    assert.deepEqual(await ids(form.id, 'keyword=northern'), [s.id]);
    // An option added shows nothing anew: no reindex is queued for it.
    const queued = async () =>
      (
        await app.server.ctx.db
          .selectFrom('jobs')
          .select('id')
          .where('kind', '=', 'submissions.reindex')
          .where('state', '=', 'queued')
          .execute()
      ).length;
    const before = await queued();
    expectStatus(await a.post(`/smartlists/${list.id}/options`, { label: 'South', value: 's' }), 201, 'another option');
    assert.equal(await queued(), before);
    expectStatus(await a.put(`/smartlists/${list.id}/options/${north.id}`, { label: 'Upland' }), 200, 'relabel');
    assert.equal(await queued(), before + 1);
    await worker.runDue();
    assert.deepEqual(await ids(form.id, 'keyword=northern'), []);
    assert.deepEqual(await ids(form.id, 'keyword=upland'), [s.id]);
  });

  it('goes batch by batch from its checkpoint, and leaves an edit made meanwhile as its edit indexed it', async () => {
    const form = expectStatus(
      await a.post('/forms', {
        name: 'Batches',
        fields: [
          { type: 'text', label: 'A' },
          { type: 'text', label: 'B' },
        ],
      }),
      200,
      'form',
    );
    const [fa, fb] = form.fields.map((f: { id: number }) => f.id) as [number, number];
    const made: number[] = [];
    for (let i = 0; i < 5; i++)
      made.push(
        expectStatus(
          await a.post(`/forms/${form.id}/submissions`, {
            fields: [
              { id: fa, value: `kept${i}` },
              { id: fb, value: `gone${i}` },
            ],
          }),
          200,
          'submit',
        ).id,
      );
    expectStatus(await a.delete(`/forms/${form.id}/fields/${fb}`), 200, 'delete');
    const checkpoints: number[] = [];
    const batch = (after: number | undefined) =>
      reindexBatch(app.server.ctx, form.id, after, async (_trx, last) => void checkpoints.push(last), 2);
    assert.equal(await batch(undefined), made[1]);
    assert.deepEqual(await ids(form.id, 'keyword=gone0'), []);
    assert.deepEqual(await ids(form.id, 'keyword=gone3'), [made[3]], 'not reached yet');
    assert.equal(await batch(made[1]), made[3]);
    assert.equal(await batch(made[3]), undefined, 'the last, short batch');
    assert.deepEqual(checkpoints, [made[1], made[3], made[4]]);
    for (let i = 0; i < 5; i++) {
      assert.deepEqual(await ids(form.id, `keyword=gone${i}`), []);
      assert.deepEqual(await ids(form.id, `keyword=kept${i}`), [made[i]]);
    }
    await worker.runDue();
  });

  it('is queued once for changes made while its reindex waits, and again once that reindex has begun', async () => {
    const form = expectStatus(
      await a.post('/forms', {
        name: 'Once',
        fields: ['A', 'B', 'C', 'D'].map((label) => ({ type: 'text', label })),
      }),
      200,
      'form',
    );
    const [fa, fb, fc, fd] = form.fields.map((f: { id: number }) => f.id) as [number, number, number, number];
    const s = expectStatus(
      await a.post(`/forms/${form.id}/submissions`, {
        fields: [
          { id: fa, value: 'alphaword' },
          { id: fb, value: 'bravoword' },
          { id: fc, value: 'charlieword' },
          { id: fd, value: 'deltaword' },
        ],
      }),
      200,
      'submit',
    );
    const reindexes = async (state: 'queued' | 'running') =>
      (
        await app.server.ctx.db
          .selectFrom('jobs')
          .select('id')
          .where('kind', '=', 'submissions.reindex')
          .where('state', '=', state)
          .where('payload', '=', JSON.stringify({ formId: form.id }))
          .execute()
      ).map((j) => j.id);
    expectStatus(await a.delete(`/forms/${form.id}/fields/${fb}`), 200, 'delete B');
    expectStatus(await a.delete(`/forms/${form.id}/fields/${fc}`), 200, 'delete C');
    const [waiting, ...more] = await reindexes('queued');
    assert.ok(waiting !== undefined);
    assert.deepEqual(more, [], 'the second delete is left to the reindex that waits');
    // Begun (as a worker's claim marks it), it may have passed rows already: a change now needs its own.
    await app.server.ctx.db
      .updateTable('jobs')
      .set({ state: 'running', attempts: 1 })
      .where('id', '=', waiting)
      .execute();
    expectStatus(await a.delete(`/forms/${form.id}/fields/${fd}`), 200, 'delete D');
    const [next, ...others] = await reindexes('queued');
    assert.ok(next !== undefined && next !== waiting);
    assert.deepEqual(others, []);
    await app.server.ctx.db.updateTable('jobs').set({ state: 'done' }).where('id', '=', waiting).execute();
    await worker.runDue();
    for (const word of ['bravoword', 'charlieword', 'deltaword'])
      assert.deepEqual(await ids(form.id, `keyword=${word}`), [], word);
    assert.deepEqual(await ids(form.id, 'keyword=alphaword'), [s.id]);
  });

  it('lets the event loop take a turn between its batches', async () => {
    const form = expectStatus(
      await a.post('/forms', { name: 'Turns', fields: [{ type: 'text', label: 'Gone' }] }),
      200,
      'form',
    );
    const field = form.fields[0].id as number;
    // Three batches of 200.
    for (let i = 0; i < 401; i++)
      expectStatus(
        await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: field, value: `v${i}` }] }),
        200,
        'submit',
      );
    // A timer's turn of the loop counts up; on SQLite a batch's statements are synchronous, so
    // without a turn between batches the count stood still from the first checkpoint to the last.
    let turns = 0;
    let counting = true;
    const count = () => {
      turns++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const seen: number[] = [];
    try {
      await reindexJob.handler(
        app.server.ctx,
        { id: 0, kind: reindexJob.name, payload: { formId: form.id }, progress: undefined, attempt: 1 },
        {
          signal: new AbortController().signal,
          checkpoint: async () => void seen.push(turns),
          replacePayload: async () => undefined,
          atEnd: () => undefined,
        },
      );
    } finally {
      counting = false;
    }
    assert.equal(seen.length, 3);
    assert.ok(seen[0]! < seen[1]! && seen[1]! < seen[2]!, `turns at each checkpoint: ${seen.join(', ')}`);
    await worker.runDue();
  });
});
