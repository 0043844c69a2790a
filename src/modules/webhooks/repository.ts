import type { Insertable, Updateable } from 'kysely';
import type {
  FormRow,
  WebhookDeliveriesTable,
  WebhookDeliveryRow,
  WebhookRow,
  WebhooksTable,
} from '../../db/schema.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';
import { prepared } from '../../db/hot-query.js';
import type { WebhookEvent } from './schemas.js';

export async function insertWebhook(db: Executor, row: Insertable<WebhooksTable>): Promise<WebhookRow> {
  return db.insertInto('webhooks').values(row).returningAll().executeTakeFirstOrThrow();
}

/** A webhook of the account whose form is not deleted. */
export async function findWebhook(db: Executor, accountId: number, webhookId: number): Promise<WebhookRow | undefined> {
  return db
    .selectFrom('webhooks')
    .selectAll('webhooks')
    .innerJoin('forms', 'forms.id', 'webhooks.form_id')
    .where('webhooks.id', '=', webhookId)
    .where('webhooks.account_id', '=', accountId)
    .where('forms.deleted_at', 'is', null)
    .executeTakeFirst();
}

/** The columns of a webhook that a delivery reads (delivery.ts). */
const DELIVERY_COLUMNS = [
  'account_id',
  'form_id',
  'url',
  'content_type',
  'include_field_type',
  'signing_secret',
  'hmac_secret',
  'handshake_key',
  'state',
] as const;

export type WebhookToDeliver = Pick<WebhookRow, (typeof DELIVERY_COLUMNS)[number]> &
  Pick<FormRow, 'is_encrypted' | 'encryption_state'> & {
    /** When its form was deleted (a deleted form's events are not sent), or null. */
    form_deleted_at: number | null;
  };

/**
 * A webhook as a delivery reads it, with what the delivery reads of its form (deleted or
 * encrypted since the event), for the worker, which acts for no account. Once a delivery: its
 * columns named, so that it is prepared (hot-query.ts).
 */
export async function webhookToDeliver(db: Executor, webhookId: number): Promise<WebhookToDeliver | undefined> {
  const query = db
    .selectFrom('webhooks')
    .innerJoin('forms', 'forms.id', 'webhooks.form_id')
    .select(DELIVERY_COLUMNS.map((c) => `webhooks.${c}` as const))
    .select(['forms.deleted_at as form_deleted_at', 'forms.is_encrypted', 'forms.encryption_state'])
    .where('webhooks.id', '=', webhookId);
  return (await db.executeQuery(prepared(query))).rows[0];
}

/** A form's encryption as it is now: whether a redelivery of its events may carry values (sealsNewData). */
export async function formEncryption(
  db: Executor,
  formId: number,
): Promise<Pick<FormRow, 'is_encrypted' | 'encryption_state'> | undefined> {
  return db
    .selectFrom('forms')
    .select(['is_encrypted', 'encryption_state'])
    .where('id', '=', formId)
    .executeTakeFirst();
}

export async function listWebhooks(db: Executor, accountId: number, formId: number): Promise<WebhookRow[]> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('form_id', '=', formId)
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute();
}

export async function countWebhooks(db: Executor, accountId: number, formId: number): Promise<number> {
  const row = await db
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('form_id', '=', formId)
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The events a webhook's row asks for (stored as a JSON list, written by the service). */
export const eventsOf = (row: Pick<WebhookRow, 'events'>): WebhookEvent[] => JSON.parse(row.events) as WebhookEvent[];

/** A webhook as the submission writes see it: its id and the events it asks for. */
export interface WebhookTarget {
  id: number;
  events: readonly WebhookEvent[];
}

/**
 * What every submission write reads, in its transaction: the webhooks of the form that may
 * want the event. One indexed read (webhooks_form), usually of no row. Their events are
 * parsed here, once for as long as the form's definition keeps them (FormEventConfig), not
 * on every create.
 */
export async function webhooksOfForm(db: Executor, formId: number): Promise<WebhookTarget[]> {
  const rows = await db
    .selectFrom('webhooks')
    .select(['id', 'events'])
    .where('form_id', '=', formId)
    .where('state', '!=', 'disabled')
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ id: r.id, events: eventsOf(r) }));
}

export async function updateWebhook(
  db: Executor,
  accountId: number,
  webhookId: number,
  update: Updateable<WebhooksTable>,
): Promise<WebhookRow> {
  return db
    .updateTable('webhooks')
    .set(update)
    .where('id', '=', webhookId)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('webhook_not_found'));
}

/** Its delivery log goes with it (ON DELETE CASCADE); deliveries still queued find it gone and do nothing. */
export async function deleteWebhook(db: Executor, accountId: number, webhookId: number): Promise<void> {
  await db.deleteFrom('webhooks').where('id', '=', webhookId).where('account_id', '=', accountId).execute();
}

/** The worker's verdict on a webhook after an attempt: failing, disabled, or active again. */
export async function setWebhookState(
  db: Executor,
  webhookId: number,
  state: WebhookRow['state'],
  reason: string | null,
  at: number | null,
): Promise<void> {
  await db
    .updateTable('webhooks')
    .set({ state, failure_reason: reason, failed_at: at })
    .where('id', '=', webhookId)
    // A webhook turned off by its account stays off whatever a delivery in flight finds.
    .where('state', '!=', 'disabled')
    .execute();
}

export async function insertDelivery(db: Executor, row: Insertable<WebhookDeliveriesTable>): Promise<void> {
  // Once a delivery: prepared (hot-query.ts).
  await db.executeQuery(prepared(db.insertInto('webhook_deliveries').values(row)));
}

export async function listDeliveries(
  db: Executor,
  webhookId: number,
  limit: number,
  offset: number,
): Promise<{ rows: WebhookDeliveryRow[]; total: number }> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('webhook_id', '=', webhookId)
      .orderBy('id', 'desc')
      .limit(limit)
      .offset(offset)
      .execute(),
    db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('webhook_id', '=', webhookId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export async function findDelivery(
  db: Executor,
  webhookId: number,
  deliveryId: number,
): Promise<WebhookDeliveryRow | undefined> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', deliveryId)
    .where('webhook_id', '=', webhookId)
    .executeTakeFirst();
}

/**
 * The stored payload of the delivery job that an attempt belongs to: a redelivery sends the
 * same event again. Log rows go with their job (ON DELETE CASCADE), so a log row's job is there.
 */
export async function deliveryJobPayload(db: Executor, jobId: number): Promise<string | undefined> {
  const row = await db.selectFrom('jobs').select('payload').where('id', '=', jobId).executeTakeFirst();
  return row?.payload;
}
