/** v2 confirmation and notification emails: /form/{id}/confirmation, /confirmation/{id}, and the same for notifications. */
import type { TSchema } from '@sinclair/typebox';
import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { idParams } from '../../http/schemas.js';
import {
  Confirmation,
  ConfirmationCreate,
  ConfirmationUpdate,
  Notification,
  NotificationCreate,
  NotificationUpdate,
} from '../emails/schemas.js';
import * as service from '../emails/service.js';
import { v2Route } from './route.js';
import { checked, deleted, fromV2, parametersOf, v2List, v2Writer } from './wire.js';

/** An email as v2 writes it (v2Record, by its v2025 schema), its form as `form`. */
function v2Email(write: (e: unknown) => unknown) {
  return (e: object): Record<string, unknown> => {
    const { form_id: form, ...rest } = write(e) as Record<string, unknown>;
    return { ...rest, form };
  };
}

const KINDS = {
  confirmation: {
    create: ConfirmationCreate as TSchema,
    update: ConfirmationUpdate as TSchema,
    record: Confirmation as TSchema,
    Name: 'Confirmation',
  },
  notification: {
    create: NotificationCreate as TSchema,
    update: NotificationUpdate as TSchema,
    record: Notification as TSchema,
    Name: 'Notification',
  },
} as const;

export function v2EmailRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    for (const kind of ['confirmation', 'notification'] as const) {
      const { create, update, record, Name } = KINDS[kind];
      const toV2Email = v2Email(v2Writer(record, app.getSchemas()));
      const idName = `${kind}Id` as const;
      const params = idParams(idName);
      const idOf = (req: { params: unknown }) => (req.params as Record<string, number>)[idName]!;
      v2Route(app, {
        method: 'GET',
        url: `/form/:formId/${kind}`,
        access: { scope: 'forms:read', level: 'view', formFrom: 'formId' },
        operationId: `v2List${Name}s`,
        summary: `v2: the ${kind} emails of a form`,
        params: idParams('formId'),
        answer: `{"${kind}s": [${kind}, …], "total": n, "pages": n}`,
        handler: async (req) => {
          const page = await service.listEmails(ctx, principal(req), req.params as { formId: number }, kind);
          return v2List(`${kind}s`, page.items.map(toV2Email), page.total, page.pages);
        },
      });
      v2Route(app, {
        method: 'POST',
        url: `/form/:formId/${kind}`,
        access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' },
        operationId: `v2Create${Name}`,
        summary: `v2: add a ${kind} email (snake_case names of the v2025 body)`,
        params: idParams('formId'),
        body: true,
        created: true,
        answer: `The ${kind} email`,
        handler: async (req) => {
          const input = checked<Parameters<typeof service.createEmail>[4]>(create, fromV2(parametersOf(req), create));
          return toV2Email(
            await service.createEmail(ctx, principal(req), req.params as { formId: number }, kind, input),
          );
        },
      });
      v2Route(app, {
        method: 'GET',
        url: `/${kind}/:${idName}`,
        access: { scope: 'forms:read', level: 'view', formFrom: idName },
        operationId: `v2Get${Name}`,
        summary: `v2: read a ${kind} email`,
        params,
        answer: `The ${kind} email`,
        handler: async (req) => toV2Email(await service.getEmail(ctx, principal(req).accountId, kind, idOf(req))),
      });
      v2Route(app, {
        method: 'PUT',
        url: `/${kind}/:${idName}`,
        access: { scope: 'forms:write', level: 'edit', formFrom: idName },
        operationId: `v2Update${Name}`,
        summary: `v2: change a ${kind} email`,
        params,
        body: true,
        answer: `The ${kind} email`,
        handler: async (req) => {
          const input = checked<Parameters<typeof service.updateEmail>[4]>(update, fromV2(parametersOf(req), update));
          return toV2Email(await service.updateEmail(ctx, principal(req).accountId, kind, idOf(req), input));
        },
      });
      v2Route(app, {
        method: 'DELETE',
        url: `/${kind}/:${idName}`,
        access: { scope: 'forms:write', level: 'edit', formFrom: idName },
        operationId: `v2Delete${Name}`,
        summary: `v2: delete a ${kind} email`,
        params,
        answer: '{"success": "1", "id": "<id>"}',
        handler: async (req) => {
          await service.deleteEmail(ctx, principal(req).accountId, kind, idOf(req));
          return deleted(idOf(req));
        },
      });
    }
  };
}
