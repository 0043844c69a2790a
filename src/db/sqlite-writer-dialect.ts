import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver } from 'kysely';

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
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

export class SqliteWriterDialect extends SqliteDialect {
  constructor(private readonly writerConfig: ConstructorParameters<typeof SqliteDialect>[0]) {
    super(writerConfig);
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.writerConfig);
  }
}
