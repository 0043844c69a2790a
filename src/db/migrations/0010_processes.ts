import type { Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * The running processes (src/modules/processes), and the owner of each piece of work that
 * a process holds while it runs: an idempotency key's first request, an upload being
 * received. Work whose owner has stopped is taken over at once (see modules/processes).
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('processes')
    // Never reused: a claim naming a process that has gone can never name a new one.
    .$call((t) => idColumn(t, dialect))
    // For the operator: which machine and process this is.
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    // The database's clock, so that processes on machines whose clocks differ agree on staleness.
    .addColumn('heartbeat_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('processes_heartbeat').on('processes').column('heartbeat_at').execute();

  // Null on claims made before this migration; those keep the old rule (stale after a minute).
  await db.schema.alterTable('idempotency_keys').addColumn('owner', 'integer').execute();
  // A new random value per claim: the first request's writes are conditional on it.
  await db.schema.alterTable('idempotency_keys').addColumn('token', 'text').execute();
  // Set while receiving: the process taking the bytes, and the token that fences its writes.
  await db.schema.alterTable('uploads').addColumn('receiver', 'integer').execute();
  await db.schema.alterTable('uploads').addColumn('receive_token', 'text').execute();
}
