import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import type { Dialect } from './dialect.js';
import type { Database } from './schema.js';

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  close(): Promise<void>;
}

export interface DbOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  /** SQLite only: an explicit file, for tests and benchmarks. */
  sqliteFile?: string;
  poolSize?: number;
}

// int8 (counts, epoch-millisecond timestamps) as numbers: every value we store fits in 2^53.
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 && format !== 'binary') return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
};

export function openDatabase(options: DbOptions): Db {
  if (options.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      types: pgTypes as pg.CustomTypesConfig,
    });
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return { kysely, dialect: 'postgres', close: () => kysely.destroy() };
  }

  const file = options.sqliteFile ?? join(options.dataDir, 'formwork.db');
  mkdirSync(join(file, '..'), { recursive: true });
  const sqlite = new SQLite(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const kysely = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  return { kysely, dialect: 'sqlite', close: () => kysely.destroy() };
}
