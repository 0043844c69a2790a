/** v2 webhooks: /form/{id}/webhook (list, create) and /webhook/{id}. */
import type { TSchema } from '@sinclair/typebox';
import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { idParams } from '../../http/schemas.js';
import { Webhook, WebhookCreate, WebhookCreated, WebhookUpdate } from '../webhooks/schemas.js';
import * as service from '../webhooks/service.js';
import { v2Route } from './route.js';
import { checked, deleted, fromV2, parametersOf, v2List, v2Writer, type SchemaRefs } from './wire.js';

/**
 * How v2 writes a webhook of the v2025 schema given: snake_case, string ids, times by the
 * schema, the form as `form`. Secrets are never shown but once, on creation.
 */
function v2Webhook(schema: TSchema, refs: SchemaRefs) {
  const write = v2Writer(schema, refs);
  return (w: object): Record<string, unknown> => {
    const { form_id: form, ...rest } = write(w) as Record<string, unknown>;
    return { ...rest, form };
  };
}

const formParams = idParams('formId');
const webhookParams = idParams('webhookId');

export function v2WebhookRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    const toV2Webhook = v2Webhook(Webhook, app.getSchemas());
    const toV2Created = v2Webhook(WebhookCreated, app.getSchemas());
    v2Route(app, {
      method: 'GET',
      url: '/form/:formId/webhook',
      access: { scope: 'forms:read', level: 'edit', formFrom: 'formId' },
      operationId: 'v2ListWebhooks',
      summary: 'v2: the webhooks of a form',
      params: formParams,
      answer: '{"webhooks": [webhook, …], "total": n, "pages": n}',
      handler: async (req) => {
        const page = await service.listWebhooks(ctx, principal(req), req.params as { formId: number });
        return v2List('webhooks', page.webhooks.map(toV2Webhook), page.total, page.pages);
      },
    });
    v2Route(app, {
      method: 'POST',
      url: '/form/:formId/webhook',
      access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' },
      operationId: 'v2CreateWebhook',
      summary: 'v2: add a webhook (url, content_type, handshake_key, hmac_secret, include_field_type, events)',
      params: formParams,
      body: true,
      created: true,
      answer: 'The webhook, with its signing_secret this once',
      handler: async (req) => {
        const input = checked<WebhookCreate>(WebhookCreate, fromV2(parametersOf(req), WebhookCreate));
        return toV2Created(await service.createWebhook(ctx, principal(req), req.params as { formId: number }, input));
      },
    });
    v2Route(app, {
      method: 'GET',
      url: '/webhook/:webhookId',
      access: { scope: 'forms:read', level: 'edit', formFrom: 'webhookId' },
      operationId: 'v2GetWebhook',
      summary: 'v2: read a webhook',
      params: webhookParams,
      answer: 'The webhook',
      handler: async (req) =>
        toV2Webhook(await service.getWebhook(ctx, principal(req), req.params as { webhookId: number })),
    });
    v2Route(app, {
      method: 'PUT',
      url: '/webhook/:webhookId',
      access: { scope: 'forms:write', level: 'edit', formFrom: 'webhookId' },
      operationId: 'v2UpdateWebhook',
      summary: 'v2: change a webhook; only the parameters sent change',
      params: webhookParams,
      body: true,
      answer: 'The webhook',
      handler: async (req) => {
        const input = checked<WebhookUpdate>(WebhookUpdate, fromV2(parametersOf(req), WebhookUpdate));
        return toV2Webhook(
          await service.updateWebhook(ctx, principal(req), req.params as { webhookId: number }, input),
        );
      },
    });
    v2Route(app, {
      method: 'DELETE',
      url: '/webhook/:webhookId',
      access: { scope: 'forms:write', level: 'edit', formFrom: 'webhookId' },
      operationId: 'v2DeleteWebhook',
      summary: 'v2: delete a webhook',
      params: webhookParams,
      answer: '{"success": "1", "id": "<id>"}',
      handler: async (req) =>
        deleted((await service.deleteWebhook(ctx, principal(req), req.params as { webhookId: number })).id),
    });
  };
}
