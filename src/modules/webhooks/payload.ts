import { createHmac } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import { unpackSubmission, type PackedSubmission } from '../submissions/packed-entries.js';
import type { Submission } from '../submissions/schemas.js';
import { WEBHOOK_EVENTS } from './schemas.js';

/**
 * One event as a delivery job carries it: snapshotted when the change was made, so that
 * every attempt (and a redelivery) sends what the change left, not what is there later.
 * The submission is the detailed record (values left out on encrypted forms) with its
 * entries packed (submissions/packed-entries.ts), or null when the submission was deleted.
 */
export const DeliveryPayload = Type.Object({
  webhookId: Type.Integer(),
  messageId: Type.String(),
  event: Type.Object({
    type: Type.Union(WEBHOOK_EVENTS.map((e) => Type.Literal(e))),
    formId: Type.Integer(),
    /** The submission's id; absent for partial.saved. */
    submissionId: Type.Optional(Type.Integer()),
    /** partial.saved: the partial's id. */
    partialSubmissionId: Type.Optional(Type.Integer()),
    occurredAt: Type.Number(),
    sealed: Type.Boolean(),
    submission: Type.Unknown(),
    /** partial.saved: the partial as GET /partialsubmission/{id} shows it (values left out on encrypted forms). */
    partial: Type.Optional(Type.Unknown()),
  }),
});
export type DeliveryPayload = Static<typeof DeliveryPayload>;
export type DeliveryEvent = DeliveryPayload['event'];

/**
 * The event as an encrypted form's change writes it: its record without values or pretty name
 * (webhookDeliveriesFor and the submission writes). For an event made before its form was
 * encrypted, which must not be sent or kept with the values in the clear.
 */
export function sealedEvent(event: DeliveryEvent): DeliveryEvent {
  const withoutValues = (record: unknown) =>
    record === null || typeof record !== 'object' ? record : { ...record, prettyName: null, data: [] };
  return {
    ...event,
    sealed: true,
    submission: withoutValues(event.submission),
    ...(event.partial !== undefined && { partial: withoutValues(event.partial) }),
  };
}

export interface BodySettings {
  contentType: 'json' | 'urlencoded';
  includeFieldType: boolean;
  handshakeKey: string | undefined;
}

export interface RenderedBody {
  body: Buffer;
  contentType: string;
}

function submissionOf(event: DeliveryEvent): Submission | null {
  // Written by webhookDeliveriesFor from the service's own record (whole, in jobs written before packing).
  const stored = event.submission as PackedSubmission | Submission | null;
  return stored && unpackSubmission(stored);
}

interface PartialRecord {
  prettyName: string | null;
  data: { field: number; value: unknown; type: string; displayValue: string }[];
}

/**
 * partial.saved: json {type, timestamp, formId, partialSubmissionId, data (the partial as the
 * API shows it)}; urlencoded FormID, PartialSubmissionID, HandshakeKey when set, one key per
 * field. The resume token is never in it: the service keeps only its hash.
 */
function renderPartialBody(event: DeliveryEvent, settings: BodySettings): RenderedBody {
  const partial = event.partial as PartialRecord;
  const data = event.sealed ? [] : partial.data;
  if (settings.contentType === 'urlencoded') {
    const form = new URLSearchParams();
    form.append('FormID', String(event.formId));
    form.append('PartialSubmissionID', String(event.partialSubmissionId));
    if (settings.handshakeKey !== undefined) form.append('HandshakeKey', settings.handshakeKey);
    for (const entry of data)
      form.append(
        String(entry.field),
        settings.includeFieldType ? JSON.stringify({ value: entry.value, type: entry.type }) : entry.displayValue,
      );
    return { body: Buffer.from(form.toString()), contentType: 'application/x-www-form-urlencoded' };
  }
  const json: Record<string, unknown> = {
    type: event.type,
    timestamp: new Date(event.occurredAt).toISOString(),
    formId: event.formId,
    partialSubmissionId: event.partialSubmissionId,
    data: event.sealed ? { ...partial, prettyName: null, data: [] } : partial,
  };
  if (settings.handshakeKey !== undefined) json.HandshakeKey = settings.handshakeKey;
  return { body: Buffer.from(JSON.stringify(json)), contentType: 'application/json' };
}

/**
 * The body of a delivery. json: {type, timestamp, formId, submissionId, data (the detailed
 * submission, or null once deleted), HandshakeKey when set}. urlencoded: the original
 * service's post, FormID, UniqueID, HandshakeKey when set, then one key per field (its id):
 * the display text, or with includeFieldType a JSON {"value", "type"}. Encrypted forms send
 * no values in either.
 */
export function renderBody(event: DeliveryEvent, settings: BodySettings): RenderedBody {
  if (event.type === 'partial.saved') return renderPartialBody(event, settings);
  const submission = submissionOf(event);
  const data = event.sealed ? [] : (submission?.data ?? []);
  if (settings.contentType === 'urlencoded') {
    const form = new URLSearchParams();
    form.append('FormID', String(event.formId));
    form.append('UniqueID', String(event.submissionId));
    if (settings.handshakeKey !== undefined) form.append('HandshakeKey', settings.handshakeKey);
    for (const entry of data) {
      form.append(
        String(entry.field),
        settings.includeFieldType ? JSON.stringify({ value: entry.value, type: entry.type }) : entry.displayValue,
      );
    }
    return { body: Buffer.from(form.toString()), contentType: 'application/x-www-form-urlencoded' };
  }
  const json: Record<string, unknown> = {
    type: event.type,
    timestamp: new Date(event.occurredAt).toISOString(),
    formId: event.formId,
    submissionId: event.submissionId,
    data: submission && (event.sealed ? { ...submission, prettyName: null, data: [] } : submission),
  };
  if (settings.handshakeKey !== undefined) json.HandshakeKey = settings.handshakeKey;
  return { body: Buffer.from(JSON.stringify(json)), contentType: 'application/json' };
}

/** Standard Webhooks: v1, then base64 HMAC-SHA256 of "id.timestamp.body" under the secret after whsec_. */
export function standardSignature(signingSecret: string, messageId: string, timestamp: number, body: Buffer): string {
  const key = Buffer.from(signingSecret.replace(/^whsec_/, ''), 'base64');
  const mac = createHmac('sha256', key).update(`${messageId}.${timestamp}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

/** The original service's X-FS-Signature: sha256=, then the lowercase hex HMAC-SHA256 of the raw body. */
export function fsSignature(hmacSecret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', hmacSecret).update(body).digest('hex')}`;
}
