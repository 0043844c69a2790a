/**
 * The searches use their indexes: the queries that the repository builds are captured
 * as it runs them and explained on the test database, filled with a few thousand rows
 * and analyzed. Then the export streams that many rows in batches, in order, each once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { fieldToken, formToken } from '../src/modules/submissions/keywords.js';
import * as idempotency from '../src/modules/idempotency/repository.js';
import * as repo from '../src/modules/submissions/repository.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { QueryRecorder } from './support/query-recorder.js';
import { at, ok, rewriteHours } from './support/submission-fixtures.js';

const ROWS = 3000;
const BASE = at('2026-01-01T00:00:00Z');
const MINUTE = 60_000;

describe(`submission query plans and streaming (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let form: any;
  let fieldId: number;
  let other: any;

  before(async () => {
    app = await startTestApp();
    a = await app.account('Planner');
    const db = app.server.db.kysely;
    form = await ok(a.post('/forms', { name: 'Bulk', fields: [{ type: 'text', label: 'Code' }] }));
    fieldId = form.fields[0].id;
    // A second form with rows too, so that the form's own rows are a fraction of the table.
    other = await ok(a.post('/forms', { name: 'Other bulk', fields: [{ type: 'text', label: 'Code' }] }));

    // Test setup straight into the tables, shaped as the service writes them: row i of the
    // bulk form holds "v<i>" in its field, the words "common" and "word<i>", and was created i minutes after BASE.
    for (const [target, count] of [
      [form, ROWS],
      [other, ROWS],
    ] as const) {
      for (let start = 0; start < count; start += 500) {
        const rows = Array.from({ length: Math.min(500, count - start) }, (_, k) => {
          const i = start + k;
          return {
            account_id: a.accountId,
            form_id: target.id,
            created_at: BASE + i * MINUTE,
            updated_at: BASE + i * MINUTE,
            user_agent: 'bulk',
            remote_addr: '127.0.0.1',
            data: JSON.stringify({ [target.fields[0].id]: `v${i}` }),
            pretty_name: null,
          };
        });
        await db.insertInto('submissions').values(rows).execute();
      }
      // The counts as the service keeps them (src/modules/forms/counts.ts): the total, and per hour.
      await db
        .insertInto('form_submission_counts')
        .values({ form_id: target.id, slot: 0, n: count, version: 1 })
        .execute();
      await rewriteHours(app, target.id);
    }
    // Each row's tokens from its own value, "v" followed by the row's position.
    const rows = await db.selectFrom('submissions').select(['id', 'form_id', 'data']).execute();
    const fieldOf = new Map([
      [form.id, fieldId],
      [other.id, other.fields[0].id],
    ]);
    const tokensOf = (r: { form_id: number; data: string }) => {
      const v = Object.values(JSON.parse(r.data) as Record<string, string>)[0]!;
      return ['common', `word${v.slice(1)}`, v, fieldToken(fieldOf.get(r.form_id)!, v), formToken(r.form_id)];
    };
    // The bulk form's field holds unique values, as if marked unique.
    for (let i = 0; i < rows.length; i += 500) {
      await db
        .insertInto('submission_unique_values')
        .values(
          rows.slice(i, i + 500).map((r) => ({
            submission_id: r.id,
            form_id: r.form_id,
            field_id: fieldOf.get(r.form_id)!,
            value_norm: tokensOf(r)[2]!,
          })),
        )
        .execute();
    }
    if (dialectName === 'postgres') {
      const idList = rows.map((r) => r.id);
      const tokenList = rows.map((r) => tokensOf(r).join(' '));
      await sql`UPDATE submissions SET search_vector = array_to_tsvector(string_to_array(t.tokens, ' '))
        FROM unnest(${idList}::int[], ${tokenList}::text[]) AS t(id, tokens) WHERE submissions.id = t.id`.execute(db);
      // As autovacuum would: the GIN index's pending list is merged and the statistics are fresh.
      await sql`VACUUM ANALYZE`.execute(db);
    } else {
      for (let i = 0; i < rows.length; i += 500) {
        await db
          .insertInto('submissions_fts')
          .values(rows.slice(i, i + 500).map((r) => ({ rowid: r.id, content: tokensOf(r).join(' ') })))
          .execute();
      }
      await sql`ANALYZE`.execute(db);
    }
  });
  after(() => app.close());

  /** The plans of every query that run makes through the repository, as text. */
  async function plansOf(
    run: (db: ReturnType<typeof app.server.db.kysely.withPlugin>) => Promise<unknown>,
  ): Promise<{ sql: string; plan: string }[]> {
    const db = app.server.db.kysely;
    const recorder = new QueryRecorder();
    await run(db.withPlugin(recorder));
    assert.ok(recorder.queries.length > 0, 'the repository ran no query');
    const out: { sql: string; plan: string }[] = [];
    const compiledAll = recorder.compiled(db);
    // Subqueries go through the plugin too; each is explained as part of its query.
    const shape = (text: string) => text.replace(/\$\d+/g, '?');
    const roots = compiledAll.filter(
      (c) => !compiledAll.some((o) => o !== c && o.sql.length > c.sql.length && shape(o.sql).includes(shape(c.sql))),
    );
    for (const compiled of roots) {
      const explain = dialectName === 'postgres' ? `EXPLAIN ${compiled.sql}` : `EXPLAIN QUERY PLAN ${compiled.sql}`;
      const result = await db.executeQuery<Record<string, unknown>>(
        CompiledQuery.raw(explain, [...compiled.parameters]),
      );
      const plan = result.rows.map((r) => String(r['QUERY PLAN'] ?? r.detail)).join('\n');
      out.push({ sql: compiled.sql, plan });
      if (process.env.FORMWORK_SHOW_PLANS) console.log(`${compiled.sql}\n${plan}\n`);
    }
    return out;
  }

  // A page is found through an index first, then its rows are read by primary key: that
  // second query is the one kind allowed not to use the index under test.
  const byPrimaryKey = (p: { sql: string; plan: string }) =>
    /where "submissions"\."id" in \((\?|\$\d+)(, (\?|\$\d+))*\)$/.test(p.sql) &&
    (dialectName === 'postgres'
      ? /submissions_pkey/.test(p.plan)
      : /^SEARCH submissions USING INTEGER PRIMARY KEY \(rowid=\?\)$/.test(p.plan));

  function assertEachUses(plans: { sql: string; plan: string }[], pattern: RegExp, what: string): void {
    const searches = plans.filter((p) => !byPrimaryKey(p));
    assert.ok(searches.length > 0, `${what}: no query besides reads by primary key`);
    for (const p of searches) assert.match(p.plan, pattern, `${what}\n${p.sql}\n--- plan:\n${p.plan}`);
  }

  function assertNoFullScan(plans: { sql: string; plan: string }[], what: string): void {
    for (const p of plans) {
      const full = dialectName === 'postgres' ? /Seq Scan on submissions\b/ : /^SCAN submissions$/m;
      assert.doesNotMatch(p.plan, full, `${what} reads the whole table\n${p.sql}\n--- plan:\n${p.plan}`);
    }
  }

  const page = { order: 'desc' as const, limit: 25, offset: 0 };
  const FTS =
    dialectName === 'postgres' ? /Bitmap Index Scan on submissions_search/ : /submissions_fts VIRTUAL TABLE INDEX/;

  it('keyword search uses the full-text index', async () => {
    const plans = await plansOf((db) =>
      repo.listSubmissions(db, a.accountId, form.id, { terms: [{ token: 'word1234', prefix: true }] }, page),
    );
    assert.equal(plans.filter((p) => !byPrimaryKey(p)).length, 2, 'the page and its count');
    assertEachUses(plans, FTS, 'keyword');
    assertNoFullScan(plans, 'keyword');
  });

  it('keyword search across the forms of an account uses the full-text index', async () => {
    const plans = await plansOf((db) =>
      repo.listSubmissions(db, a.accountId, undefined, { terms: [{ token: 'word1234', prefix: true }] }, page),
    );
    assertEachUses(plans, FTS, 'account search');
    assertNoFullScan(plans, 'account search');
  });

  it('field search uses the full-text index, for whole values and for starts of values', async () => {
    for (const term of [
      { token: fieldToken(fieldId, 'v1234'), prefix: false },
      { token: fieldToken(fieldId, 'v123'), prefix: true },
    ]) {
      const plans = await plansOf((db) => repo.listSubmissions(db, a.accountId, form.id, { terms: [term] }, page));
      assertEachUses(plans, FTS, `field search ${JSON.stringify(term)}`);
      assertNoFullScan(plans, 'field search');
    }
  });

  it('the full-text index moves its pending entries in at 1 MB, not the default 4 (PostgreSQL)', async (t) => {
    if (dialectName !== 'postgres') return t.skip('a GIN index setting');
    const { rows } = await sql<{ options: string[] | null }>`
      SELECT reloptions AS options FROM pg_class WHERE relname = 'submissions_search'`.execute(app.server.db.kysely);
    assert.deepEqual(rows[0]?.options, ['gin_pending_list_limit=1024']);
  });

  it('a time range uses submissions_form_created', async () => {
    const range = { from: BASE + 100 * MINUTE, to: BASE + 130 * MINUTE, terms: [] };
    const listPlans = await plansOf((db) => repo.listSubmissions(db, a.accountId, form.id, range, page));
    const countPlans = await plansOf((db) => repo.countSubmissions(db, form.id, range.from, range.to));
    const exportPlans = await plansOf((db) => repo.nextBatch(db, a.accountId, form.id, range, undefined, 'asc', 500));
    for (const [what, plans] of [
      ['count', countPlans],
      ['export batch', exportPlans],
    ] as const) {
      assertEachUses(plans, /submissions_form_created/, `time range ${what}`);
      assertNoFullScan(plans, `time range ${what}`);
    }
    // The page: the bound of the range's ids from its hours (by their key), then the ids from
    // there in id order, by an index whose order that is (the form's ids; PostgreSQL may take
    // the primary key where the form holds most rows, as here), not by sorting the range, and
    // no read of the range's rows for its edge.
    assertRangePage(listPlans, 'max', 'time range list');
  });

  /** A range's page made from its hours' bound (aggregate) and one walk by an id index, as idsInRange makes it. */
  function assertRangePage(plans: { sql: string; plan: string }[], aggregate: 'max' | 'min', what: string): void {
    const byId = /submissions_form_id|submissions_pkey/;
    // By the hours' key; PostgreSQL reads a table of one page (this one's hundred hours) whole.
    const hours =
      dialectName === 'postgres'
        ? /submission_hours_pk|Seq Scan on submission_hours\b/
        : /sqlite_autoindex_submission_hours/;
    const edges = plans.filter((p) => /\b(max|min)\(/i.test(p.sql));
    assert.equal(edges.length, 1, `${what}: one edge read\n${edges.map((p) => p.sql).join('\n')}`);
    assert.match(edges[0]!.sql, aggregate === 'max' ? /max\("last_id"\)/ : /min\("first_id"\)/, what);
    assert.match(edges[0]!.plan, hours, `${what}'s edge\n${edges[0]!.sql}`);
    assertEachUses(
      plans.filter((p) => p !== edges[0]),
      new RegExp(`submissions_form_created|${byId.source}`),
      what,
    );
    assertNoFullScan(plans, what);
    const walks = plans.filter((p) => /\bcreated_at"? from/i.test(p.sql));
    assert.equal(walks.length, 1, `${what}: one walk`);
    assert.match(walks[0]!.plan, byId, `${what}'s walk\n${walks[0]!.sql}`);
    assert.doesNotMatch(walks[0]!.plan, /\bSort\b|TEMP B-TREE/, `${what}'s walk\n${walks[0]!.sql}`);
  }

  it("a range open at the page's far end is walked from its hours' bound, without reading the range's rows", async () => {
    // Oldest first since a time: the range's smallest id read from the time index would read
    // every index entry from that time on (here half the form); its hours bound it instead.
    const since = { from: BASE + 1510 * MINUTE, to: undefined, terms: [] };
    // The total as the service passes it (from the hours, countSubmissions): only the page's statements here.
    const asc = { ...page, order: 'asc' as const, knownTotal: ROWS - 1510 };
    const plans = await plansOf((db) => repo.listSubmissions(db, a.accountId, form.id, since, asc));
    assertRangePage(plans, 'min', 'since a time, oldest first');
    const { rows } = await repo.listSubmissions(app.server.db.kysely, a.accountId, form.id, since, asc);
    assert.deepEqual(
      rows.map((r) => r.created_at),
      Array.from({ length: page.limit }, (_, k) => BASE + (1510 + k) * MINUTE),
    );
  });

  it("a range open at the page's start is walked from the form's end, without reading the range's edge", async () => {
    // Newest first since a time: the walk starts at the form's newest row. Reading the range's
    // largest id would read every index entry from that time on (here half the form).
    const since = { from: BASE + 1500 * MINUTE, to: undefined, terms: [] };
    const plans = await plansOf((db) => repo.listSubmissions(db, a.accountId, form.id, since, page));
    assert.equal(plans.filter((p) => /\b(max|min)\(/i.test(p.sql)).length, 0, 'no edge read');
    const walks = plans.filter((p) => /\bcreated_at"? from/i.test(p.sql));
    assert.equal(walks.length, 1, 'one walk');
    assert.match(walks[0]!.plan, /submissions_form_id|submissions_pkey/, walks[0]!.sql);
    assert.doesNotMatch(walks[0]!.plan, /\bSort\b|TEMP B-TREE/, walks[0]!.sql);
    const { rows } = await repo.listSubmissions(app.server.db.kysely, a.accountId, form.id, since, page);
    assert.deepEqual(
      rows.map((r) => r.created_at),
      Array.from({ length: page.limit }, (_, k) => BASE + (ROWS - 1 - k) * MINUTE),
    );
  });

  it("a time range's page is its ids in id order, whatever the rows' times", async () => {
    // A form of its own: ids rise, and the times mostly with them, but some rows are out of
    // order (a later time on an earlier id and the reverse), and in one stretch every tenth
    // row's time is moved into a narrow range of its own, so that the ids near that range's
    // edge hold few of it and the page is made by sorting the range instead.
    const db = app.server.db.kysely;
    const own = await ok(a.post('/forms', { name: 'Out of order', fields: [{ type: 'text', label: 'Code' }] }));
    const count = 600;
    const timeOf = (i: number) => {
      if (i % 97 === 5) return BASE + (count - i) * MINUTE; // far from its neighbours
      if (i >= 300 && i % 10 === 0) return BASE + 10_000 * MINUTE + i; // the sparse range
      return BASE + i * MINUTE;
    };
    await db
      .insertInto('submissions')
      .values(
        Array.from({ length: count }, (_, i) => ({
          account_id: a.accountId,
          form_id: own.id,
          created_at: timeOf(i),
          updated_at: timeOf(i),
          user_agent: 'bulk',
          remote_addr: '127.0.0.1',
          data: '{}',
          pretty_name: null,
        })),
      )
      .execute();
    await rewriteHours(app, own.id);
    const truth = async (from: number | undefined, to: number | undefined, order: 'asc' | 'desc') => {
      let q = db.selectFrom('submissions').select('id').where('form_id', '=', own.id);
      if (from !== undefined) q = q.where('created_at', '>=', from);
      if (to !== undefined) q = q.where('created_at', '<=', to);
      return (await q.orderBy('id', order).execute()).map((r) => r.id);
    };
    const ranges: [number | undefined, number | undefined][] = [
      [BASE + 100 * MINUTE, BASE + 250 * MINUTE],
      [BASE + 10_000 * MINUTE, BASE + 10_001 * MINUTE], // the sparse range: sorted
      [BASE + 500 * MINUTE, undefined],
      [undefined, BASE + 40 * MINUTE],
      [BASE + 498 * MINUTE, BASE + 498 * MINUTE], // one minute: row 498, and row 102 moved there
      [BASE + 20_000 * MINUTE, undefined], // empty
    ];
    assert.equal((await truth(BASE + 498 * MINUTE, BASE + 498 * MINUTE, 'asc')).length, 2);
    for (const [from, to] of ranges)
      for (const order of ['desc', 'asc'] as const) {
        const all = await truth(from, to, order);
        for (const offset of [0, 25, 60]) {
          const { rows } = await repo.listSubmissions(
            db,
            a.accountId,
            own.id,
            { from, to, terms: [] },
            {
              order,
              limit: 25,
              offset,
            },
          );
          assert.deepEqual(
            rows.map((r) => r.id),
            all.slice(offset, offset + 25),
            `range ${from}..${to}, ${order}, offset ${offset}`,
          );
        }
      }
  });

  it('the unique check is an index lookup', async () => {
    const plans = await plansOf((db) => repo.findUniqueHolder(db, form.id, fieldId, 'v1'));
    assertEachUses(plans, /submission_unique_values_key/, 'unique check');
  });

  it('deleting expired idempotency keys reads the expired keys only, whatever the account keeps', async () => {
    // Every keyed request runs this delete: it must not read all of the account's keys.
    const db = app.server.db.kysely;
    for (let start = 0; start < ROWS; start += 500)
      await db
        .insertInto('idempotency_keys')
        .values(
          Array.from({ length: 500 }, (_, k) => ({
            account_id: a.accountId,
            idem_key: `key-${start + k}`,
            request_hash: 'h',
            state: 'done',
            created_at: BASE + (start + k) * MINUTE,
          })),
        )
        .execute();
    // No ANALYZE on SQLite: the service never runs it, and without statistics the planner took
    // the primary key (the account's every key) over an index on created_at alone.
    if (dialectName === 'postgres') await sql`ANALYZE idempotency_keys`.execute(db);
    const plans = await plansOf((d) => idempotency.deleteExpired(d, a.accountId, BASE + 10 * MINUTE));
    assertEachUses(plans, /idempotency_keys_account_created/, 'expired keys');
    const left = await db
      .selectFrom('idempotency_keys')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(left.n), ROWS - 10);
  });

  it('the searches find the right rows through the API', async () => {
    const list = async (q: string) => ok(a.get(`/forms/${form.id}/submissions?${q}`), q);
    const one = await list('keyword=word1234');
    assert.deepEqual([one.total, one.submissions.map((s: any) => s.data)], [1, [undefined]]);
    const byValue = await list(`search[0][fieldId]=${fieldId}&search[0][value]=V1234&data=true`);
    assert.deepEqual(
      byValue.submissions.map((s: any) => s.data[fieldId].value),
      ['v1234'],
    );
    const byStart = await list(`search[0][fieldId]=${fieldId}&search[0][value]=v123*&pageSize=100&order=asc&data=true`);
    assert.deepEqual(
      byStart.submissions.map((s: any) => s.data[fieldId].value),
      ['v123', 'v1230', 'v1231', 'v1232', 'v1233', 'v1234', 'v1235', 'v1236', 'v1237', 'v1238', 'v1239'],
    );
    assert.equal((await list('keyword=common')).total, ROWS, 'only the form asked for');
    assert.equal((await ok(a.get('/submissions?search=common'))).total, 2 * ROWS, 'every form of the account');
    const range = await list('minTime=2026-01-01 00:00:00&maxTime=2026-01-01 00:09:59&order=asc&data=true');
    assert.deepEqual(
      range.submissions.map((s: any) => s.data[fieldId].value),
      [...Array(10).keys()].map((i) => `v${300 + i}`),
      'EST: 05:00Z to 05:09:59.999Z',
    );
  });

  it('exports thousands of rows in batches, in order, each once', async () => {
    const fetchText = async (q: string) => {
      const res = await a.get(`/forms/${form.id}/submissions/export?${q}`);
      assert.equal(res.status, 200, res.text.slice(0, 300));
      return res.text;
    };
    const ndjson = (await fetchText('format=ndjson'))
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(ndjson.length, ROWS);
    const ids = ndjson.map((r) => r.id as number);
    assert.ok(
      ids.every((id, i) => i === 0 || id < ids[i - 1]!),
      'newest first, no repeats',
    );
    assert.ok(ndjson.every((r) => r.formId === form.id));

    const csv = (await fetchText('format=csv&order=asc')).split('\r\n');
    assert.equal(csv.at(-1), '');
    assert.equal(csv.length, ROWS + 2, 'a header, the rows and the final line end');
    const csvIds = csv.slice(1, -1).map((line) => Number(line.split(',')[0]));
    assert.deepEqual(csvIds, [...ids].reverse());
    assert.deepEqual(
      csv.slice(1, 3).map((l) => l.split(',').at(-1)),
      ['v0', 'v1'],
    );

    // A filter that keeps more than one batch: the words of rows 1000 to 1999.
    const filtered = (await fetchText('format=ndjson&keyword=word1&order=asc'))
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l).data[0].value as string);
    assert.equal(filtered.length, 1 + 10 + 100 + 1000, 'word1, word1x, word1xx and word1xxx');
    assert.equal(new Set(filtered).size, filtered.length);
    const timed = (await fetchText('format=ndjson&minTime=2026-01-01&maxTime=2026-01-01')).trimEnd().split('\n');
    assert.equal(timed.length, 24 * 60, 'a day in New York: 05:00Z to 04:59:59.999Z the next day');
  });
});
