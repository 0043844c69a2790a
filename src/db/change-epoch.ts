import type SQLite from 'better-sqlite3';
import type { Executor } from './transaction.js';

/**
 * The change epoch of a database: a value that is the same at two moments only if nothing
 * was written to the database in between, by this process or any other. Reads that run on
 * every request (the token look-up, a form's version, a page of the forms list) may keep
 * what they read under the epoch they read it at, and serve it again without a statement for
 * as long as the epoch has not moved: no write can have changed it, so nothing is ever stale.
 *
 * SQLite only. The epoch is this process's count of writing statements on its connection
 * (counted before and after each one, transaction control included, so a read made inside a
 * transaction that later commits or rolls back is never kept past it) with the connection's
 * `PRAGMA data_version`, which moves when any other connection (another process: a second
 * service, the command line) commits. Reading it is one prepared pragma, no table read.
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

// Transaction control is reported read-only by SQLite (sqlite3_stmt_readonly), yet ends or
// starts what the connection's next reads see.
const TRANSACTION_CONTROL = /^\s*(begin|commit|end|rollback|savepoint|release)\b/i;

/** A statement that writes (or controls a transaction): counted before and after it runs. */
class CountedStatement {
  constructor(
    private readonly statement: SQLite.Statement,
    private readonly counter: { writes: number },
  ) {}

  get reader(): boolean {
    return this.statement.reader;
  }

  all(parameters: unknown[]): unknown[] {
    this.counter.writes++;
    try {
      return this.statement.all(parameters);
    } finally {
      this.counter.writes++;
    }
  }

  run(parameters: unknown[]): SQLite.RunResult {
    this.counter.writes++;
    try {
      return this.statement.run(parameters);
    } finally {
      this.counter.writes++;
    }
  }

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

export type PreparedStatement = Pick<SQLite.Statement, 'reader' | 'all' | 'run' | 'iterate'> | CountedStatement;

/**
 * The epoch of one SQLite connection: wrap(sql, statement) gives the statement Kysely
 * should run (counted when it writes), epoch() the current value.
 */
export function sqliteChangeEpoch(sqlite: SQLite.Database): {
  wrap(sql: string, statement: SQLite.Statement): PreparedStatement;
  epoch(): string;
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
      statement.readonly && !TRANSACTION_CONTROL.test(sql) ? statement : new CountedStatement(statement, counter),
    epoch: () => {
      const now = performance.now();
      if (seen === undefined || now - seenAt > MAX_READING_AGE_MS) {
        if (seen === undefined) setImmediate(forget);
        seen = `${String(dataVersion.get())}.`;
        seenAt = now;
      }
      return seen + String(counter.writes);
    },
  };
}
