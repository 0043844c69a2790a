import type pg from 'pg';

/** The text of each statement to prepare, and the name it is prepared under on every connection. */
const names = new Map<string, string>();

/**
 * Marks a statement, by its text, to be prepared once per PostgreSQL connection and then only
 * bound and run: for hot statements (hotQuery's), whose text is the same on every request.
 * Why: PostgreSQL parses, analyses and plans a statement sent with its text every time; for a
 * create's statement that was about 450 of the 750 µs of server CPU it took (pgbench on the
 * captured statements, simple or extended protocol against prepared). On SQLite the
 * connection's statement cache does this already; there the mark is unused.
 */
export function prepareOnPostgres(text: string): void {
  if (names.has(text) || names.size >= MAX_PREPARED || EVERY_COLUMN.test(text)) return;
  names.set(text, `fw${names.size + 1}`);
}

/**
 * A statement that reads or returns a table's every column (`*`) is not prepared: once a
 * migration adds a column, PostgreSQL refuses to run such a prepared statement again ("cached
 * plan must not change result type") on every connection of a process still running the old
 * code, as in a rolling upgrade. Unprepared, it simply returns one column more.
 */
const EVERY_COLUMN = /(?:^|[\s,(])(?:"?\w+"?\.)?\*(?:\s|,|$)/;

/**
 * Every connection holds a copy of every statement it prepared, for as long as it lives:
 * beyond this many texts (a mistake: a statement whose text varies), the rest run unprepared.
 */
const MAX_PREPARED = 256;

/**
 * Makes a pool's new client send a marked statement by name (pg prepares it on the first
 * use on that connection, then binds it). Kysely calls query(text, values); anything else
 * goes through as it came.
 */
export function prepareMarkedStatements(client: pg.PoolClient): void {
  const query = client.query as (this: pg.PoolClient, ...args: unknown[]) => unknown;
  client.query = function (this: pg.PoolClient, ...args: unknown[]) {
    const [text, values] = args;
    const name = args.length === 2 && typeof text === 'string' ? names.get(text) : undefined;
    return name ? query.call(this, { name, text, values }) : query.apply(this, args);
  } as typeof client.query;
}
