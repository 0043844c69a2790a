import { Type, type Static } from '@sinclair/typebox';
import { Id, PageNumber, PageSize, StringEnum, Timestamp, listBody } from '../../http/schemas.js';

/** The events a webhook may ask for: a submission's changes, and a partial submission saved on the hosted page. */
/** Webhooks a form may hold (as emails, MAX_EMAILS_PER_FORM of each kind). */
export const MAX_WEBHOOKS_PER_FORM = 20;

export const WEBHOOK_EVENTS = [
  'submission.created',
  'submission.updated',
  'submission.deleted',
  'partial.saved',
] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

const url = Type.String({
  minLength: 1,
  maxLength: 2000,
  description: 'Where deliveries are POSTed: an http or https URL',
});
const CONTENT_TYPE_MEANING =
  "json: the event as JSON (docs/webhooks.md); urlencoded: the original service's form post (FormID, UniqueID, HandshakeKey, one key per field)";
const contentType = StringEnum(['json', 'urlencoded'], { description: CONTENT_TYPE_MEANING });
const secret = (what: string) =>
  Type.String({ minLength: 1, maxLength: 200, description: `${what}; write-only: never returned` });
const hmacSecret = secret('Signs each body as X-FS-Signature: sha256=<hex HMAC-SHA256 of the body>');
const handshakeKey = secret('Sent with each delivery as HandshakeKey');
const INCLUDE_FIELD_TYPE_MEANING = 'urlencoded: each field value as JSON {"value", "type"} instead of its display text';
const includeFieldType = Type.Boolean({ description: INCLUDE_FIELD_TYPE_MEANING });
const events = Type.Array(StringEnum(WEBHOOK_EVENTS), {
  minItems: 1,
  maxItems: WEBHOOK_EVENTS.length,
  uniqueItems: true,
  description:
    'The events delivered; submission.created only unless set. partial.saved: a partial submission was saved (or ' +
    'saved again) on the hosted page; its body carries the partial as GET /partialsubmission/{id} shows it, never ' +
    'its resume token',
});

export const WebhookCreate = Type.Object(
  {
    url,
    contentType: Type.Optional(
      StringEnum(['json', 'urlencoded'], { default: 'json', description: CONTENT_TYPE_MEANING }),
    ),
    hmacSecret: Type.Optional(hmacSecret),
    handshakeKey: Type.Optional(handshakeKey),
    includeFieldType: Type.Optional(Type.Boolean({ default: false, description: INCLUDE_FIELD_TYPE_MEANING })),
    events: Type.Optional(events),
  },
  { additionalProperties: false, title: 'WebhookCreate' },
);
export type WebhookCreate = Static<typeof WebhookCreate>;

export const WebhookUpdate = Type.Object(
  {
    url: Type.Optional(url),
    contentType: Type.Optional(contentType),
    hmacSecret: Type.Optional(Type.Union([hmacSecret, Type.Null()], { description: 'null removes it' })),
    handshakeKey: Type.Optional(Type.Union([handshakeKey, Type.Null()], { description: 'null removes it' })),
    includeFieldType: Type.Optional(includeFieldType),
    events: Type.Optional(events),
    active: Type.Optional(
      Type.Boolean({
        description: 'true turns a disabled or failing webhook back on (and clears its failure); false turns it off',
      }),
    ),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'WebhookUpdate',
    description: 'Only the properties sent change',
  },
);
export type WebhookUpdate = Static<typeof WebhookUpdate>;

const webhookProperties = {
  id: Id,
  formId: Id,
  url: Type.String(),
  contentType,
  events: Type.Array(StringEnum(WEBHOOK_EVENTS)),
  includeFieldType: Type.Boolean(),
  hmacSecretSet: Type.Boolean({ description: 'Whether an hmacSecret is set (it is never shown)' }),
  handshakeKeySet: Type.Boolean({ description: 'Whether a handshakeKey is set (it is never shown)' }),
  state: StringEnum(['active', 'failing', 'disabled'], {
    description:
      'failing: the last event used every attempt and was not delivered (deliveries go on); disabled: no deliveries, ' +
      'after the receiver answered 410 Gone or the webhook was turned off',
  }),
  failureReason: Type.Union([Type.String(), Type.Null()], {
    description: 'Why the webhook is failing or was disabled; null when active',
  }),
  failed: Type.Union([Timestamp, Type.Null()], { description: 'When it became failing or was disabled by a 410' }),
  created: Timestamp,
  updated: Timestamp,
};

export const Webhook = Type.Object(webhookProperties, { $id: 'Webhook', title: 'Webhook' });
export type Webhook = Static<typeof Webhook>;

export const WebhookCreated = Type.Object(
  {
    ...webhookProperties,
    signingSecret: Type.String({
      description:
        'whsec_…: the key of the Standard Webhooks signature (webhook-signature) of every delivery. Shown once, here',
    }),
  },
  { title: 'WebhookCreated' },
);
export type WebhookCreated = Static<typeof WebhookCreated>;

export const WebhookList = listBody('webhooks', Type.Ref(Webhook));

export const WebhookDeleted = Type.Object({ id: Id, deleted: Type.Literal(true) });

export const DeliveryListQuery = Type.Object(
  { pageNumber: PageNumber, pageSize: PageSize },
  { additionalProperties: false },
);
export type DeliveryListQuery = Static<typeof DeliveryListQuery>;

export const WebhookDelivery = Type.Object(
  {
    id: Id,
    webhookId: Id,
    messageId: Type.String({ description: 'The webhook-id header: the same on every attempt of one event' }),
    event: StringEnum(WEBHOOK_EVENTS),
    attempt: Type.Integer({ minimum: 1, description: '1 for the first attempt of the event' }),
    time: Timestamp,
    durationMs: Type.Integer(),
    responseStatus: Type.Union([Type.Integer(), Type.Null()], { description: 'null when no response came' }),
    outcome: StringEnum(['delivered', 'failed']),
    error: Type.Union([Type.String(), Type.Null()], { description: 'Why the attempt failed' }),
    nextAttempt: Type.Union([Timestamp, Type.Null()], {
      description: 'When the event is tried again; null when delivered or when no attempt is left',
    }),
  },
  { title: 'WebhookDelivery' },
);
export type WebhookDelivery = Static<typeof WebhookDelivery>;

export const WebhookDeliveryList = listBody('deliveries', WebhookDelivery);

export const Redelivery = Type.Object({
  webhookId: Id,
  messageId: Type.String({ description: 'The same webhook-id as the attempts of the event' }),
  event: StringEnum(WEBHOOK_EVENTS),
  queued: Type.Literal(true),
});
