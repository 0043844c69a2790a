import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import type pg from 'pg';
import type { Dialect } from './dialect.js';
import { FALLBACK_AUTOCHECKPOINT_PAGES, startCheckpointer } from './sqlite-checkpointer.js';
import { attachBulkReader } from './bulk-reader.js';
import { attachChangeEpoch, sqliteChangeEpoch, type PreparedStatement } from './change-epoch.js';
import { attachEngine } from './engine.js';
import { loadPg } from './pg-driver.js';
import { prepareMarkedStatements } from './pg-prepared.js';
import { markConnectionLost } from './transaction.js';
import { runHotDirectly } from './hot-query.js';
import { postgresEngine } from './postgres-engine.js';
import { registerSqliteFunctions, sqliteEngine } from './sqlite-engine.js';
import { SqliteWriterDialect } from './sqlite-writer-dialect.js';
import { attachCreateThread, stopCreateThread } from './sqlite-create-thread.js';
import { WriteTurn } from './sqlite-write-turn.js';
import type { Database } from './schema.js';

export interface Db {
  /** Its engine (what differs between databases) goes with it: engineOf(kysely). */
  kysely: Kysely<Database>;
  /** For migrations, which branch where a column type differs. */
  dialect: Dialect;
  close(): Promise<void>;
  /** PostgreSQL: the pool's connections now (for /metrics); SQLite has no pool. */
  poolStats?: () => { total: number; idle: number; waiting: number; max: number };
}

export interface DbOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  /** SQLite only: an explicit file, for tests and benchmarks. */
  sqliteFile?: string;
  poolSize?: number;
}

// int8 (counts, epoch-millisecond timestamps, ids) as numbers, and so the elements of int8[]
// (`array_agg` of ids): every value we store fits in 2^53. node-postgres gives strings for both.
const INT8 = 20;
const INT8_ARRAY = 1016;
const textParser = (oid: number) => loadPg().types.getTypeParser(oid, 'text');
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (format === 'binary') return loadPg().types.getTypeParser(oid, format);
    if (oid === INT8) return (value: string) => Number(value);
    if (oid === INT8_ARRAY) {
      const strings = textParser(INT8_ARRAY) as (value: string) => (string | null)[];
      return (value: string) => strings(value).map((v) => (v === null ? null : Number(v)));
    }
    return loadPg().types.getTypeParser(oid, format);
  },
};

/**
 * Kysely prepares every query anew, which costs more than running it for the small
 * indexed reads that most requests make. Statements are reused per SQL text instead;
 * Kysely runs one query at a time on this single connection, so a statement is never in
 * use twice at once, and SQLite re-prepares a reused statement itself after a schema change.
 */
function withStatementCache(
  sqlite: SQLite.Database,
  limit = 500,
  wrap: (sql: string, statement: SQLite.Statement) => PreparedStatement = (_sql, statement) => statement,
) {
  const statements = new Map<string, PreparedStatement>();
  return {
    close: () => sqlite.close(),
    get inTransaction() {
      return sqlite.inTransaction;
    },
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (statement) {
        statements.delete(sql); // re-insert below: the map's order is least recently used first
      } else {
        statement = wrap(sql, sqlite.prepare(sql));
        if (statements.size >= limit) statements.delete(statements.keys().next().value as string);
      }
      statements.set(sql, statement);
      return statement;
    },
  };
}

/** The page cache of the SQLite connection that exports read through (bulk-reader.ts), in KiB. */
const BULK_READER_CACHE_KIB = 2048;

/**
 * A server that ends a connection (a restart, pg_terminate_backend) says so with a FATAL error,
 * which node-postgres gives to the running statement alone: the client stays queryable until
 * the socket's end arrives, and released in between, the pool would hand it to the next
 * request, whose statement then fails on the closed socket. Marked unqueryable at once
 * (node-postgres's own mark, which pg-pool reads on release), it is dropped instead.
 */
function dropWhenEnded(client: pg.PoolClient): void {
  client.connection.on('errorMessage', (message: { severity?: string }) => {
    if (message.severity === 'FATAL') (client as unknown as { _queryable: boolean })._queryable = false;
  });
}

