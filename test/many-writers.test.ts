/**
 * Thousands of submissions to one form from many connections at once, through two
 * processes' worth of apps on one database (each its own pool; on PostgreSQL every write is
 * a transaction of its own, see src/modules/forms/counts.ts), with edits and deletes among
 * them and the clock moving across hours. Afterwards the count, the hourly counts, the
 * unique values and every row must be exactly what the answered requests say.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as repo from '../src/modules/submissions/repository.js';
import { dialectName, withApps, type TestAccount, type TestApp } from './support/helpers.js';
import { assertHourBounds } from './support/submission-fixtures.js';

// SQLite has one writer: fewer, so that the suite stays quick.
const COUNT = dialectName === 'postgres' ? 3000 : 600;
const IN_FLIGHT = 64;
const DUPLICATES = 25;
const MINUTE = 60_000;

/** Runs the tasks with at most limit of them at once; their results in order. */
async function pooled<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await tasks[i]!();
      }
    }),
  );
  return results;
}

describe(`many writers to one form (${dialectName})`, () => {
  let app: TestApp;
  let second: TestApp;
  let a: TestAccount;
  withApps((apps) => ({ app, second, a } = apps));

  it('keeps the count, the unique values and every row right', async () => {
    const form = (
      await a.post('/forms', {
        name: 'Crowd',
        fields: [
          { type: 'email', label: 'Email', unique: true },
          { type: 'text', label: 'Note' },
        ],
      })
    ).body as { id: number; fields: { id: number }[] };
    const [email, note] = form.fields.map((f) => f.id) as [number, number];
    // Every tenth body reuses one of DUPLICATES addresses: each of those gets in once.
    const addressOf = (i: number) => (i % 10 === 0 ? `dup${(i / 10) % DUPLICATES}@example.com` : `p${i}@example.com`);
    const post = (i: number) => {
      const target = i % 2 === 0 ? app : second;
      return target.request<{ id: number }>('POST', `/api/v2025/forms/${form.id}/submissions`, {
        token: a.token,
        body: {
          fields: [
            { id: email, value: addressOf(i) },
            { id: note, value: `note ${i}` },
          ],
        },
      });
    };

    // Four waves; between them both processes' clocks move on 25 minutes, so rows fall in several hours.
    const expected = new Map<number, { address: string; note: string }>();
    const waves = 4;
    const perWave = COUNT / waves;
    const deleted: number[] = [];
    for (let w = 0; w < waves; w++) {
      const indexes = Array.from({ length: perWave }, (_, k) => w * perWave + k);
      // Edits and deletes of the previous waves' rows go in with this wave's creates.
      const earlier = [...expected.keys()];
      const toDelete = earlier.filter((_, k) => k % 7 === 3);
      const toEdit = earlier.filter((_, k) => k % 7 === 5);
      const kinds: (() => Promise<void>)[] = [
        ...indexes.map((i) => async () => {
          const res = await post(i);
          if (res.status === 200) expected.set(res.body.id, { address: addressOf(i), note: `note ${i}` });
          else {
            assert.ok(res.status === 400 || res.status === 409, `${res.status} ${res.text}`);
            assert.match(addressOf(i), /^dup/, `only a duplicate address is refused: ${res.text}`);
          }
        }),
        ...toDelete.map((id) => async () => {
          const res = await a.delete(`/submissions/${id}`);
          assert.equal(res.status, 200, res.text);
          expected.delete(id);
          deleted.push(id);
        }),
        ...toEdit.map((id) => async () => {
          const res = await a.put(`/submissions/${id}`, { fields: [{ id: note, value: `edited ${id}` }] });
          assert.equal(res.status, 200, res.text);
          // The map may already hold it deleted by another task: edits only touch live rows.
          const row = expected.get(id);
          if (row) row.note = `edited ${id}`;
        }),
      ];
      // Interleaved (a fixed shuffle): creates, deletes and edits in flight together.
      const tasks = kinds
        .map((task, k) => ({ task, key: (k * 7919) % kinds.length }))
        .sort((x, y) => x.key - y.key)
        .map((t) => t.task);
      await pooled(tasks, IN_FLIGHT);
      app.server.ctx.clock.advance(25 * MINUTE);
      second.server.ctx.clock.advance(25 * MINUTE);
    }

    const total = expected.size;
    assert.ok(total > COUNT * 0.7, `${total} rows kept`);
    // The count, as each process reads it (each keeps its own cached form and totals).
    for (const target of [app, second]) {
      const get = (path: string) => target.request<any>('GET', `/api/v2025${path}`, { token: a.token });
      assert.equal((await get(`/forms/${form.id}`)).body.submissionsCount, total);
      assert.equal((await get(`/forms/${form.id}/submissions/count`)).body.count, total);
      assert.equal((await get(`/forms/${form.id}/submissions?pageSize=1`)).body.total, total);
      const list = (await get('/forms?pageSize=100')).body.forms.find((f: any) => f.id === form.id);
      assert.equal(list.submissionsCount, total);
    }

    // Every row, as sent (or as edited), and no other.
    const db = app.server.ctx.db;
    const rows = await db
      .selectFrom('submissions')
      .select(['id', 'data', 'created_at'])
      .where('form_id', '=', form.id)
      .execute();
    assert.equal(rows.length, total);
    for (const row of rows) {
      const want = expected.get(row.id);
      assert.ok(want, `row ${row.id} was not acknowledged, or was deleted`);
      const data = JSON.parse(row.data) as Record<string, unknown>;
      assert.equal(data[email], want.address);
      assert.equal(data[note], want.note);
    }

    // The unique values: one per row, each address once, each duplicate address at most once.
    const unique = await db
      .selectFrom('submission_unique_values')
      .select(['submission_id', 'value_norm'])
      .where('form_id', '=', form.id)
      .execute();
    assert.equal(unique.length, total);
    assert.equal(new Set(unique.map((u) => u.value_norm)).size, total);
    assert.deepEqual(new Set(unique.map((u) => u.submission_id)), new Set(expected.keys()));
    for (let d = 0; d < DUPLICATES; d++) {
      const holders = [...expected.values()].filter((r) => r.address === `dup${d}@example.com`).length;
      assert.ok(holders <= 1, `dup${d}@example.com held by ${holders}`);
    }

    // The counts' own rows add up to the rows, in total and per hour.
    const sum = async (table: 'form_submission_counts' | 'submission_hours') =>
      Number(
        (
          await db
            .selectFrom(table)
            .select((eb) => eb.fn.sum<number>('n').as('n'))
            .where('form_id', '=', form.id)
            .executeTakeFirstOrThrow()
        ).n,
      );
    assert.equal(await sum('form_submission_counts'), total);
    assert.equal(await sum('submission_hours'), total);

    // Time-range totals (whole hours from the hourly counts, edges from rows) against the rows themselves.
    const times = rows.map((r) => r.created_at).sort((x, y) => x - y);
    const first = times[0]!;
    const last = times[times.length - 1]!;
    const rowsIn = (from?: number, to?: number) =>
      times.filter((t) => (from === undefined || t >= from) && (to === undefined || t <= to)).length;
    const ranges: [number | undefined, number | undefined][] = [
      [undefined, undefined],
      [first, last],
      [first - 90 * MINUTE, last + 90 * MINUTE],
      [first + 7 * MINUTE, undefined],
      [undefined, last - 31 * MINUTE],
      [first + 13 * MINUTE, last - 17 * MINUTE],
      [first + 61 * MINUTE, first + 62 * MINUTE],
    ];
    const hour = 3_600_000;
    ranges.push([Math.ceil(first / hour) * hour, Math.floor(last / hour) * hour - 1]);
    for (const [from, to] of ranges) {
      assert.equal(await repo.countSubmissions(db, form.id, from, to), rowsIn(from, to), `range ${from} to ${to}`);
    }

    // Every hour's id bounds, as the create paths wrote them, hold its rows' ids; the pages of
    // a range, found from those bounds, are the range's ids in id order.
    await assertHourBounds(db, form.id);
    const byId = [...rows].sort((x, y) => x.id - y.id);
    for (const [from, to] of ranges)
      for (const order of ['asc', 'desc'] as const) {
        const inRange = byId
          .filter((r) => (from === undefined || r.created_at >= from) && (to === undefined || r.created_at <= to))
          .map((r) => r.id);
        if (order === 'desc') inRange.reverse();
        for (const offset of [0, 40]) {
          const page = await repo.listSubmissions(
            db,
            a.accountId,
            form.id,
            { from, to, terms: [] },
            { order, limit: 30, offset },
          );
          assert.deepEqual(
            page.rows.map((r) => r.id),
            inRange.slice(offset, offset + 30),
            `page of ${from} to ${to}, ${order}, offset ${offset}`,
          );
        }
      }
    assert.ok(deleted.length > 0);
  });
});
