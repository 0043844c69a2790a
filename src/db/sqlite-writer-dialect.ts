import {
  CompiledQuery,
  SelectQueryNode,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
} from 'kysely';
import type { PreparedStatement } from './change-epoch.js';
import type { WriteTurn } from './sqlite-write-turn.js';

/** The writing connection's statement cache and state, as openDatabase makes them. */
export interface WriterConnection {
  prepare(sql: string): PreparedStatement;
  close(): void;
  readonly inTransaction: boolean;
}

/**
 * Kysely's SQLite connection, but for one thing: a statement that writes (or BEGIN
 * IMMEDIATE, which takes the write lock) first takes this process's write turn
 * (sqlite-write-turn.ts), held until the connection is out of any transaction again. So the
 * main thread never sleeps in SQLite's busy handler waiting for the create thread's commit.
 * Reads take no turn: in WAL mode they go on while another connection writes.
 */
class TurnTakingConnection implements DatabaseConnection {
  private holds = false;

  constructor(
    private readonly db: WriterConnection,
    private readonly turn: WriteTurn,
  ) {}

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const { sql, parameters } = compiledQuery;
    const statement = this.db.prepare(sql);
    if (!this.holds && !statement.readonly) {
      await this.turn.enterMain();
      this.holds = true;
    }
    try {
      if (statement.reader) return { rows: statement.all(parameters as unknown[]) as R[] };
      const { changes, lastInsertRowid } = statement.run(parameters as unknown[]);
      return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
    } finally {
      if (this.holds && !this.db.inTransaction) {
        this.holds = false;
        this.turn.leaveMain();
      }
    }
  }

  async *streamQuery<R>(compiledQuery: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    if (!SelectQueryNode.is(compiledQuery.query))
      throw new Error('Sqlite driver only supports streaming of select queries');
    const statement = this.db.prepare(compiledQuery.sql);
    for (const row of statement.iterate(compiledQuery.parameters as unknown[])) yield { rows: [row as R] };
  }
}

/**
 * SQLite's writing connection: every transaction begins IMMEDIATE, taking the write lock
 * before its first read. A deferred transaction (Kysely's `begin`) reads from a snapshot and
 * asks for the lock at its first write; if another process (a `formwork worker` beside
 * `serve`, the command line) committed in between, SQLite refuses at once with
 * SQLITE_BUSY_SNAPSHOT, busy_timeout or not, and a request that had read first failed. Taken
 * at the start, the lock waits its turn under busy_timeout like any other write. In one
 * process it changes nothing: its one connection runs one transaction at a time anyway.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  private readonly connection: TurnTakingConnection;

  constructor(config: { database: WriterConnection; turn: WriteTurn }) {
    super({ database: config.database as never });
    this.connection = new TurnTakingConnection(config.database, config.turn);
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    // Kysely's lock on its one connection; this connection's statements go through the turn.
    await super.acquireConnection();
    return this.connection;
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

export class SqliteWriterDialect extends SqliteDialect {
  constructor(private readonly writerConfig: { database: WriterConnection; turn: WriteTurn }) {
    super({ database: writerConfig.database as never });
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.writerConfig);
  }
}
