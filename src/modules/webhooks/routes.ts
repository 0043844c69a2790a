import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import {
  DeliveryListQuery,
  Redelivery,
  Webhook,
  WebhookCreate,
  WebhookCreated,
  WebhookDeleted,
  WebhookDeliveryList,
  WebhookList,
  WebhookUpdate,
} from './schemas.js';
import * as service from './service.js';

const tags = ['Webhooks'];
const formParams = idParams('formId');
const webhookParams = idParams('webhookId');
const deliveryParams = idParams('webhookId', 'deliveryId');
const more = 'Events, payloads, signatures and retries: docs/webhooks.md.';

// The paths are the original service's (/form/{id}/webhook, /webhook/{id}), so that its
// clients find them under /api/v2 with .json too. A webhook acts on a form's submissions
// and holds secrets, so members need the edit level on the form even to read one.
export function webhookRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/form/:formId/webhook',
      {
        config: { access: { scope: 'forms:read', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'listWebhooks',
          summary: 'List the webhooks of a form',
          params: formParams,
          response: { 200: WebhookList, ...errors(403, 404) },
        },
      },
      (req) => service.listWebhooks(ctx, principal(req), { formId: req.params.formId }),
    );

    app.post(
      '/form/:formId/webhook',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'createWebhook',
          summary: 'Add a webhook to a form',
          description: `Answers with the signing secret of the webhook-signature header, once. ${more}`,
          params: formParams,
          body: WebhookCreate,
          response: { 200: WebhookCreated, ...errors(403, 404) },
        },
      },
      (req) => service.createWebhook(ctx, principal(req), { formId: req.params.formId }, req.body),
    );

    app.get(
      '/webhook/:webhookId',
      {
        config: { access: { scope: 'forms:read', level: 'edit', formFrom: 'webhookId' } },
        schema: {
          tags,
          operationId: 'getWebhook',
          summary: 'Read a webhook',
          description: 'state and failureReason say whether deliveries fail, and why.',
          params: webhookParams,
          response: { 200: Type.Ref(Webhook), ...errors(403, 404) },
        },
      },
      (req) => service.getWebhook(ctx, principal(req), { webhookId: req.params.webhookId }),
    );

    app.put(
      '/webhook/:webhookId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'webhookId' } },
        schema: {
          tags,
          operationId: 'updateWebhook',
          summary: 'Change a webhook',
          params: webhookParams,
          body: WebhookUpdate,
          response: { 200: Type.Ref(Webhook), ...errors(403, 404) },
        },
      },
      (req) => service.updateWebhook(ctx, principal(req), { webhookId: req.params.webhookId }, req.body),
    );

    app.post(
      '/webhook/:webhookId/secret',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'webhookId' } },
        schema: {
          tags,
          operationId: 'rotateWebhookSecret',
          summary: "Replace a webhook's signing secret",
          description:
            'A new whsec_ signing secret, shown once in this answer; deliveries from now on are signed with it ' +
            '(retries of earlier events too). Also how to learn the secret of a webhook copied with its form.',
          params: webhookParams,
          response: { 200: WebhookCreated, ...errors(403, 404) },
        },
      },
      (req) => service.rotateSigningSecret(ctx, principal(req), { webhookId: req.params.webhookId }),
    );

    app.delete(
      '/webhook/:webhookId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'webhookId' } },
        schema: {
          tags,
          operationId: 'deleteWebhook',
          summary: 'Delete a webhook and its delivery log',
          description: 'Deliveries still queued are not sent.',
          params: webhookParams,
          response: { 200: WebhookDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.deleteWebhook(ctx, principal(req), { webhookId: req.params.webhookId }),
    );

    app.get(
      '/webhook/:webhookId/deliveries',
      {
        config: { access: { scope: 'forms:read', level: 'edit', formFrom: 'webhookId' } },
        schema: {
          tags,
          operationId: 'listWebhookDeliveries',
          summary: "A webhook's delivery log, newest first",
          description: `One entry per attempt, kept JOB_RETENTION_DAYS. ${more}`,
          params: webhookParams,
          querystring: DeliveryListQuery,
          response: { 200: WebhookDeliveryList, ...errors(403, 404) },
        },
      },
      (req) => service.listDeliveries(ctx, principal(req), { webhookId: req.params.webhookId }, req.query),
    );

    app.post(
      '/webhook/:webhookId/deliveries/:deliveryId/redeliver',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'webhookId' } },
        schema: {
          tags,
          operationId: 'redeliverWebhook',
          summary: 'Send the event of a logged attempt again',
          description:
            'The event as it was when it happened, with the same webhook-id, and a new round of attempts. ' +
            'A disabled webhook answers 409 webhook_disabled.',
          params: deliveryParams,
          response: { 200: Redelivery, ...errors(403, 404, 409) },
        },
      },
      (req) => service.redeliver(ctx, principal(req), { webhookId: req.params.webhookId }, req.params.deliveryId),
    );
  };
}
