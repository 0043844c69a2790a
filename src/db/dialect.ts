import { sql, type CreateTableBuilder, type Expression, type RawBuilder, type SqlBool } from 'kysely';

export type Dialect = 'sqlite' | 'postgres';

/** An integer primary key whose values are never reused after a delete. */
export function idColumn<T extends string>(table: CreateTableBuilder<T, never>, dialect: Dialect) {
  return dialect === 'postgres'
    ? table.addColumn('id', 'serial', (c) => c.primaryKey())
    : table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement());
}

/** Escapes LIKE wildcards so that user text matches literally. */
export function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (m) => `\\${m}`)}%`;
}

/** Case-insensitive substring match, literal in the user's text. */
export function containsInsensitive(dialect: Dialect, column: Expression<string>, text: string): RawBuilder<SqlBool> {
  const pattern = likePattern(text);
  return dialect === 'postgres'
    ? sql<SqlBool>`${column} ILIKE ${pattern} ESCAPE '\\'`
    : sql<SqlBool>`${column} LIKE ${pattern} ESCAPE '\\'`;
}
