import type { Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * Webhooks of forms (src/modules/webhooks) and their delivery log: one row per attempt to
 * deliver one event. Each delivery is a job of the outbox; its log rows go with the job
 * (jobs.prune after JOB_RETENTION_DAYS) or with the webhook, whichever goes first.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('webhooks')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    // json or urlencoded
    .addColumn('content_type', 'text', (c) => c.notNull())
    // A JSON list of event types.
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('include_field_type', 'integer', (c) => c.notNull().defaultTo(0))
    // Secrets, each sealed with a key derived from SECRET_KEY (base64); null when not set.
    .addColumn('signing_secret', 'text', (c) => c.notNull())
    .addColumn('hmac_secret', 'text')
    .addColumn('handshake_key', 'text')
    // active, failing (the last delivery used every attempt) or disabled (a 410, or by the account).
    .addColumn('state', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('failure_reason', 'text')
    .addColumn('failed_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // Every submission write reads the webhooks of its form.
  await db.schema.createIndex('webhooks_form').on('webhooks').columns(['form_id', 'id']).execute();

  await db.schema
    .createTable('webhook_deliveries')
    .$call((t) => idColumn(t, dialect))
    .addColumn('webhook_id', 'integer', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
    .addColumn('job_id', 'integer', (c) => c.notNull().references('jobs.id').onDelete('cascade'))
    // The webhook-id header: the same on every attempt of one event.
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('attempted_at', 'bigint', (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    // null when no response came (refused address, timeout, connection error).
    .addColumn('response_status', 'integer')
    // delivered or failed
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    // When the next attempt is due, if there is one.
    .addColumn('next_attempt_at', 'bigint')
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_webhook')
    .on('webhook_deliveries')
    .columns(['webhook_id', 'id'])
    .execute();
  // Pruning a job deletes its log rows through this.
  await db.schema.createIndex('webhook_deliveries_job').on('webhook_deliveries').column('job_id').execute();
}
