import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { etagMatches } from '../../http/versioned-cache.js';
import {
  CopyQuery,
  Form,
  FormCreate,
  FormList,
  FormListQuery,
  FormPreview,
  FormUpdate,
  WithFieldsQuery,
} from './schemas.js';
import { FORM_READ_ACCESS, FORM_READ_HEADERS } from './early-read.js';
import * as service from './service.js';

const tags = ['Forms'];
/** One form without fields, as an item of the list: its serializer is compiled once (Fastify keeps it by schema). */
const FormRecord = Type.Ref(Form);
const params = idParams('formId');
const HASHING =
  'A password sent to protect or open the form (encryptionPassword, newEncryptionPassword) is hashed with scrypt. Each hash counts ' +
  "against the account's budget (ACCOUNT_HASH_ATTEMPTS per 15 minutes, 429 beyond it), and 503 hashing_busy with Retry-After " +
  'answers while the service is hashing as many passwords as it can queue.';

/** readCache: what the form read and the list keep; app.ts shares it with earlyFormRead. */
export function formRoutes(ctx: AppContext, readCache: service.FormReadCaches): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/forms',
      {
        config: { access: { scope: 'forms:read' } },
        schema: {
          tags,
          operationId: 'listForms',
          summary: 'List forms',
          description:
            'Live forms of the account; with deleted=true, its deleted forms instead. An unknown folder gives 404.',
          querystring: FormListQuery,
          response: { 200: FormList, ...errors(404) },
        },
      },
      async (req, reply) => {
        const body = await service.listFormsJson(ctx, readCache, principal(req), req.query, {
          form: (form) => String(reply.compileSerializationSchema(FormRecord)(form)),
          page: (page) => String(reply.serialize(page)),
        });
        // Already JSON text (see getForm).
        return (reply as FastifyReply).type('application/json; charset=utf-8').send(body);
      },
    );

    app.post(
      '/forms',
      {
        config: { access: { scope: 'forms:write' } },
        schema: {
          tags,
          operationId: 'createForm',
          summary: 'Create a form, optionally with its fields',
          description: HASHING,
          body: FormCreate,
          response: { 200: Type.Ref(Form), ...errors(403, 404) },
        },
      },
      (req) => service.createForm(ctx, principal(req), req.body),
    );

    app.get(
      '/forms/:formId',
      {
        config: { access: FORM_READ_ACCESS },
        schema: {
          tags,
          operationId: 'getForm',
          summary: 'Read a form',
          description:
            'Answers with an ETag; a request whose If-None-Match names the current one gets 304 and no body.',
          params,
          querystring: WithFieldsQuery,
          response: {
            200: Type.Ref(Form),
            304: Type.Null({ description: 'Not modified since the ETag in If-None-Match' }),
            ...errors(403, 404),
          },
        },
      },
      async (req, reply) => {
        const { etag, body } = await service.readFormJson(
          ctx,
          readCache,
          principal(req),
          { formId: req.params.formId },
          req.query.withFields,
          (form) => String(reply.serialize(form)),
        );
        // The body is already JSON, so the reply is sent untyped rather than re-serialized.
        const raw = reply as FastifyReply;
        raw.header('etag', etag).header('cache-control', FORM_READ_HEADERS['cache-control']);
        if (etagMatches(req.headers['if-none-match'], etag)) return raw.code(304).send();
        return raw.type(FORM_READ_HEADERS['content-type']).send(body);
      },
    );

    app.put(
      '/forms/:formId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'updateForm',
          summary: 'Update a form',
          description: HASHING,
          params,
          body: FormUpdate,
          response: { 200: Type.Ref(Form), ...errors(403, 404) },
        },
      },
      (req) => service.updateForm(ctx, principal(req), { formId: req.params.formId }, req.body),
    );

    app.delete(
      '/forms/:formId',
      {
        config: { access: { scope: 'forms:write', level: 'full', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'deleteForm',
          summary: 'Delete a form (soft)',
          description:
            'The form leaves listings and reads and takes no submissions; its fields and data stay. ' +
            'GET /forms?deleted=true lists deleted forms and POST /forms/{formId}/restore brings one back.',
          params,
          response: { 200: FormPreview, ...errors(404) },
        },
      },
      (req) => service.deleteForm(ctx, principal(req), { formId: req.params.formId }),
    );

    app.post(
      '/forms/:formId/restore',
      {
        config: { access: { scope: 'forms:write', level: 'full', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'restoreForm',
          summary: 'Restore a deleted form',
          params,
          response: { 200: Type.Ref(Form), ...errors(403, 404) },
        },
      },
      (req) => service.restoreForm(ctx, principal(req), { formId: req.params.formId }),
    );

    app.post(
      '/forms/:formId/copy',
      {
        config: { access: { scope: 'forms:write', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'copyForm',
          summary: 'Copy a form with its fields',
          description:
            'The copy is named "<name> (copy)" and sits in the same folder unless folder is given. template names another ' +
            "form of the account whose settings and submit button the copy takes instead of the original's; a member needs " +
            "the view level on it too (403 otherwise). Another account's template or folder answers 404.",
          params,
          querystring: CopyQuery,
          response: { 200: Type.Ref(Form), ...errors(403, 404) },
        },
      },
      (req) => service.copyForm(ctx, principal(req), { formId: req.params.formId }, req.query),
    );
  };
}
