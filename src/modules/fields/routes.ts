import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { errors, idParams, listBody } from '../../http/schemas.js';
import { passwordFrom } from '../encryption/keys.js';
import { Field, FieldCreate, FieldPreview, FieldUpdate } from './schemas.js';
import * as service from './service.js';

const tags = ['Fields'];
const formParams = idParams('formId');
const fieldParams = idParams('formId', 'fieldId');
const PasswordHeaders = Type.Object({
  'x-formwork-encryption-password': Type.Optional(
    Type.String({
      description:
        "The form's encryption password: needed on an encrypted form with submissions to make a field unique or change a unique field's type or options, which reads every submission's value (401 without it)",
    }),
  ),
  'x-fs-encryption-password': Type.Optional(
    Type.String({ description: 'The same, under the header name of the original service' }),
  ),
});

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
            'Only the properties sent change. A new type starts from empty attributes, options and default value unless they are sent too. ' +
            "Making a field unique, or changing a unique field's type or options, stores the value of every submission the form holds " +
            "as a new one's would be, in the same change: 409 `duplicate` naming a few submissions when two hold the same value (nothing changes), " +
            "and on an encrypted form with submissions the encryption password header is needed to read them. Other fields' logic checks " +
            'that a new type or new options no longer fit are removed, as when the field is deleted; logic left with no checks is removed.',
          params: fieldParams,
          headers: PasswordHeaders,
          body: FieldUpdate,
          response: { 200: Type.Ref(Field), ...errors(403, 404, 409) },
        },
      },
      (req) =>
        service.updateField(
          ctx,
          principal(req),
          { formId: req.params.formId, fieldId: req.params.fieldId },
          req.body,
          passwordFrom(req.headers),
        ),
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
