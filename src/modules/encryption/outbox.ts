import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { replacePayload } from '../../jobs/repository.js';
import { sealedEmailPayload, type SendEmailPayload } from '../emails/payload.js';
import { sealedEvent, type DeliveryPayload } from '../webhooks/payload.js';

const BATCH = 200;

interface JobPayload {
  id: number;
  payload: string;
}

/** The payload as an encrypted form's event would have it, or undefined when it is another form's or holds no values. */
type Sealer = (payload: string, formId: number) => string | undefined;

function parsed<T>(payload: string): T | undefined {
  try {
    return JSON.parse(payload) as T;
  } catch {
    return undefined;
  }
}

const sealDelivery: Sealer = (payload, formId) => {
  const p = parsed<DeliveryPayload>(payload);
  if (p?.event?.formId !== formId || p.event.sealed !== false) return undefined;
  return JSON.stringify({ ...p, event: sealedEvent(p.event) } satisfies DeliveryPayload);
};

const sealEmail: Sealer = (payload, formId) => {
  const p = parsed<SendEmailPayload>(payload);
  if (p?.formId !== formId || p.sealed !== false) return undefined;
  return JSON.stringify(sealedEmailPayload(p));
};

/** Rewrites a page of jobs (each still to be checked against the form), in one transaction; the last id read. */
async function sealPage(db: Kysely<Database>, rows: JobPayload[], formId: number, seal: Sealer): Promise<number> {
  const rewritten = rows.flatMap((r) => {
    const payload = seal(r.payload, formId);
    return payload === undefined ? [] : [{ id: r.id, payload }];
  });
  if (rewritten.length > 0)
    await transact(db, async (trx) => {
      for (const r of rewritten) await replacePayload(trx, r.id, r.payload);
    });
  return rows[rows.length - 1]!.id;
}

/** The jobs of a kind not yet finished that may be the form's (the payload names its id), from after on. */
const unfinished = (db: Executor, kind: string, formId: number, after: number) =>
  db
    .selectFrom('jobs')
    .select(['id', 'payload'])
    .where('kind', '=', kind)
    .where('state', 'in', ['queued', 'running'])
    .where('id', '>', after)
    // A first cut on the text (it also takes the ids that begin with this one's); sealPage reads each.
    .where('payload', 'like', `%"formId":${formId}%`)
    .orderBy('id')
    .limit(BATCH)
    .execute();

/** The delivery jobs with attempts in the log of one of the form's webhooks, from after on: those a redelivery replays. */
const logged = (db: Executor, formId: number, after: number) =>
  db
    .selectFrom('jobs')
    .select(['id', 'payload'])
    .where('kind', '=', 'webhooks.deliver')
    .where('id', '>', after)
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('webhook_deliveries')
        .innerJoin('webhooks', 'webhooks.id', 'webhook_deliveries.webhook_id')
        .select('webhook_deliveries.job_id')
        .where('webhooks.form_id', '=', formId),
    )
    .orderBy('id')
    .limit(BATCH)
    .execute();

/**
 * Turning encryption on: the form's events that wait in the outbox (webhook deliveries and
 * emails queued, retrying or running) were written with the values in the clear, as were the
 * deliveries that a webhook's log can redeliver. Each is rewritten as an encrypted form's
 * event is written: ids, no values (sealedEvent, sealedEmailPayload). Deliveries and emails
 * that run before this (the conversion job may wait its turn) check the form themselves, and
 * send and keep no values once it is encrypted. Finished jobs that no log can replay (emails
 * sent, deliveries never attempted) keep theirs until jobs.prune deletes them
 * (docs/encryption.md). Idempotent: a job rewritten already is left alone. Pages of BATCH,
 * each written in a transaction of its own, so that no write holds SQLite's lock for long.
 */
export async function sealQueuedEvents(db: Kysely<Database>, formId: number): Promise<void> {
  const sources: [(after: number) => Promise<JobPayload[]>, Sealer][] = [
    [(after) => unfinished(db, 'webhooks.deliver', formId, after), sealDelivery],
    [(after) => unfinished(db, 'emails.send', formId, after), sealEmail],
    [(after) => logged(db, formId, after), sealDelivery],
  ];
  for (const [page, seal] of sources) {
    let after = 0;
    for (;;) {
      const rows = await page(after);
      if (rows.length === 0) break;
      after = await sealPage(db, rows, formId, seal);
      if (rows.length < BATCH) break;
    }
  }
}
