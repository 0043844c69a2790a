import type { Updateable } from 'kysely';
import type { AppContext } from '../../context.js';
import type { WebhookDeliveryRow, WebhookRow, WebhooksTable } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { BadRequestError, ConflictError, invalid, NotFoundError } from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import { enqueue } from '../../jobs/outbox.js';
import { lockForm, reviseForm } from '../forms/repository.js';
import { requireForm } from '../forms/service.js';
import type { AccountScope, FormRef, WebhookRef } from '../permissions/caller.js';
import { sealsNewData } from '../encryption/keys.js';
import { deliverWebhookJob } from './jobs.js';
import { sealedEvent } from './payload.js';
import * as repo from './repository.js';
import type {
  DeliveryListQuery,
  Webhook,
  WebhookCreate,
  WebhookCreated,
  WebhookDelivery,
  WebhookEvent,
  WebhookUpdate,
} from './schemas.js';
import { MAX_WEBHOOKS_PER_FORM } from './schemas.js';
import { newSigningSecret, sealSecret } from './secrets.js';

export function toWebhook(row: WebhookRow): Webhook {
  return {
    id: row.id,
    formId: row.form_id,
    url: row.url,
    contentType: row.content_type,
    events: repo.eventsOf(row),
    includeFieldType: row.include_field_type === 1,
    hmacSecretSet: row.hmac_secret !== null,
    handshakeKeySet: row.handshake_key !== null,
    state: row.state,
    failureReason: row.failure_reason,
    failed: row.failed_at === null ? null : isoTime(row.failed_at),
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

function toDelivery(row: WebhookDeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    webhookId: row.webhook_id,
    messageId: row.message_id,
    event: row.event as WebhookEvent,
    attempt: row.attempt,
    time: isoTime(row.attempted_at),
    durationMs: row.duration_ms,
    responseStatus: row.response_status,
    outcome: row.outcome,
    error: row.error,
    nextAttempt: row.next_attempt_at === null ? null : isoTime(row.next_attempt_at),
  };
}

/** An http or https URL, else 400 naming body.url. Where it leads is judged when a delivery connects (address.ts). */
function checkedUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid('invalid_request', 'body.url', 'is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw invalid('invalid_request', 'body.url', 'must be an http or https URL');
  if (url.hostname === '') throw invalid('invalid_request', 'body.url', 'has no host');
  return url.toString();
}

async function requireWebhook(
  db: Executor,
  { accountId }: AccountScope,
  { webhookId }: WebhookRef,
): Promise<WebhookRow> {
  const webhook = await repo.findWebhook(db, accountId, webhookId);
  if (!webhook) throw new NotFoundError('webhook_not_found');
  return webhook;
}

export async function listWebhooks(
  ctx: AppContext,
  scope: AccountScope,
  { formId }: FormRef,
): Promise<Page & { webhooks: Webhook[] }> {
  await requireForm(ctx.db, scope, { formId });
  const webhooks = (await repo.listWebhooks(ctx.db, scope.accountId, formId)).map(toWebhook);
  return { webhooks, ...page(webhooks.length, 1, Math.max(webhooks.length, 1)) };
}

export async function createWebhook(
  ctx: AppContext,
  scope: AccountScope,
  { formId }: FormRef,
  input: WebhookCreate,
): Promise<WebhookCreated> {
  const { accountId } = scope;
  const url = checkedUrl(input.url);
  const { secretKey } = ctx.config;
  const signingSecret = newSigningSecret();
  return transact(ctx.db, async (trx) => {
    await requireForm(trx, scope, { formId });
    // Each webhook is a job, a copy of the submission and up to eight requests a submission:
    // a public form's every submission fans out to all of them. The form's row locked first, so
    // that webhooks made at once are counted one after the other (PostgreSQL).
    await lockForm(trx, accountId, formId);
    if ((await repo.countWebhooks(trx, accountId, formId)) >= MAX_WEBHOOKS_PER_FORM)
      throw new BadRequestError('too_many_webhooks', `A form holds at most ${MAX_WEBHOOKS_PER_FORM} webhooks`);
    const now = ctx.clock.now();
    const row = await repo.insertWebhook(trx, {
      account_id: accountId,
      form_id: formId,
      url,
      content_type: input.contentType ?? 'json',
      events: JSON.stringify(input.events ?? ['submission.created']),
      include_field_type: input.includeFieldType ? 1 : 0,
      signing_secret: sealSecret(secretKey, accountId, 'signing', signingSecret),
      hmac_secret: input.hmacSecret === undefined ? null : sealSecret(secretKey, accountId, 'hmac', input.hmacSecret),
      handshake_key:
        input.handshakeKey === undefined ? null : sealSecret(secretKey, accountId, 'handshake', input.handshakeKey),
      created_at: now,
      updated_at: now,
    });
    await reviseForm(trx, accountId, formId);
    return { ...toWebhook(row), signingSecret };
  });
}

export async function getWebhook(ctx: AppContext, scope: AccountScope, ref: WebhookRef): Promise<Webhook> {
  return toWebhook(await requireWebhook(ctx.db, scope, ref));
}

export async function updateWebhook(
  ctx: AppContext,
  scope: AccountScope,
  ref: WebhookRef,
  input: WebhookUpdate,
): Promise<Webhook> {
  const { accountId } = scope;
  const { webhookId } = ref;
  const { secretKey } = ctx.config;
  const update: Updateable<WebhooksTable> = {};
  if (input.url !== undefined) update.url = checkedUrl(input.url);
  if (input.contentType !== undefined) update.content_type = input.contentType;
  if (input.events !== undefined) update.events = JSON.stringify(input.events);
  if (input.includeFieldType !== undefined) update.include_field_type = input.includeFieldType ? 1 : 0;
  if (input.hmacSecret !== undefined)
    update.hmac_secret = input.hmacSecret === null ? null : sealSecret(secretKey, accountId, 'hmac', input.hmacSecret);
  if (input.handshakeKey !== undefined)
    update.handshake_key =
      input.handshakeKey === null ? null : sealSecret(secretKey, accountId, 'handshake', input.handshakeKey);
  if (input.active === true) Object.assign(update, { state: 'active', failure_reason: null, failed_at: null });
  if (input.active === false) Object.assign(update, { state: 'disabled', failure_reason: 'Turned off by the account' });
  return transact(ctx.db, async (trx) => {
    const current = await requireWebhook(trx, scope, ref);
    const row = await repo.updateWebhook(trx, accountId, webhookId, { ...update, updated_at: ctx.clock.now() });
    await reviseForm(trx, accountId, current.form_id);
    return toWebhook(row);
  });
}

/** A new signing secret, shown once here: the old one signs nothing from now on. */
export async function rotateSigningSecret(
  ctx: AppContext,
  scope: AccountScope,
  ref: WebhookRef,
): Promise<WebhookCreated> {
  const signingSecret = newSigningSecret();
  const sealed = sealSecret(ctx.config.secretKey, scope.accountId, 'signing', signingSecret);
  return transact(ctx.db, async (trx) => {
    await requireWebhook(trx, scope, ref);
    const row = await repo.updateWebhook(trx, scope.accountId, ref.webhookId, {
      signing_secret: sealed,
      updated_at: ctx.clock.now(),
    });
    return { ...toWebhook(row), signingSecret };
  });
}

export async function deleteWebhook(
  ctx: AppContext,
  scope: AccountScope,
  ref: WebhookRef,
): Promise<{ id: number; deleted: true }> {
  const { webhookId } = ref;
  return transact(ctx.db, async (trx) => {
    const current = await requireWebhook(trx, scope, ref);
    await repo.deleteWebhook(trx, scope.accountId, webhookId);
    await reviseForm(trx, scope.accountId, current.form_id);
    return { id: webhookId, deleted: true as const };
  });
}

export async function listDeliveries(
  ctx: AppContext,
  scope: AccountScope,
  ref: WebhookRef,
  query: DeliveryListQuery,
): Promise<Page & { deliveries: WebhookDelivery[] }> {
  await requireWebhook(ctx.db, scope, ref);
  const { rows, total } = await repo.listDeliveries(
    ctx.db,
    ref.webhookId,
    query.pageSize,
    (query.pageNumber - 1) * query.pageSize,
  );
  return { deliveries: rows.map(toDelivery), ...page(total, query.pageNumber, query.pageSize) };
}

/**
 * Sends the event of a logged attempt again, as a new delivery job with the same payload
 * (so the same webhook-id: receivers that deduplicate on it see a repeat) and a new set of
 * attempts. A disabled webhook is turned on first (PUT active: true).
 */
export async function redeliver(
  ctx: AppContext,
  scope: AccountScope,
  ref: WebhookRef,
  deliveryId: number,
): Promise<{ webhookId: number; messageId: string; event: WebhookEvent; queued: true }> {
  const { webhookId } = ref;
  return transact(ctx.db, async (trx) => {
    const webhook = await requireWebhook(trx, scope, ref);
    const delivery = await repo.findDelivery(trx, webhookId, deliveryId);
    const stored = delivery && (await repo.deliveryJobPayload(trx, delivery.job_id));
    if (!delivery || stored === undefined) throw new NotFoundError('webhook_delivery_not_found');
    if (webhook.state === 'disabled') throw new ConflictError('webhook_disabled');
    const checked = deliverWebhookJob.check(JSON.parse(stored));
    if (!checked.ok) throw new NotFoundError('webhook_delivery_not_found');
    let payload = checked.payload;
    // An event kept from before its form was encrypted goes again as an encrypted form's does.
    const form = await repo.formEncryption(trx, webhook.form_id);
    if (!payload.event.sealed && form && sealsNewData(form))
      payload = { ...payload, event: sealedEvent(payload.event) };
    await enqueue(trx, deliverWebhookJob, payload);
    return { webhookId, messageId: payload.messageId, event: payload.event.type, queued: true as const };
  });
}
