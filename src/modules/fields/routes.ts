import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { errors, idParams, listBody } from '../../http/schemas.js';
import { Field, FieldCreate, FieldPreview, FieldUpdate } from './schemas.js';
import * as service from './service.js';

const tags = ['Fields'];
const formParams = idParams('formId');
const fieldParams = idParams('formId', 'fieldId');

export function fieldRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/forms/:formId/fields',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'listFields',
          summary: 'List the fields of a form, in display order',
          description: 'All fields on one page: a form holds at most 500.',
          params: formParams,
          response: { 200: listBody('fields', Type.Ref(Field)), ...errors(403, 404) },
        },
      },
      (req) => service.listFields(ctx, principal(req), { formId: req.params.formId }),
    );

    app.post(
      '/forms/:formId/fields',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'createField',
          summary: 'Add a field',
          params: formParams,
          body: FieldCreate,
          response: { 200: Type.Ref(Field), ...errors(403, 404) },
        },
      },
      (req) => service.createField(ctx, principal(req), { formId: req.params.formId }, req.body),
    );

    app.get(
      '/forms/:formId/fields/:fieldId',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'getField',
          summary: 'Read a field',
          params: fieldParams,
          response: { 200: Type.Ref(Field), ...errors(403, 404) },
        },
      },
      (req) => service.getField(ctx, principal(req), { formId: req.params.formId, fieldId: req.params.fieldId }),
    );

    app.put(
      '/forms/:formId/fields/:fieldId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'updateField',
          summary: 'Change a field',
          description:
            'Only the properties sent change. A new type starts from empty attributes, options and default value unless they are sent too.',
          params: fieldParams,
          body: FieldUpdate,
          response: { 200: Type.Ref(Field), ...errors(403, 404) },
        },
      },
      (req) =>
        service.updateField(ctx, principal(req), { formId: req.params.formId, fieldId: req.params.fieldId }, req.body),
    );

    app.delete(
      '/forms/:formId/fields/:fieldId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'deleteField',
          summary: 'Delete a field permanently',
          description: 'Logic checks of other fields that point at it are removed with it.',
          params: fieldParams,
          response: { 200: FieldPreview, ...errors(404) },
        },
      },
      (req) => service.deleteField(ctx, principal(req), { formId: req.params.formId, fieldId: req.params.fieldId }),
    );
  };
}
