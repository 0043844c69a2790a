import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { Executor } from './transaction.js';

interface BulkReader {
  open(): Kysely<Database>;
  close(): Promise<void>;
}

const readers = new WeakMap<Kysely<Database>, BulkReader>();

/**
 * A second way into the same database for reads that walk many rows (exports), where one
 * exists: on SQLite a read-only connection of its own with a small page cache (see
 * openDatabase), so that a scan of a million rows neither grows the process's memory by the
 * main connection's cache nor evicts the pages that every request uses, and reads only what
 * is committed. Elsewhere, and inside a transaction, the database itself.
 */
export function bulkReaderOf(db: Executor): Executor {
  if (db.isTransaction) return db;
  return readers.get(db)?.open() ?? db;
}

/** open is called on first use; close when the database closes. */
export function attachBulkReader(db: Kysely<Database>, open: () => Kysely<Database>): () => Promise<void> {
  let opened: Kysely<Database> | undefined;
  readers.set(db, {
    open: () => (opened ??= open()),
    close: async () => {
      await opened?.destroy();
      opened = undefined;
    },
  });
  return () => readers.get(db)!.close();
}
