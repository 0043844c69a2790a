import type SQLite from 'better-sqlite3';
import { sql, type SqlBool } from 'kysely';
import type { SearchTerm, SqlEngine } from './engine.js';
import { hotQuery } from './hot-query.js';
import { deferToBatchEnd } from './write-batcher.js';

/** An FTS5 MATCH expression: every term must appear. */
export function ftsMatch(terms: SearchTerm[]): string {
  return terms.map((t) => `"${t.token}"${t.prefix ? '*' : ''}`).join(' AND ');
}

/** A submission's row of the FTS5 table: its tokens, space-separated. */
export const fullTextOf = (tokens: string[]): string => tokens.join(' ');

/** A submission's tokens into the FTS5 table: on every create, so built once. */
export const insertFullText = hotQuery(2, (db, rowid: number, content: string) =>
  db.insertInto('submissions_fts').values({ rowid, content }),
);

/**
 * Text lower-cased letter by letter, as PostgreSQL's lower() does (Unicode's simple mapping,
 * one letter for one): SQLite's own lower() and LIKE fold ASCII letters only. toLowerCase
 * differs from that in two letters only: a capital sigma at a word's end becomes `ς`, not
 * `σ`, and `İ` becomes `i` and a combining dot.
 */
export function lowerText(text: string): string {
  const lower = text.toLowerCase();
  if (!/[\u03a3\u0130]/.test(text)) return lower;
  let out = '';
  for (const letter of text) out += letter === '\u0130' ? 'i' : letter.toLowerCase();
  return out;
}

/** The SQL function of lowerText, registered on each connection that runs the service's queries. */
const LOWER_FUNCTION = 'formwork_lower';

/**
 * Registers on a connection the functions that sqliteEngine's SQL calls: every connection
 * that runs queries built with it needs them (the main one and the bulk reader; not the
 * create thread or the checkpointer, which run statements of their own).
 */
export function registerSqliteFunctions(db: SQLite.Database): void {
  // directOnly: never part of the schema (an index, a view, a trigger), which another
  // program opening the file could not read without it.
  db.function(LOWER_FUNCTION, { deterministic: true, directOnly: true }, (text: unknown) =>
    typeof text === 'string' ? lowerText(text) : text,
  );
}

/**
 * SQLite: one writer at a time, so no row locks; the full-text index is the FTS5 table
 * submissions_fts, whose rowid is the submission id; no notifications between processes.
 */
export const sqliteEngine: SqlEngine = {
  writeBatchSize: 64,
  writableCtes: false,
  // One writer: nothing to spread.
  countSlot: () => sql<number>`0`,
  shareRows: (query) => query,
  now: () => sql<number>`(CAST(unixepoch('subsec') * 1000 AS INTEGER))`,
  // instr is a literal match: no wildcard to escape. The text is lowered here, once.
  containsInsensitive: (column, text) =>
    sql<SqlBool>`(instr(${sql.raw(LOWER_FUNCTION)}(${column}), ${lowerText(text)}) > 0)`,
  // A function's result compares as BINARY does, by UTF-8 bytes: in code point order.
  lowerCase: (column) => sql<string>`${sql.raw(LOWER_FUNCTION)}(${column})`,
  jsonArrayLength: (column) => sql<number>`json_array_length(${column})`,
  // Given `form_id = ? AND id >= ?`, SQLite may walk the table by rowid from the bound, past
  // every other form's rows, or the form's index from its end to the bound; a pair
  // ((form_id, id) >= (?, ?)) is no index range to it either.
  submissionsByFormId: () => sql`submissions INDEXED BY submissions_form_id`,
  serialize: async () => {},
  lockRows: (query) => query,
  claimRows: (query) => query,
  fullTextColumns: () => ({}),
  // In a write batch, the row goes in at the batch's end (see deferToBatchEnd).
  async writeFullText(db, submissionId, tokens) {
    const write = () => insertFullText(db, submissionId, fullTextOf(tokens));
    if (!deferToBatchEnd(db, `fts:${submissionId}`, write)) await write();
  },
  async clearFullText(db, submissionId) {
    deferToBatchEnd(db, `fts:${submissionId}`, undefined);
    await db.deleteFrom('submissions_fts').where('rowid', '=', submissionId).execute();
  },
  matchFullText: (terms) =>
    sql<SqlBool>`submissions.id IN (SELECT rowid FROM submissions_fts WHERE submissions_fts MATCH ${ftsMatch(terms)})`,
  // FTS5 pages by rowid (the submission id) and counts without touching the submissions table.
  async pageFullText(db, terms, page) {
    const match = ftsMatch(terms);
    const direction = page.order === 'asc' ? sql`ASC` : sql`DESC`;
    const [ids, total] = await Promise.all([
      sql<{
        id: number;
      }>`SELECT rowid AS id FROM submissions_fts WHERE submissions_fts MATCH ${match} ORDER BY rowid ${direction} LIMIT ${page.limit} OFFSET ${page.offset}`.execute(
        db,
      ),
      page.knownTotal ??
        sql<{ n: number }>`SELECT count(*) AS n FROM submissions_fts WHERE submissions_fts MATCH ${match}`
          .execute(db)
          .then((r) => Number(r.rows[0]?.n ?? 0)),
    ]);
    return { ids: ids.rows.map((r) => r.id), total };
  },
  // One single-row INSERT per row, without RETURNING: either a multi-row INSERT or RETURNING
  // makes the statement a statement transaction, and opening one flushes FTS5's pending terms
  // of the write transaction inside it. An event's two outbox rows after a submission's index
  // write cost about 50 µs that way against 20 (the write batcher's savepoints flush them anyway).
  async insertRows(db, table, rows) {
    const ids: number[] = [];
    for (const row of rows)
      ids.push(Number((await db.insertInto(table).values(row).executeTakeFirstOrThrow()).insertId));
    return ids;
  },
  // Its one connection makes a worker's claim wait for the enqueuing transaction to end: polling finds the job.
  notifies: false,
  rowLocks: false,
  listen: async () => undefined,
};
