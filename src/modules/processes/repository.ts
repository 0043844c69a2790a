import { sql, type RawBuilder } from 'kysely';
import type pg from 'pg';
import { engineOf } from '../../db/engine.js';
import type { Executor } from '../../db/transaction.js';

/**
 * The database's clock in epoch ms: heartbeats are written and judged by one clock, so
 * processes on machines whose clocks disagree still agree on which heartbeat is stale.
 */
function dbNow(db: Executor): RawBuilder<number> {
  return engineOf(db).now();
}

export async function insertProcess(db: Executor, host: string, pid: number, id?: number): Promise<number> {
  const row = await db
    .insertInto('processes')
    .values({
      ...(id === undefined ? {} : { id }),
      host,
      pid,
      started_at: dbNow(db),
      heartbeat_at: dbNow(db),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** False when the row is gone (another process judged this one stopped and removed it). */
export async function heartbeat(db: Executor, id: number): Promise<boolean> {
  const r = await db
    .updateTable('processes')
    .set({ heartbeat_at: dbNow(db) })
    .where('id', '=', id)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

export async function deleteProcess(db: Executor, id: number): Promise<void> {
  await db.deleteFrom('processes').where('id', '=', id).execute();
}

/** Of these processes, those whose heartbeat is no older than timeoutMs. */
export async function freshAmong(db: Executor, ids: number[], timeoutMs: number): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom('processes')
    .select('id')
    .where('id', 'in', ids)
    .where('heartbeat_at', '>=', sql<number>`${dbNow(db)} - ${timeoutMs}`)
    .execute();
  return new Set(rows.map((r) => r.id));
}

/** Of these processes, those that still have a row. */
export async function existingAmong(db: Executor, ids: number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await db.selectFrom('processes').select('id').where('id', 'in', ids).execute();
  return new Set(rows.map((r) => r.id));
}

/** Removes the rows of processes whose heartbeat is older than timeoutMs: they have stopped. */
export async function deleteStale(db: Executor, timeoutMs: number): Promise<void> {
  await db
    .deleteFrom('processes')
    .where('heartbeat_at', '<', sql<number>`${dbNow(db)} - ${timeoutMs}`)
    .execute();
}

/**
 * PostgreSQL: session advisory locks (key1 = namespace, key2 = process id) are how a
 * process shows that its connection, and so the process, is still there.
 */
export async function tryAdvisoryLock(client: pg.ClientBase, namespace: number, id: number): Promise<boolean> {
  const result = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::int4, $2::int4) AS locked', [
    namespace,
    id,
  ]);
  return result.rows[0]?.locked === true;
}

/** Of these process ids, those whose advisory lock some session of this database holds. */
export async function heldAdvisoryLocks(db: Executor, namespace: number, ids: number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await sql<{ id: string }>`
    SELECT objid::text AS id FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = ${namespace}::int8::oid
      AND objid = ANY(${ids.map(String)}::oid[])
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`.execute(db);
  return new Set(rows.rows.map((r) => Number(r.id)));
}
