import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { passwordFrom } from '../encryption/keys.js';
import { submissionsDeps } from '../submissions/definitions.js';
import { PasswordHeaders } from '../submissions/routes.js';
import { contentDisposition } from '../uploads/routes.js';
import {
  Docmerge,
  DocmergeCreate,
  DocmergeDeleted,
  DocmergeList,
  DocmergeRunList,
  DocmergeUpdate,
  PreviewBody,
  RunListQuery,
} from './schemas.js';
import * as service from './service.js';
import { mergeThread } from './threaded-merge.js';
import type { DocumentDownload } from './service.js';

const tags = ['Integrations'];
const formParams = idParams('formId');
const integrationParams = idParams('formId', 'integrationId');
const more = 'Templates, merge tags, loops, conditions and encrypted forms: docs/docmerge.md.';
/** A made document's answer: its bytes, as a DOCX or a PDF. */
const binary = {
  description: 'The document, with its name in Content-Disposition',
  content: {
    'application/vnd.openxmlformats-officedocument.wordprocessingml.document': {
      schema: Type.String({ format: 'binary' }),
    },
    'application/pdf': { schema: Type.String({ format: 'binary' }) },
  },
};

function sendDocument(reply: FastifyReply, file: DocumentDownload) {
  return reply
    .type(file.contentType)
    .header('content-length', String(file.size))
    .header('content-disposition', contentDisposition(file.filename))
    .header('x-content-type-options', 'nosniff')
    .send(file.stream);
}

// Integrations act on a form's submissions and send them out (documents, emails), so members
// need the edit level on the form even to read one, as for webhooks.
export function docmergeRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  const deps = submissionsDeps(ctx);
  return async (app) => {
    // The process's merge thread, if one was started, goes with the app (once its merges queued have run).
    app.addHook('onClose', () => mergeThread.close());
    app.get(
      '/forms/:formId/integrations',
      {
        config: { access: { scope: 'forms:read', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'listIntegrations',
          summary: 'List the integrations of a form',
          params: formParams,
          response: { 200: DocmergeList, ...errors(403, 404) },
        },
      },
      (req) => service.listIntegrations(ctx, principal(req), { formId: req.params.formId }),
    );

    app.post(
      '/forms/:formId/integrations/docmerge',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'createDocmergeIntegration',
          summary: 'Add a document-merge integration to a form',
          description:
            'Each new submission of the form is merged into the template (a DOCX with {merge tags}, or a PDF with ' +
            'fillable fields) by a background job; the document is attached to the submission (its detailed record ' +
            'lists it) and optionally emailed. 400 invalid_integration names, in details, a template that cannot be ' +
            `read, each tag that names no field of the form, and each mapping to a field of no use. ${more}`,
          params: formParams,
          body: DocmergeCreate,
          response: { 201: Type.Ref(Docmerge), ...errors(403, 404) },
        },
      },
      async (req, reply) => {
        const created = await service.createIntegration(ctx, principal(req), { formId: req.params.formId }, req.body);
        return (reply as FastifyReply).code(201).send(created);
      },
    );

    app.get(
      '/forms/:formId/integrations/:integrationId',
      {
        config: { access: { scope: 'forms:read', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'getIntegration',
          summary: 'Read an integration of a form',
          params: integrationParams,
          response: { 200: Type.Ref(Docmerge), ...errors(403, 404) },
        },
      },
      (req) => service.getIntegration(ctx, principal(req), req.params),
    );

    app.put(
      '/forms/:formId/integrations/:integrationId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'updateIntegration',
          summary: 'Change an integration of a form',
          description: `Checked as on create. Documents already made stay as they are. ${more}`,
          params: integrationParams,
          body: DocmergeUpdate,
          response: { 200: Type.Ref(Docmerge), ...errors(403, 404) },
        },
      },
      (req) => service.updateIntegration(ctx, principal(req), req.params, req.body),
    );

    app.delete(
      '/forms/:formId/integrations/:integrationId',
      {
        config: { access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'deleteIntegration',
          summary: 'Delete an integration and its run log',
          description: 'Documents it made stay with their submissions; documents still queued are not made.',
          params: integrationParams,
          response: { 200: DocmergeDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.deleteIntegration(ctx, principal(req), req.params),
    );

    app.get(
      '/forms/:formId/integrations/:integrationId/runs',
      {
        config: { access: { scope: 'forms:read', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'listIntegrationRuns',
          summary: "An integration's run log, newest first",
          description:
            'One entry per attempt of each document (made, exists, skipped or failed), kept JOB_RETENTION_DAYS.',
          params: integrationParams,
          querystring: RunListQuery,
          response: { 200: DocmergeRunList, ...errors(403, 404) },
        },
      },
      (req) => service.listRuns(ctx, principal(req), req.params, req.query),
    );

    // A preview is a submission's values merged into a template (one the body may bring): it needs
    // submissions:read, as the made document's download does, not only forms:read, which reads forms.
    app.post(
      '/forms/:formId/integrations/:integrationId/preview',
      {
        config: { access: { scope: 'submissions:read', level: 'edit', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'previewIntegration',
          summary: 'Merge the template with a submission, without keeping the result',
          description:
            'The document as the integration would make it from this submission of the form, whatever its ' +
            'conditions and whether it is active; nothing is stored or sent. An encrypted form needs its password.',
          params: integrationParams,
          headers: PasswordHeaders,
          body: PreviewBody,
          response: { 200: binary, ...errors(403, 404) },
        },
      },
      async (req, reply) =>
        sendDocument(
          reply as FastifyReply,
          await service.previewIntegration(deps, principal(req), req.params, req.body, passwordFrom(req.headers)),
        ),
    );

    app.get(
      '/submissions/:submissionId/documents/:documentId',
      {
        config: { access: { scope: 'submissions:read', level: 'view', formFrom: 'submissionId' } },
        schema: {
          tags: ['Submissions'],
          operationId: 'downloadSubmissionDocument',
          summary: 'Download a document made from a submission',
          description:
            "A document that an integration made from the submission (its detailed record's documents). On an " +
            'encrypted form the document is sealed and the encryption password header is needed.',
          params: idParams('submissionId', 'documentId'),
          headers: PasswordHeaders,
          response: { 200: binary, ...errors(403, 404) },
        },
      },
      async (req, reply) =>
        sendDocument(
          reply as FastifyReply,
          await service.openDocument(
            deps,
            principal(req),
            { submissionId: req.params.submissionId },
            req.params.documentId,
            passwordFrom(req.headers),
          ),
        ),
    );
  };
}
