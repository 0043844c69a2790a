import type { Kysely, Transaction } from 'kysely';
import {
  BadRequestError,
  ConflictError,
  NotFoundError,
  ServiceUnavailableError,
  type CodeWithStatus,
} from '../errors.js';
import type { Database } from './schema.js';

/** What repositories take: the database itself or an open transaction. */
export type Executor = Kysely<Database> | Transaction<Database>;

interface DriverError {
  code?: unknown;
  constraint?: unknown;
  message?: unknown;
}

/**
 * Turns a constraint violation of either driver into a typed error; anything else is
 * returned unchanged. The one place where database error codes are read.
 */
export function translateDbError(error: unknown): unknown {
  if (typeof error !== 'object' || error === null) return error;
  const { code } = error as DriverError;
  if (code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    return new ConflictError('duplicate', undefined, { cause: error });
  }
  if (code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY') {
    return new BadRequestError('invalid_reference', undefined, { cause: error });
  }
  // Another process held SQLite's write lock past busy_timeout, or PostgreSQL ended the
  // transaction to break a deadlock (40P01) or a serialization conflict (40001): nothing was
  // written, and the same request made again soon may well pass.
  if (
    code === 'SQLITE_BUSY' ||
    code === 'SQLITE_BUSY_SNAPSHOT' ||
    code === 'SQLITE_BUSY_TIMEOUT' ||
    code === '40P01' ||
    code === '40001'
  ) {
    return new ServiceUnavailableError('database_busy', undefined, { cause: error, retryAfterSeconds: 1 });
  }
  return error;
}

/**
 * What an update that finds no row throws (Kysely's executeTakeFirstOrThrow): on PostgreSQL a
 * delete that commits between a request's read of the row and its update leaves nothing to
 * update, and that request's answer is the 404 a later one would get, not a 500.
 */
export const deletedMeanwhile = (code: CodeWithStatus<404>) => (): NotFoundError => new NotFoundError(code);

/**
 * Whether error is formwork_abort's (SQLSTATE FW001, migration 0034): a statement that ended
 * itself on a condition it checks, so that nothing it wrote stays.
 */
export const isStatementAbort = (error: unknown): boolean =>
  typeof error === 'object' && error !== null && (error as DriverError).code === 'FW001';

/** Runs fn in one transaction: all of its writes land, or none do. */
export async function transact<T>(db: Kysely<Database>, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  try {
    return await db.transaction().execute(fn);
  } catch (error) {
    throw translateDbError(error);
  }
}

/** How many rows one statement of deleteInSlices deletes at most. */
const DELETE_SLICE = 1000;

/**
 * Deletes in statements of at most DELETE_SLICE rows until one deletes fewer, so that no
 * statement holds the write lock long (a prune of days of rows); the total deleted.
 */
export async function deleteInSlices(
  deleteSlice: (limit: number) => Promise<{ numDeletedRows: bigint }>,
): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = Number((await deleteSlice(DELETE_SLICE)).numDeletedRows);
    total += deleted;
    if (deleted < DELETE_SLICE) return total;
  }
}
