import type { Kysely, Transaction } from 'kysely';
import {
  BadRequestError,
  ConflictError,
  NotFoundError,
  ServiceUnavailableError,
  type CodeWithStatus,
} from '../errors.js';
import type { Database } from './schema.js';
import { loopTurn } from '../loop-turn.js';

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
  return databaseUnavailable(error) ?? error;
}

/**
 * PostgreSQL's SQLSTATEs of a connection that failed (class 08) or that the server ended or
 * refused while shutting down, crashing or starting (57P01–57P03), and node-postgres's own
 * messages for a socket that ended or a client left unusable by that.
 */
const CONNECTION_STATES = /^(08[0-9A-Z]{3}|57P0[1-3])$/;
const DRIVER_MESSAGES =
  /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Client was closed and is not queryable)/;

/**
 * Errors that the pool reported as a connection that could not be made or was lost
 * (markConnectionLost): a socket's own errors (ECONNREFUSED, ECONNRESET) carry nothing that
 * says whose socket it was, and storage or a webhook's receiver fail with the same codes.
 */
const lostConnections = new WeakSet<object>();

/** Notes that error is the database's connection failing (database.ts, the pool's connects and clients). */
export function markConnectionLost(error: unknown): void {
  if (typeof error === 'object' && error !== null) lostConnections.add(error);
}

/**
 * The 503 for an error that says the database could not be reached or its connection ended
 * under the statement (a restart, a failover, a connection ended by an administrator); else
 * undefined. What was being written may or may not have been committed, which the error's
 * note tells the client. The error handlers ask it of every error that is not the app's own,
 * since a read that lost its connection reaches them untranslated.
 */
export function databaseUnavailable(error: unknown): ServiceUnavailableError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message } = error as DriverError;
  const lost =
    lostConnections.has(error) ||
    (typeof code === 'string' && CONNECTION_STATES.test(code)) ||
    (typeof message === 'string' && DRIVER_MESSAGES.test(message));
  return lost
    ? new ServiceUnavailableError('database_unavailable', undefined, { cause: error, retryAfterSeconds: 2 })
    : undefined;
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
 * statement holds the write lock long (a prune of days of rows); the total deleted. Outside a
 * transaction only: the event loop takes a turn between slices (see loopTurn).
 */
export async function deleteInSlices(
  deleteSlice: (limit: number) => Promise<{ numDeletedRows: bigint }>,
): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = Number((await deleteSlice(DELETE_SLICE)).numDeletedRows);
    total += deleted;
    if (deleted < DELETE_SLICE) return total;
    // Between slices the loop serves what waits: on SQLite the slices are synchronous.
    await loopTurn();
  }
}
