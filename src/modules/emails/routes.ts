import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import {
  Confirmation,
  ConfirmationCreate,
  ConfirmationList,
  ConfirmationUpdate,
  EmailPreview,
  MailList,
  MailListQuery,
  MailMessage,
  Notification,
  NotificationCreate,
  NotificationList,
  NotificationUpdate,
} from './schemas.js';
import * as service from './service.js';
import { renderThread } from './threaded-render.js';

const formParams = idParams('formId');
const confirmationParams = idParams('confirmationId');
const notificationParams = idParams('notificationId');

const SENDING =
  'Sent for each new submission whose values meet the logic, as a job of the outbox: through SMTP_URL, or into the mail log without it (docs/emails.md).';

export function emailRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    // The process's render thread, if one was started, goes with the app (once its renders queued have run).
    app.addHook('onClose', () => renderThread.close());
    // ---------------------------------------------------------------- confirmations
    const confirmations = ['Confirmation emails'];

    app.get(
      '/forms/:formId/confirmations',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags: confirmations,
          operationId: 'listConfirmations',
          summary: 'List the confirmation emails of a form',
          description: 'All on one page: a form holds at most 20.',
          params: formParams,
          response: { 200: ConfirmationList, ...errors(403, 404) },
        },
      },
      async (req) => {
        const { items, ...paging } = await service.listEmails(
          ctx,
          principal(req),
          { formId: req.params.formId },
          'confirmation',
        );
        return { confirmations: items, ...paging };
      },
    );

    app.post(
      '/forms/:formId/confirmations',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags: confirmations,
          operationId: 'createConfirmation',
          summary: 'Add a confirmation email, sent to the respondent',
          description: `Goes to the address in recipientField, an email field of the form. ${SENDING}`,
          params: formParams,
          body: ConfirmationCreate,
          response: { 201: Type.Ref(Confirmation), ...errors(403, 404) },
        },
      },
      async (req, reply) => {
        const created = await service.createEmail(
          ctx,
          principal(req),
          { formId: req.params.formId },
          'confirmation',
          req.body,
        );
        return reply.code(201).send(created);
      },
    );

    app.get(
      '/confirmations/:confirmationId',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'confirmationId' } },
        schema: {
          tags: confirmations,
          operationId: 'getConfirmation',
          summary: 'Read a confirmation email',
          params: confirmationParams,
          response: { 200: Type.Ref(Confirmation), ...errors(403, 404) },
        },
      },
      (req) => service.getEmail(ctx, principal(req).accountId, 'confirmation', req.params.confirmationId),
    );

    app.put(
      '/confirmations/:confirmationId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'confirmationId' } },
        schema: {
          tags: confirmations,
          operationId: 'updateConfirmation',
          summary: 'Change a confirmation email',
          description: 'Only the properties sent change; jobs already queued send with the email as it is then.',
          params: confirmationParams,
          body: ConfirmationUpdate,
          response: { 200: Type.Ref(Confirmation), ...errors(403, 404) },
        },
      },
      (req) => service.updateEmail(ctx, principal(req).accountId, 'confirmation', req.params.confirmationId, req.body),
    );

    app.delete(
      '/confirmations/:confirmationId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'confirmationId' } },
        schema: {
          tags: confirmations,
          operationId: 'deleteConfirmation',
          summary: 'Delete a confirmation email permanently',
          description: 'Sends of it still queued send nothing.',
          params: confirmationParams,
          response: { 200: EmailPreview, ...errors(403, 404) },
        },
      },
      (req) => service.deleteEmail(ctx, principal(req).accountId, 'confirmation', req.params.confirmationId),
    );

    // ---------------------------------------------------------------- notifications
    const notifications = ['Notification emails'];

    app.get(
      '/forms/:formId/notifications',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags: notifications,
          operationId: 'listNotifications',
          summary: 'List the notification emails of a form',
          description: 'All on one page: a form holds at most 20.',
          params: formParams,
          response: { 200: NotificationList, ...errors(403, 404) },
        },
      },
      async (req) => {
        const { items, ...paging } = await service.listEmails(
          ctx,
          principal(req),
          { formId: req.params.formId },
          'notification',
        );
        return { notifications: items, ...paging };
      },
    );

    app.post(
      '/forms/:formId/notifications',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags: notifications,
          operationId: 'createNotification',
          summary: 'Add a notification email, sent to set recipients',
          description: SENDING,
          params: formParams,
          body: NotificationCreate,
          response: { 201: Type.Ref(Notification), ...errors(403, 404) },
        },
      },
      async (req, reply) => {
        const created = await service.createEmail(
          ctx,
          principal(req),
          { formId: req.params.formId },
          'notification',
          req.body,
        );
        return reply.code(201).send(created);
      },
    );

    app.get(
      '/notifications/:notificationId',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'notificationId' } },
        schema: {
          tags: notifications,
          operationId: 'getNotification',
          summary: 'Read a notification email',
          params: notificationParams,
          response: { 200: Type.Ref(Notification), ...errors(403, 404) },
        },
      },
      (req) => service.getEmail(ctx, principal(req).accountId, 'notification', req.params.notificationId),
    );

    app.put(
      '/notifications/:notificationId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'notificationId' } },
        schema: {
          tags: notifications,
          operationId: 'updateNotification',
          summary: 'Change a notification email',
          description: 'Only the properties sent change; jobs already queued send with the email as it is then.',
          params: notificationParams,
          body: NotificationUpdate,
          response: { 200: Type.Ref(Notification), ...errors(403, 404) },
        },
      },
      (req) => service.updateEmail(ctx, principal(req).accountId, 'notification', req.params.notificationId, req.body),
    );

    app.delete(
      '/notifications/:notificationId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'notificationId' } },
        schema: {
          tags: notifications,
          operationId: 'deleteNotification',
          summary: 'Delete a notification email permanently',
          description: 'Sends of it still queued send nothing.',
          params: notificationParams,
          response: { 200: EmailPreview, ...errors(403, 404) },
        },
      },
      (req) => service.deleteEmail(ctx, principal(req).accountId, 'notification', req.params.notificationId),
    );

    // ---------------------------------------------------------------- mail log
    const mailLog = ['Mail log'];

    app.get(
      '/mail-log',
      {
        config: { access: { scope: 'submissions:read', role: 'admin' } },
        schema: {
          tags: mailLog,
          operationId: 'listMailLog',
          summary: 'List the messages kept in the mail log, newest first',
          description:
            'Without SMTP_URL, every email is kept here instead of sent, so that a single-machine install loses none.',
          querystring: MailListQuery,
          response: { 200: MailList, ...errors(403) },
        },
      },
      (req) => service.listMail(ctx, principal(req).accountId, req.query),
    );

    app.get(
      '/mail-log/:messageId',
      {
        config: { access: { scope: 'submissions:read', role: 'admin' } },
        schema: {
          tags: mailLog,
          operationId: 'getMailLogMessage',
          summary: 'Read one message of the mail log',
          params: idParams('messageId'),
          response: { 200: Type.Ref(MailMessage), ...errors(403, 404) },
        },
      },
      (req) => service.getMail(ctx, principal(req).accountId, req.params.messageId),
    );
  };
}
