/**
 * Fills one form of the service's SQLite database with submissions (1,000,000 by default),
 * written straight into the file with prepared statements in big transactions: minutes
 * instead of hours through the API. Run it with the service stopped:
 *
 *   npx tsx bench/seed-submissions.ts --db data/formwork.db --form 1001 [--count 1000000] [--days 365]
 *
 * Each row is what POST /forms/{id}/submissions makes of submission body n of
 * bench/submission-data.ts, built with the service's own functions (readValue,
 * displayValue, searchKeys, normalize, words, fieldToken): the submissions row (data keyed
 * by field id, pretty_name), the submission_unique_values rows of fields marked unique,
 * the submissions_fts row (rowid = id; every word and field token) and the form's counts
 * (form_submission_counts, submission_hours with each hour's id bounds: slot 0, the one SQLite writes). created_at rises with the id, spread over the last `days` days.
 * storedSubmission() mirrors searchable() in src/modules/submissions/indexing.ts;
 * compareWithService() checks it against rows the running service wrote, so that a change
 * there shows up as a failed benchmark rather than as a benchmark of other data.
 *
 * Prints the time taken and, as the last line of stdout, a JSON SeedResult with the exact
 * number of rows that the benchmark's keyword and field search must find.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import type { FieldRow } from '../src/db/schema.js';
import { toDefinition } from '../src/modules/fields/definition.js';
import { fieldToken } from '../src/modules/submissions/keywords.js';
import { prepareSubmission } from '../src/modules/submissions/indexing.js';
import { normalize, type FieldForValues } from '../src/modules/submissions/values.js';
import { clientOf, CRITERIA, fieldIdsOf, KEYWORD, submissionInput, type FieldInput } from './submission-data.js';

export interface UniqueValueRow {
  fieldId: number;
  norm: string;
}

export interface StoredSubmission {
  data: string;
  prettyName: string | null;
  /** The submissions_fts content: every distinct word and field token, in order of first appearance. */
  tokens: string[];
  /** submission_unique_values rows: fields marked unique. */
  unique: UniqueValueRow[];
}

/** The form's fields as the service loads them (listFields order: display_order, id). */
export function loadFields(db: Database.Database, formId: number): FieldForValues[] {
  const rows = db
    .prepare('SELECT * FROM fields WHERE form_id = ? ORDER BY display_order, id')
    .all(formId) as FieldRow[];
  return rows.map((r) => ({ id: r.id, ...toDefinition(r) }));
}

/** What the service stores for one request body: the service's own prepareSubmission(). */
export function storedSubmission(
  formId: number,
  fields: FieldForValues[],
  byId: Map<number, FieldForValues>,
  inputs: FieldInput[],
): StoredSubmission {
  const write = prepareSubmission({ formId, fields, byId }, inputs, new Map(), Date.now());
  // The bench form is not encrypted, so its data is the JSON itself.
  if (typeof write.data !== 'string') throw new Error('the seeder writes plain forms only');
  return { data: write.data, prettyName: write.prettyName, tokens: write.tokens, unique: write.unique };
}

/** Tables the seeder writes besides submissions and the FTS index; any other table with submission rows is a change it does not know. */
const SUBMISSION_TABLES = new Set(['submission_unique_values']);

/**
 * Compares what the service wrote for submission `id` (sent as `inputs`) with what
 * storedSubmission() makes of the same body; returns the differences (none: identical).
 * The FTS index is contentless, so its tokens are read back through a temporary fts5vocab table.
 */