/** A connection the pool could not make fails its request's statement with an error marked as the connection's. */
function markConnectFailures(pool: pg.Pool): void {
  const connect = pool.connect.bind(pool) as (callback?: unknown) => Promise<pg.PoolClient> | undefined;
  // Kysely asks for a promise; pg-pool's own query() passes a callback, left as it is.
  pool.connect = ((callback?: unknown) =>
    callback === undefined
      ? connect()!.catch((error: unknown) => {
          markConnectionLost(error);
          throw error;
        })
      : connect(callback)) as typeof pool.connect;
}

export function openDatabase(options: DbOptions): Db {
  if (options.databaseUrl) {
    const pool = new (loadPg().Pool)({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      types: pgTypes as pg.CustomTypesConfig,
    });
    // An idle client whose connection drops (server restart, failover) is discarded by the
    // pool, which connects anew on the next query; without a listener the error would crash the process.
    pool.on('error', () => {});
    pool.on('connect', (client) => {
      // The pool listens only to its idle clients. One that is checked out but between
      // statements (held by a transaction, a shared statement's turn) hears its connection's
      // end as an 'error' event of its own, which would end the process: the client turns
      // unqueryable instead, its holder's next statement fails, and the pool drops it when it
      // is released (pg-pool checks _queryable). The error is the one its running statements
      // fail with, marked as the connection's (a 503, databaseUnavailable).
      client.on('error', markConnectionLost);
      dropWhenEnded(client);
      prepareMarkedStatements(client);
    });
    markConnectFailures(pool);
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    attachEngine(kysely, postgresEngine(options.databaseUrl));
    const max = options.poolSize ?? 10;
    return {
      kysely,
      dialect: 'postgres',
      close: () => kysely.destroy(),
      poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max }),
    };
  }

  const file = options.sqliteFile ?? join(options.dataDir, 'formwork.db');
  mkdirSync(join(file, '..'), { recursive: true });
  const sqlite = new SQLite(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('cache_size = -65536');
  registerSqliteFunctions(sqlite);
  const checkpointer =
    file === ':memory:'
      ? undefined
      : startCheckpointer(file, (message) => process.emitWarning(`SQLite checkpoint failed: ${message}`));
  if (checkpointer) sqlite.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
  const epoch = sqliteChangeEpoch(sqlite);
  const statements = withStatementCache(sqlite, 500, epoch.wrap);
  const turn = new WriteTurn();
  const kysely = new Kysely<Database>({ dialect: new SqliteWriterDialect({ database: statements, turn }) });
  attachEngine(kysely, sqliteEngine);
  // Plain creates are written by a thread of their own (sqlite-create-thread.ts), beside the
  // event loop; an in-memory database is this connection's alone.
  if (file !== ':memory:')
    attachCreateThread(kysely, {
      file,
      turn,
      autocheckpointPages: FALLBACK_AUTOCHECKPOINT_PAGES,
      onWritten: epoch.moved,
    });
  runHotDirectly(kysely, (sql) => statements.prepare(sql));
  attachChangeEpoch(kysely, epoch.epoch);
  const closeBulk =
    file === ':memory:'
      ? async () => {}
      : attachBulkReader(kysely, () => {
          const reader = new SQLite(file, { readonly: true });
          reader.pragma('busy_timeout = 5000');
          // Its pages are read once per export: a small cache bounds the memory a scan takes.
          reader.pragma(`cache_size = -${BULK_READER_CACHE_KIB}`);
          registerSqliteFunctions(reader);
          const bulk = new Kysely<Database>({
            dialect: new SqliteDialect({ database: withStatementCache(reader, 50) }),
          });
          attachEngine(bulk, sqliteEngine);
          return bulk;
        });
  return {
    kysely,
    dialect: 'sqlite',
    close: async () => {
      await closeBulk();
      await stopCreateThread(kysely);
      await checkpointer?.stop();
      await kysely.destroy();
    },
  };
}
