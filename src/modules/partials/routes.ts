import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { passwordFrom } from '../encryption/keys.js';
import { SubmissionListQuery } from '../submissions/schemas.js';
import { PartialDeleted, PartialList, PartialSubmission } from './schemas.js';
import * as service from './service.js';

const tags = ['Partial submissions'];
const PasswordHeaders = Type.Object({
  'x-formwork-encryption-password': Type.Optional(
    Type.String({
      description: "The form's encryption password: needed to read the values of an encrypted form's partials",
    }),
  ),
  'x-fs-encryption-password': Type.Optional(Type.String({ description: 'The same, under the original header name' })),
});

/** Spec 4.6: reading and deleting what people saved on hosted forms to finish later. */
export function partialRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/partialsubmission/:partialSubmissionId',
      {
        config: { access: { scope: 'submissions:read', level: 'view', formFrom: 'partialSubmissionId' } },
        schema: {
          tags,
          operationId: 'getPartialSubmission',
          summary: 'Read a partial submission',
          description:
            'What a person saved on the hosted form to finish later (values that passed their checks; files are not kept). ' +
            'On an encrypted form the values need the encryption password header (401 without it).',
          params: idParams('partialSubmissionId'),
          headers: PasswordHeaders,
          response: { 200: PartialSubmission, ...errors(401, 403, 404) },
        },
      },
      (req) =>
        service.getPartial(
          ctx,
          principal(req),
          { partialSubmissionId: req.params.partialSubmissionId },
          passwordFrom(req.headers),
        ),
    );

    app.delete(
      '/partialsubmission/:partialSubmissionId',
      {
        config: { access: { scope: 'submissions:write', level: 'submissions', formFrom: 'partialSubmissionId' } },
        schema: {
          tags,
          operationId: 'deletePartialSubmission',
          summary: 'Delete a partial submission',
          description: 'Its resume link stops working.',
          params: idParams('partialSubmissionId'),
          response: { 200: PartialDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.deletePartial(ctx, principal(req), { partialSubmissionId: req.params.partialSubmissionId }),
    );

    app.get(
      '/form/:formId/partialsubmission',
      {
        config: { access: { scope: 'submissions:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'listPartialSubmissions',
          summary: 'List the partial submissions of a form',
          description:
            'The parameters of the submission list, with the same meanings (minTime and maxTime bound the creation time in Eastern Time; ' +
            'keyword, search, data, expandData, prettyName, dataFormat). On an encrypted form, values, names and searches need the password header.',
          params: idParams('formId'),
          headers: PasswordHeaders,
          querystring: SubmissionListQuery,
          response: { 200: PartialList, ...errors(401, 403, 404) },
        },
      },
      (req) =>
        service.listPartials(ctx, principal(req), { formId: req.params.formId }, req.query, passwordFrom(req.headers)),
    );
  };
}