export function compareWithService(file: string, id: number, inputs: FieldInput[]): string[] {
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 5000');
    const row = db.prepare('SELECT form_id, data, pretty_name FROM submissions WHERE id = ?').get(id) as
      { form_id: number; data: string; pretty_name: string | null } | undefined;
    if (!row) return [`submission ${id} is not in the database`];
    const fields = loadFields(db, row.form_id);
    const expected = storedSubmission(row.form_id, fields, new Map(fields.map((f) => [f.id, f])), inputs);
    const problems: string[] = [];
    if (row.data !== expected.data) problems.push(`data: service ${row.data} vs seeder ${expected.data}`);
    if (row.pretty_name !== expected.prettyName)
      problems.push(`pretty_name: service ${row.pretty_name} vs seeder ${expected.prettyName}`);
    const unique = db
      .prepare(
        'SELECT form_id, field_id, value_norm FROM submission_unique_values WHERE submission_id = ? ORDER BY rowid',
      )
      .all(id) as { form_id: number; field_id: number; value_norm: string }[];
    const got = JSON.stringify(unique.map((v) => [v.form_id, v.field_id, v.value_norm]));
    const want = JSON.stringify(expected.unique.map((v) => [row.form_id, v.fieldId, v.norm]));
    if (got !== want) problems.push(`submission_unique_values: service ${got} vs seeder ${want}`);
    db.exec("CREATE VIRTUAL TABLE temp.bench_fts_terms USING fts5vocab(main, 'submissions_fts', 'instance')");
    const terms = (
      db.prepare('SELECT term FROM temp.bench_fts_terms WHERE doc = ? ORDER BY "offset"').all(id) as { term: string }[]
    ).map((t) => t.term);
    if (terms.join(' ') !== expected.tokens.join(' '))
      problems.push(`submissions_fts: service "${terms.join(' ')}" vs seeder "${expected.tokens.join(' ')}"`);
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
      .all() as { name: string }[];
    for (const { name } of tables) {
      if (SUBMISSION_TABLES.has(name)) continue;
      const columns = db.prepare('SELECT name FROM pragma_table_info(?)').all(name) as { name: string }[];
      if (!columns.some((c) => c.name === 'submission_id')) continue;
      const n = (
        db.prepare(`SELECT count(*) AS n FROM "${name.replace(/"/g, '""')}" WHERE submission_id = ?`).get(id) as {
          n: number;
        }
      ).n;
      if (n > 0) problems.push(`the service wrote ${n} row(s) into ${name}, which the seeder does not fill`);
    }
    return problems;
  } finally {
    db.close();
  }
}

export interface SeedOptions {
  file: string;
  formId: number;
  count: number;
  /** created_at spreads over this many days before now. */
  days?: number;
  /** Submission bodies used are firstBody, firstBody + 1, ...; keep them apart from the POST benchmark's. */
  firstBody?: number;
  log?: (message: string) => void;
}

export interface SeedResult {
  formId: number;
  count: number;
  seconds: number;
  firstId: number;
  lastId: number;
  firstCreated: number;
  lastCreated: number;
  uniqueRows: number;
  keyword: string;
  /** Submissions that a keyword search for `keyword` must find (a word of theirs starts with it). */
  keywordMatches: number;
  criteria: { fieldId: number; value: string }[];
  /** Submissions that hold every criterion. */
  criteriaMatches: number;
}

const DAY_MS = 86_400_000;

