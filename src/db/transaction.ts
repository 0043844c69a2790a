import type { Kysely, Transaction } from 'kysely';
import { BadRequestError, ConflictError } from '../errors.js';
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
  return error;
}

/** Runs fn in one transaction: all of its writes land, or none do. */
export async function transact<T>(db: Kysely<Database>, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  try {
    return await db.transaction().execute(fn);
  } catch (error) {
    throw translateDbError(error);
  }
}
