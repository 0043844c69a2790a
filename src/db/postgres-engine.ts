import { sql, type SqlBool } from 'kysely';
import { likePattern, type SearchTerm, type SqlEngine } from './engine.js';
import { loadPg } from './pg-driver.js';

/** A PostgreSQL tsquery, read as is (no parser, no dictionary): every term must appear. */
export function tsQuery(terms: SearchTerm[]): string {
  return terms.map((t) => `'${t.token}'${t.prefix ? ':*' : ''}`).join(' & ');
}

/** Slots of each form's submission counter: more than a pool's connections usually write at once. */
const COUNT_SLOTS = 16;

/** array_to_tsvector takes the tokens as they are (no parser, no dictionary). */
const tsvector = (tokens: string[]) => sql<unknown>`array_to_tsvector(${tokens}::text[])`;

/**
 * PostgreSQL: row locks, the full-text index in the submissions.search_vector column, and
 * LISTEN/NOTIFY between processes (on connections of their own, to databaseUrl).
 */
export function postgresEngine(databaseUrl: string): SqlEngine {
  return {
    // Each write is a transaction of its own on the pool: nothing in it is hot enough to
    // serialize writers (counts are spread over slots, see forms/counts.ts), so many
    // connections commit at once, and PostgreSQL groups their WAL flushes itself.
    writeBatchSize: undefined,
    writableCtes: true,
    // The backend's pid spreads a pool's connections over the slots; two that share one only
    // wait for each other's commit.
    countSlot: () => sql<number>`(pg_backend_pid() % ${sql.lit(COUNT_SLOTS)})`,
    shareRows: (query) => query.forShare(),
    now: () => sql<number>`(floor(extract(epoch from clock_timestamp()) * 1000)::bigint)`,
    // ILIKE lowers both sides with lower(), as lowerCase does.
    containsInsensitive: (column, text) => sql<SqlBool>`${column} ILIKE ${likePattern(text)} ESCAPE '\\'`,
    // lower() maps every letter (by the database's LC_CTYPE); "C" then orders the result by
    // code point (UTF-8 bytes), as SQLite does, rather than by the database's collation.
    lowerCase: (column) => sql<string>`(lower(${column}) COLLATE "C")`,
    jsonArrayLength: (column) => sql<number>`json_array_length(${column}::json)`,
    // Its planner picks the form's index or the primary key by the form's share of the rows.
    submissionsByFormId: () => sql`submissions`,
    async serialize(db, namespace, key) {
      await sql`SELECT pg_advisory_xact_lock(${namespace}::int4, ${key}::int4)`.execute(db);
    },
    lockRows: (query) => query.forUpdate(),
    claimRows: (query) => query.forUpdate().skipLocked(),
    fullTextColumns: (tokens) => ({ search_vector: tsvector(tokens) }),
    async writeFullText(db, submissionId, tokens, inserted) {
      if (inserted) return;
      await db
        .updateTable('submissions')
        .set({ search_vector: tsvector(tokens) })
        .where('id', '=', submissionId)
        .execute();
    },
    // The column is written anew with the row's next tokens, and goes with a deleted row.
    clearFullText: async () => {},
    matchFullText: (terms) => sql<SqlBool>`submissions.search_vector @@ ${tsQuery(terms)}::tsquery`,
    pageFullText: async () => undefined,
    async insertRows(db, table, rows) {
      const inserted = await db.insertInto(table).values(rows).returning('id').execute();
      // Ids grow with the rows' order in one INSERT (a serial); RETURNING's own order is not promised.
      return inserted.map((r) => r.id).sort((a, b) => a - b);
    },
    notifies: true,
    rowLocks: true,
    async listen(channel, onNotify, onError) {
      const client = new (loadPg().Client)({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
      client.on('notification', (message) => onNotify(message.payload ?? ''));
      client.on('error', onError);
      await client.connect();
      try {
        await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
      } catch (error) {
        await client.end().catch(() => {});
        throw error;
      }
      return { close: () => client.end().catch(() => {}) };
    },
  };
}
