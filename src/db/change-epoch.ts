import type SQLite from 'better-sqlite3';
import type { Executor } from './transaction.js';

/**
 * The change epoch of a database: a value that is the same at two moments only if nothing
 * was written to the database in between, by this process or any other. Reads that run on
 * every request (the token look-up, a form's version, a page of the forms list) may keep
 * what they read under the epoch they read it at, and serve it again without a statement for
 * as long as the epoch has not moved: no write can have changed it, so nothing is ever stale.
 *
 * SQLite only. The epoch is this process's count of changes on its connection with the
 * connection's `PRAGMA data_version`, which moves when any other connection (another process:
 * a second service, the command line) commits. Reading it is one prepared pragma, no table
 * read. What counts as a change (see CountedStatement):
 * - an INSERT, UPDATE or DELETE that changed a row (one that changed none changed nothing:
 *   the worker's idle polls, a sweep that found nothing, an upsert that did nothing);
 * - a rollback, whole or to a savepoint: it undoes changes that other flows on the same
 *   connection may have read while the transaction was open;
 * - any other statement that is not read-only (schema changes, pragmas that write).
 * Beginning, committing or releasing changes nothing that the connection's own reads see: a
 * read made inside an open transaction already saw its changes, each of which moved the epoch.
 *
 * PostgreSQL has no such cheap and immediate signal (a notification arrives after the commit
 * it announces, and another process's reader may run in between), so there the epoch is
 * undefined and every read goes to the database as before. A transaction's executor has no
 * epoch either: what a transaction reads is not kept.
 */
const epochs = new WeakMap<object, () => string>();

/** The epoch of db now, or undefined where reads must not be kept (PostgreSQL, transactions). */
export function changeEpoch(db: Executor): string | undefined {
  return epochs.get(db)?.();
}

export function attachChangeEpoch(db: object, epoch: () => string): void {
  epochs.set(db, epoch);
}

// Transaction control is reported read-only by SQLite (sqlite3_stmt_readonly), but for BEGIN
// IMMEDIATE (it takes the write lock); of it, only a rollback changes what the connection's
// reads see.
const ROLLBACK = /^\s*rollback\b/i;
const OTHER_CONTROL = /^\s*(begin|commit|end|savepoint|release)\b/i;
// Statements whose changes better-sqlite3 reports: a run() that reports none, or an all()
// (RETURNING) that returns no row, changed nothing. SQLite has only row triggers, so no
// trigger ran either, and this schema has no INSTEAD OF triggers (on views).
const ROW_CHANGES = /^\s*(insert|update|delete|replace)\b/i;

/** A statement that may change what the connection's reads see: the epoch moves when it does. */
class CountedStatement {
  constructor(
    private readonly statement: SQLite.Statement,
    private readonly counter: { writes: number },
    /** Whether only a statement that changed rows counts (ROW_CHANGES), or every run. */
    private readonly whenRowsChange: boolean,
  ) {}

  get reader(): boolean {
    return this.statement.reader;
  }

  get readonly(): boolean {
    return this.statement.readonly;
  }

  all(parameters: unknown[]): unknown[] {
    let rows: unknown[] | undefined;
    try {
      rows = this.statement.all(parameters);
      return rows;
    } finally {
      if (!this.whenRowsChange || rows === undefined || rows.length > 0) this.counter.writes++;
    }
  }

  run(parameters: unknown[]): SQLite.RunResult {
    let result: SQLite.RunResult | undefined;
    try {
      result = this.statement.run(parameters);
      return result;
    } finally {
      if (!this.whenRowsChange || result === undefined || result.changes > 0) this.counter.writes++;
    }
  }

  // Other code runs between the rows a generator yields, so the epoch moves before the first
  // and after the last, whatever changed.
  *iterate(parameters: unknown[]): IterableIterator<unknown> {
    this.counter.writes++;
    try {
      yield* this.statement.iterate(parameters) as IterableIterator<unknown>;
    } finally {
      this.counter.writes++;
    }
  }
}

/** How long one reading of PRAGMA data_version may be reused, at most (see sqliteChangeEpoch). */
const MAX_READING_AGE_MS = 1;

export type PreparedStatement =
  Pick<SQLite.Statement, 'reader' | 'readonly' | 'all' | 'run' | 'iterate'> | CountedStatement;

/**
 * The epoch of one SQLite connection: wrap(sql, statement) gives the statement Kysely
 * should run (counted when it writes), epoch() the current value.
 */
export function sqliteChangeEpoch(sqlite: SQLite.Database): {
  wrap(sql: string, statement: SQLite.Statement): PreparedStatement;
  epoch(): string;
  /** Another connection of this process (the create thread) committed changes: the epoch moves at once. */
  moved(): void;
} {
  const counter = { writes: 0 };
  const dataVersion = sqlite.prepare('PRAGMA data_version').pluck();
  // The pragma costs a read transaction's file locks (four fcntl calls), so a reading is
  // reused until the loop's check phase, and for at most a millisecond. Requests are read in
  // the poll phase, so those served with one reading are, as a rule, those whose sockets the
  // poll that started the turn found readable: each reached the server before the pragma was
  // read, and a commit the reading missed cannot have been made before they were sent. Where
  // a reading is made outside the poll phase (a request resumed in the check phase), a
  // request that arrived after it may be served with it: at most 1 ms after the reading,
  // which bounds how late another process's commit can be seen.
  let seen: string | undefined;
  let seenAt = 0;
  const forget = () => {
    seen = undefined;
  };
  return {
    wrap: (sql, statement) =>
      (statement.readonly && !ROLLBACK.test(sql)) || OTHER_CONTROL.test(sql)
        ? statement
        : new CountedStatement(statement, counter, ROW_CHANGES.test(sql)),
    epoch: () => {
      const now = performance.now();
      if (seen === undefined || now - seenAt > MAX_READING_AGE_MS) {
        if (seen === undefined) setImmediate(forget);
        seen = `${String(dataVersion.get())}.`;
        seenAt = now;
      }
      return seen + String(counter.writes);
    },
    moved: () => {
      counter.writes++;
    },
  };
}
