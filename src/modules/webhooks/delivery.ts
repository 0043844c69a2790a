import { performance } from 'node:perf_hooks';
import type { AppContext } from '../../context.js';
import type { RetrySchedule } from '../../jobs/kind.js';
import { FinalFailure, RetryAt, scheduledDelay } from '../../jobs/retry.js';
import type { JobInfo, JobTools } from '../../jobs/types.js';
import { sealsNewData } from '../encryption/keys.js';
import { fsSignature, renderBody, sealedEvent, standardSignature, type DeliveryPayload } from './payload.js';
import { reviseForm } from '../forms/repository.js';
import * as repo from './repository.js';
import { openSecret } from './secrets.js';
import { post, type Response } from './send.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** After the first attempt fails: about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (±10 %): 8 attempts over about 28 hours. */
export const RETRY_SCHEDULE: RetrySchedule = {
  delaysMs: [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR],
  jitter: 0.1,
};
export const MAX_ATTEMPTS = RETRY_SCHEDULE.delaysMs.length + 1;

/** A Retry-After longer than this is taken as this. */
const MAX_RETRY_AFTER_MS = 24 * HOUR;

const MAX_ERROR_LENGTH = 500;

/**
 * Retry-After (seconds, or an HTTP date) as epoch ms of ctx.clock, counted from now (when the
 * response came); undefined when absent or unreadable.
 */
export function retryAfterAt(
  value: string | undefined,
  ctx: Pick<AppContext, 'clock'>,
  now = ctx.clock.now(),
): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  let at: number;
  if (/^\d+$/.test(text)) at = now + Number(text) * SECOND;
  else {
    const date = Date.parse(text);
    if (Number.isNaN(date)) return undefined;
    // An HTTP date is a time of the receiver's world: read on the system clock, which ctx.clock may be ahead of in tests.
    at = ctx.clock.fromSystem(date);
  }
  return Math.min(Math.max(at, now), now + MAX_RETRY_AFTER_MS);
}

