import type { Expression, Insertable, Kysely, RawBuilder, SelectQueryBuilder, SqlBool } from 'kysely';
import type { Database } from './schema.js';
import type { Executor } from './transaction.js';

/** One term of a full-text search: a token, matched whole or as a prefix. */
export interface SearchTerm {
  token: string;
  prefix: boolean;
}

/** What a page of full-text matches asks for; knownTotal spares the count when the caller has it. */
export interface SearchPage {
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
  knownTotal?: number;
}

/** The tables whose rows the database numbers (an autoincrement key, a serial). */
export type TableWithId = 'jobs';

/** A connection that receives notifications until closed. */
export interface Listener {
  close(): Promise<void>;
}

/**
 * Everything that SQLite and PostgreSQL do differently, behind one interface: each database
 * has one engine, chosen when it is opened (openDatabase) and found again from any Kysely
 * instance or transaction of it with engineOf. Services never see it, and repositories ask
 * it only for the piece of SQL that differs. Migrations still take the dialect's name: they
 * are written once per schema change and never edited, so they branch where a type differs.
 */
export interface SqlEngine {
  /**
   * How many writes one group commit takes (see WriteBatcher); undefined where each write is
   * a transaction of its own, run concurrently on the connection pool.
   */
  readonly writeBatchSize: number | undefined;
  /** Whether INSERT … may run inside WITH, so that several writes go in one statement. */
  readonly writableCtes: boolean;
  /** The slot of a spread counter (form_submission_counts) that this connection adds to. */
  countSlot(): RawBuilder<number>;
  /** Share-locks the rows the select reads until the transaction ends (updates of them wait), where rows can be locked. */
  shareRows<DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O>;
  /** The database's own clock in epoch milliseconds, read in SQL. */
  now(): RawBuilder<number>;
  /**
   * A case-insensitive substring match, literal in the user's text (no wildcards): both sides
   * lower-cased letter by letter, for every letter Unicode gives a lower case (as lowerCase).
   */
  containsInsensitive(column: Expression<string>, text: string): RawBuilder<SqlBool>;
  /**
   * The text lower-cased letter by letter (Unicode's simple mapping: `Ü` → `ü`, `Σ` → `σ`,
   * `İ` → `i`), ordered by code point: what names sort by without regard to case, so that
   * both databases sort them the same whatever PostgreSQL's collation (`éa` after `zeta`).
   * Where a function of the process computes it (SQLite), it costs a call per row read.
   */
  lowerCase(column: Expression<string>): RawBuilder<string>;
  /** The number of items of a JSON array kept as text. */
  jsonArrayLength(column: Expression<string>): RawBuilder<number>;
  /**
   * Waits for, then holds until the transaction ends, an exclusive lock on (namespace, key),
   * where writers run concurrently (PostgreSQL: a transaction advisory lock, which locks no
   * row, so writers that do not take it are not held up). Nothing where one writer already
   * serializes every write (SQLite). What the transaction reads after it includes what the
   * lock's previous holder committed.
   */
  serialize(db: Executor, namespace: number, key: number): Promise<void>;
  /** Locks the rows the select reads until the transaction ends, where rows can be locked. */
  lockRows<DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O>;
  /**
   * The candidate rows of a claim: locks them and skips those another transaction is
   * claiming, where rows can be locked. Without row locks the one writer serializes claims.
   */
  claimRows<DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O>;
  /**
   * Whether claimRows locks rows (PostgreSQL): a claim then reads its candidates in a
   * statement of their own, since a LIMIT ... SKIP LOCKED subquery of an UPDATE may be run
   * more than once, each run skipping the rows the ones before locked, and so claim past the
   * limit. Without row locks (SQLite) the claim stays one statement under the writer's lock.
   */
  readonly rowLocks: boolean;
  /** Columns of a new submissions row that index its tokens (none where the index is a table of its own). */
  fullTextColumns(tokens: string[]): { search_vector?: RawBuilder<unknown> };
  /** Indexes a submission's tokens once its row is written; `inserted`: the row was inserted with fullTextColumns. */
  writeFullText(db: Executor, submissionId: number, tokens: string[], inserted: boolean): Promise<void>;
  /** Removes a submission from the index (before its tokens are written anew, or the row deleted). */
  clearFullText(db: Executor, submissionId: number): Promise<void>;
  /** A condition on `submissions`: the row's index holds every term. */
  matchFullText(terms: SearchTerm[]): RawBuilder<SqlBool>;
  /**
   * The submissions table as a FROM item whose reads by form and id bound take the form's id
   * index (form_id, id), walking the form's ids in order from the bound.
   */
  submissionsByFormId(): RawBuilder<unknown>;
  /**
   * Ids of matching submissions, in id order, and their count, found in the index alone
   * without reading the submissions table; undefined where the index cannot do that.
   */
  pageFullText(
    db: Executor,
    terms: SearchTerm[],
    page: SearchPage,
  ): Promise<{ ids: number[]; total: number } | undefined>;
  /** Inserts rows into a table whose `id` the database assigns; answers their ids in the order given. */
  insertRows<T extends TableWithId>(
    db: Executor,
    table: T,
    rows: readonly Insertable<Database[T]>[],
  ): Promise<number[]>;
  /** Whether listen delivers anything: notifications that cross processes. */
  readonly notifies: boolean;
  /** A dedicated connection that calls onNotify with each payload sent on channel; undefined without notifications. */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onError: (error: Error) => void,
  ): Promise<Listener | undefined>;
}

/**
 * Keyed by the Kysely adapter, which a Kysely instance makes once and shares with every
 * transaction and connection it opens: so a transaction finds its database's engine.
 */
const engines = new WeakMap<object, SqlEngine>();

export function attachEngine(db: Kysely<Database>, engine: SqlEngine): void {
  engines.set(db.getExecutor().adapter, engine);
}

/** The engine of the database that db (a Kysely instance or a transaction) belongs to. */
export function engineOf(db: Executor): SqlEngine {
  const engine = engines.get(db.getExecutor().adapter);
  if (!engine) throw new Error('This Kysely instance has no engine: open databases with openDatabase');
  return engine;
}

/** Escapes LIKE wildcards so that user text matches literally. */
export function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (m) => `\\${m}`)}%`;
}