export function seedSubmissions(options: SeedOptions): SeedResult {
  const { file, formId, count } = options;
  const days = options.days ?? 365;
  const firstBody = options.firstBody ?? 1_000_000_000;
  const log = options.log ?? (() => {});
  const started = process.hrtime.bigint();
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 5000');
    const form = db.prepare('SELECT account_id FROM forms WHERE id = ? AND deleted_at IS NULL').get(formId) as
      { account_id: number } | undefined;
    if (!form) throw new Error(`no live form ${formId} in ${file}`);
    const fields = loadFields(db, formId);
    const byId = new Map(fields.map((f) => [f.id, f]));
    const ids = fieldIdsOf(fields);
    const criteria = CRITERIA.map((c) => ({ fieldId: ids[c.field], value: c.value }));
    const wanted = criteria.map((c) => fieldToken(c.fieldId, normalize(c.value)));

    // A bulk load: no journal while it runs (nothing else has the file open; a failure
    // leaves a broken file, which a benchmark throws away), WAL again at the end as the service keeps it.
    const mode = db.pragma('journal_mode', { simple: true }) as string;
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -1048576'); // 1 GiB
    db.pragma('temp_store = MEMORY');

    const insertSubmission = db.prepare(
      'INSERT INTO submissions (account_id, form_id, created_at, updated_at, user_agent, remote_addr, latitude, longitude, data, pretty_name) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)',
    );
    const insertUnique = db.prepare(
      'INSERT INTO submission_unique_values (submission_id, form_id, field_id, value_norm) VALUES (?, ?, ?, ?)',
    );
    const insertFts = db.prepare('INSERT INTO submissions_fts (rowid, content) VALUES (?, ?)');
    const bumpCount = db.prepare(
      'INSERT INTO form_submission_counts (form_id, slot, n, version) VALUES (?, 0, ?, 1) ON CONFLICT (form_id, slot) DO UPDATE SET n = n + excluded.n, version = version + 1',
    );
    const bumpHour = db.prepare(
      'INSERT INTO submission_hours (form_id, hour, slot, n, first_id, last_id) VALUES (?, ?, 0, ?, ?, ?) ON CONFLICT (form_id, hour, slot) DO UPDATE SET n = n + excluded.n, first_id = min(coalesce(first_id, excluded.first_id), excluded.first_id), last_id = max(coalesce(last_id, excluded.last_id), excluded.last_id)',
    );

    const now = Date.now();
    const start = now - days * DAY_MS;
    const step = (days * DAY_MS) / count;
    let firstId = 0;
    let lastId = 0;
    let firstCreated = 0;
    let lastCreated = 0;
    let uniqueRows = 0;
    let keywordMatches = 0;
    let criteriaMatches = 0;
    const batch = 50_000;

    const insertBatch = db.transaction((from: number, to: number) => {
      // Per hour: how many, and the first and last id (ids rise with i).
      const perHour = new Map<number, [number, number, number]>();
      for (let i = from; i < to; i++) {
        const n = firstBody + i;
        const stored = storedSubmission(formId, fields, byId, submissionInput(n, ids));
        const client = clientOf(n);
        // Increasing with i, never equal: a step is about 30 s for a million over a year.
        const created = Math.floor(start + i * step + (((n * 7919) % 1000) / 1000) * step * 0.9);
        const info = insertSubmission.run(
          form.account_id,
          formId,
          created,
          created,
          client.userAgent,
          client.remoteAddr,
          stored.data,
          stored.prettyName,
        );
        const id = Number(info.lastInsertRowid);
        const hour = Math.floor(created / 3_600_000);
        const inHour = perHour.get(hour);
        perHour.set(hour, inHour ? [inHour[0] + 1, inHour[1], id] : [1, id, id]);
        for (const v of stored.unique) insertUnique.run(id, formId, v.fieldId, v.norm);
        insertFts.run(id, stored.tokens.join(' '));
        uniqueRows += stored.unique.length;
        if (stored.tokens.some((t) => t.startsWith(KEYWORD))) keywordMatches++;
        if (wanted.every((token) => stored.tokens.includes(token))) criteriaMatches++;
        if (i === 0) [firstId, firstCreated] = [id, created];
        [lastId, lastCreated] = [id, created];
      }
      bumpCount.run(formId, to - from);
      for (const [hour, [n, first, last]] of perHour) bumpHour.run(formId, hour, n, first, last);
    });

    let lastReport = Date.now();
    for (let from = 0; from < count; from += batch) {
      insertBatch(from, Math.min(count, from + batch));
      if (Date.now() - lastReport > 15_000 || from + batch >= count) {
        lastReport = Date.now();
        const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
        log(
          `${Math.min(count, from + batch).toLocaleString('en-US')} of ${count.toLocaleString('en-US')} submissions in ${elapsed.toFixed(0)} s`,
        );
      }
    }
    db.pragma(`journal_mode = ${mode}`);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    return {
      formId,
      count,
      seconds,
      firstId,
      lastId,
      firstCreated,
      lastCreated,
      uniqueRows,
      keyword: KEYWORD,
      keywordMatches,
      criteria,
      criteriaMatches,
    };
  } finally {
    db.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      db: { type: 'string' },
      form: { type: 'string' },
      count: { type: 'string', default: '1000000' },
      days: { type: 'string', default: '365' },
    },
    strict: true,
  });
  const count = Number(values.count);
  const formId = Number(values.form);
  const days = Number(values.days);
  if (!values.db || !Number.isInteger(formId) || formId < 1 || !Number.isInteger(count) || count < 1 || !(days > 0)) {
    process.stderr.write('usage: tsx bench/seed-submissions.ts --db FILE --form ID [--count N] [--days D]\n');
    process.exit(2);
  }
  const log = (message: string) => process.stderr.write(`[seed] ${message}\n`);
  const result = seedSubmissions({ file: values.db, formId, count, days, log });
  log(
    `seeded ${count.toLocaleString('en-US')} submissions (${result.uniqueRows.toLocaleString('en-US')} submission_unique_values rows) into form ${formId} ` +
      `in ${result.seconds.toFixed(1)} s (${Math.round(count / result.seconds).toLocaleString('en-US')}/s)`,
  );
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
