import type { CreateTableBuilder } from 'kysely';

/** The database's name, for migrations only: the rest of the code asks its engine (engine.ts). */
export type Dialect = 'sqlite' | 'postgres';

/** An integer primary key whose values are never reused after a delete. */
export function idColumn<T extends string>(table: CreateTableBuilder<T, never>, dialect: Dialect) {
  return dialect === 'postgres'
    ? table.addColumn('id', 'serial', (c) => c.primaryKey())
    : table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement());
}