function message(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH)}…` : text;
}

function statusProblem(status: number): string {
  if (status >= 300 && status < 400) return `HTTP ${status}: redirects are not followed`;
  return `HTTP ${status}`;
}

/** Why an event of a deleted form is not sent (its log row, the job's error). */
const FORM_DELETED = 'not sent: the form was deleted';

/**
 * One attempt to deliver one event: the job handler of webhooks.deliver. It logs the attempt
 * (one row of the webhook's delivery log), and then: done on a 2xx; on a 410, disables the
 * webhook and stops; otherwise fails, to be tried again on the schedule (or at the receiver's
 * Retry-After on 429 and 503), and on the last attempt marks the webhook failing with why.
 * A webhook deleted or disabled meanwhile is not delivered to. Nor is a form deleted since the
 * event, whose owner can no longer see or stop its webhooks: that attempt is logged as not
 * sent, and the job fails for good (a restored form's later events go as usual; this one can
 * be redelivered from the log). An event made before its form was encrypted goes as an
 * encrypted form's event does, without values, and its job keeps none from then on. Runs at
 * least once: after a crash between sending and logging, the event is sent again with the
 * same webhook-id.
 */
export async function deliver(ctx: AppContext, job: JobInfo<DeliveryPayload>, tools: JobTools): Promise<void> {
  const { webhookId, messageId } = job.payload;
  let { event } = job.payload;
  const webhook = await repo.webhookToDeliver(ctx.db, webhookId);
  if (!webhook || webhook.state === 'disabled') return;
  if (webhook.form_deleted_at !== null) {
    const row = {
      webhook_id: webhookId,
      job_id: job.id,
      message_id: messageId,
      event: event.type,
      attempt: job.attempt,
      attempted_at: ctx.clock.now(),
      duration_ms: 0,
      response_status: null,
      outcome: 'failed' as const,
      error: FORM_DELETED,
      next_attempt_at: null,
    };
    tools.atEnd((trx) => repo.insertDelivery(trx, row));
    throw new FinalFailure(FORM_DELETED);
  }
  if (!event.sealed && sealsNewData(webhook)) {
    event = sealedEvent(event);
    const sealed: DeliveryPayload = { ...job.payload, event };
    tools.atEnd((trx) => tools.replacePayload(sealed, trx));
  }

  const attemptedAt = ctx.clock.now();
  const started = performance.now();
  let response: Response | undefined;
  let error: string | undefined;
  try {
    const { secretKey } = ctx.config;
    const open = (name: 'signing' | 'hmac' | 'handshake', sealed: string) =>
      openSecret(secretKey, webhook.account_id, name, sealed);
    let secrets;
    try {
      secrets = {
        signing: open('signing', webhook.signing_secret),
        hmac: webhook.hmac_secret === null ? undefined : open('hmac', webhook.hmac_secret),
        handshake: webhook.handshake_key === null ? undefined : open('handshake', webhook.handshake_key),
      };
    } catch (cause) {
      throw new Error(`the webhook's secrets do not open with this process's SECRET_KEY (${message(cause)})`);
    }
    const { body, contentType } = renderBody(event, {
      contentType: webhook.content_type,
      includeFieldType: webhook.include_field_type === 1,
      handshakeKey: secrets.handshake,
    });
    const timestamp = Math.floor(attemptedAt / 1000);
    const headers: Record<string, string> = {
      'content-type': contentType,
      'user-agent': 'Formwork-Webhooks/1',
      'webhook-id': messageId,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': standardSignature(secrets.signing, messageId, timestamp, body),
      'x-formwork-event': event.type,
    };
    if (secrets.hmac !== undefined) headers['x-fs-signature'] = fsSignature(secrets.hmac, body);
    response = await post(new URL(webhook.url), headers, body, {
      timeoutMs: ctx.config.webhookTimeoutMs,
      allowPrivate: ctx.config.webhookAllowPrivate,
      signal: tools.signal,
    });
  } catch (cause) {
    error = message(cause);
  }
  const durationMs = Math.round(performance.now() - started);
  const status = response?.status ?? null;
  // The end of the attempt, on the clock its start was read from: what the log shows (time,
  // duration) and what the next attempt is counted from agree exactly.
  const now = attemptedAt + durationMs;
  const log = {
    webhook_id: webhookId,
    job_id: job.id,
    message_id: messageId,
    event: event.type,
    attempt: job.attempt,
    attempted_at: attemptedAt,
    duration_ms: durationMs,
    response_status: status,
  };

  // The log row goes into the transaction that records the end of the run: one write per attempt.
  if (status !== null && status >= 200 && status < 300) {
    tools.atEnd(async (trx) => {
      await repo.insertDelivery(trx, { ...log, outcome: 'delivered', error: null, next_attempt_at: null });
      if (webhook.state === 'failing') await repo.setWebhookState(trx, webhookId, 'active', null, null);
    });
    return;
  }

  if (status === 410) {
    const problem = 'HTTP 410 Gone: the webhook is disabled';
    tools.atEnd(async (trx) => {
      await repo.insertDelivery(trx, { ...log, outcome: 'failed', error: problem, next_attempt_at: null });
      await repo.setWebhookState(
        trx,
        webhookId,
        'disabled',
        `The receiver answered 410 Gone to ${event.type} (webhook-id ${messageId}); turn it on again with PUT active: true`,
        now,
      );
      // New submissions stop making deliveries for it (they keep the form's webhooks under its revision).
      await reviseForm(trx, webhook.account_id, webhook.form_id);
    });
    return;
  }

  const problem = error ?? statusProblem(status ?? 0);
  const last = job.attempt >= MAX_ATTEMPTS;
  const retryAfter = status === 429 || status === 503 ? retryAfterAt(response?.retryAfter, ctx, now) : undefined;
  // Retry-After may put the next attempt off, never bring it forward: a 0 or a date past (a
  // receiver's clock behind) would spend every attempt within a second.
  const nextAt = last ? null : Math.max(retryAfter ?? 0, now + scheduledDelay(job.attempt, RETRY_SCHEDULE));
  tools.atEnd(async (trx) => {
    await repo.insertDelivery(trx, { ...log, outcome: 'failed', error: problem, next_attempt_at: nextAt });
    if (last)
      await repo.setWebhookState(
        trx,
        webhookId,
        'failing',
        `${event.type} (webhook-id ${messageId}) was not delivered in ${MAX_ATTEMPTS} attempts; the last: ${problem}`,
        now,
      );
  });
  if (nextAt === null) throw new Error(problem);
  throw new RetryAt(problem, nextAt);
}
