import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { passwordFrom } from '../encryption/keys.js';
import {
  AccountSearchQuery,
  CountQuery,
  CountRecord,
  ExportQuery,
  Submission,
  SubmissionCreate,
  SubmissionDeleted,
  SubmissionList,
  SubmissionListQuery,
  SubmissionUpdate,
} from './schemas.js';
import { contentDisposition } from '../uploads/routes.js';
import { UploadQuery } from '../uploads/schemas.js';
import type { SubmissionsDeps } from './definitions.js';
import { CREATE_ACCESS } from './early-create.js';
import { exportSubmissions } from './export.js';
import { countSubmissions, getSubmission, listSubmissions, openSubmissionFile, searchAccount } from './query.js';
import { requestMetaOf } from '../../http/request-meta.js';
import { createWithKey, deleteSubmission, updateSubmission } from './write.js';

const tags = ['Submissions'];
const formParams = idParams('formId');
const submissionParams = idParams('submissionId');
const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      description:
        'Makes retries safe: the same key and body within 24 hours return the first response without a second submission',
    }),
  ),
});

export const PasswordHeaders = Type.Object({
  'x-formwork-encryption-password': Type.Optional(
    Type.String({
      description:
        "The form's encryption password: needed on an encrypted form to read, edit, export or search submissions (401 without it)",
    }),
  ),
  'x-fs-encryption-password': Type.Optional(
    Type.String({ description: 'The same, under the header name of the original service' }),
  ),
});

/** The routes of submissions, on deps that the early create (early-create.ts) shares: one definition cache, one batcher. */
export function submissionRoutes(deps: SubmissionsDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/forms/:formId/submissions',
      {
        config: {
          access: CREATE_ACCESS,
          requestIdPassed: true,
        },
        schema: {
          tags,
          operationId: 'createSubmission',
          summary: 'Submit a form',
          description:
            'Every value is checked against its field (required unless hidden by logic, formats, bounds, options, subfields, unique). ' +
            'An inactive form answers 409 form_inactive, one at its submissionLimit 409 form_full. With Idempotency-Key: a retry with the same ' +
            'key and body returns the first response (header Idempotent-Replayed: true; on an encrypted form without its values, of which no plaintext copy is kept), another body with the key 422, a retry while the first still runs 409 idempotency_in_progress with Retry-After (retry after that many seconds with the same key: never a new key, which could submit twice). A first request whose process stopped (crashed, killed) does not hold its key: the next retry runs the request. An encrypted form takes submissions without its password.',
          params: formParams,
          headers: IdempotencyHeaders,
          body: SubmissionCreate,
          response: { 200: Type.Ref(Submission), ...errors(403, 404, 409, 422) },
        },
      },
      async (req, reply) => {
        const outcome = await createWithKey(deps, principal(req), req.params.formId, req.body, requestMetaOf(req), {
          key: req.headers['idempotency-key'],
          url: req.url,
        });
        if (!outcome.replayed) return outcome.result;
        const raw = reply as FastifyReply;
        return raw
          .code(outcome.response.status)
          .header('idempotent-replayed', 'true')
          .type('application/json; charset=utf-8')
          .send(outcome.response.body);
      },
    );

    app.get(
      '/forms/:formId/submissions',
      {
        config: { access: { scope: 'submissions:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'listSubmissions',
          summary: 'List and search the submissions of a form',
          description:
            'On an encrypted form, data, expandData, dataFormat=standardized, prettyName, keyword and search need the encryption password header; a search then opens every submission of the form (in the time range, when given).',
          params: formParams,
          headers: PasswordHeaders,
          querystring: SubmissionListQuery,
          response: { 200: SubmissionList, ...errors(403, 404) },
        },
      },
      (req) =>
        listSubmissions(deps, principal(req), { formId: req.params.formId }, req.query, passwordFrom(req.headers)),
    );

    app.get(
      '/forms/:formId/submissions/count',
      {
        config: { access: { scope: 'submissions:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'countSubmissions',
          summary: 'Count the submissions of a form',
          description:
            'Without parameters, all of them. startDate alone: from then on. lookbackPeriod (1 to 7): the whole Eastern Time days ' +
            "ending with startDate's day (or today), counted backwards.",
          params: formParams,
          querystring: CountQuery,
          response: { 200: CountRecord, ...errors(403, 404) },
        },
      },
      (req) => countSubmissions(deps, principal(req), { formId: req.params.formId }, req.query),
    );

    app.get(
      '/forms/:formId/submissions/export',
      {
        config: { access: { scope: 'submissions:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'exportSubmissions',
          summary: 'Export every matching submission as CSV or NDJSON',
          description:
            "Takes the list filters. Streams, with memory that does not grow with the number of rows. CSV cells that start like a formula get a leading '.",
          params: formParams,
          headers: PasswordHeaders,
          querystring: ExportQuery,
          response: {
            200: {
              description: 'Every matching submission: a CSV row each, or a detailed record a line (NDJSON)',
              content: {
                'text/csv': { schema: Type.String() },
                'application/x-ndjson': { schema: Type.String() },
              },
            },
            ...errors(403, 404),
          },
        },
      },
      async (req, reply) => {
        const out = await exportSubmissions(
          deps,
          principal(req),
          { formId: req.params.formId },
          req.query,
          passwordFrom(req.headers),
        );
        const raw = reply as FastifyReply;
        raw.type(out.contentType).header('content-disposition', `attachment; filename="${out.filename}"`);
        // One chunk (a batch of rows) read ahead at most: the next batch is read as the socket drains.
        return raw.send(Readable.from(out.lines, { highWaterMark: 1 }));
      },
    );

    app.get(
      '/submissions/:submissionId',
      {
        config: { access: { scope: 'submissions:read', level: 'view', formFrom: 'submissionId' } },
        schema: {
          tags,
          operationId: 'getSubmission',
          summary: 'Read a submission',
          params: submissionParams,
          headers: PasswordHeaders,
          response: { 200: Type.Ref(Submission), ...errors(403, 404) },
        },
      },
      (req) =>
        getSubmission(deps, principal(req), { submissionId: req.params.submissionId }, passwordFrom(req.headers)),
    );

    app.put(
      '/submissions/:submissionId',
      {
        config: { access: { scope: 'submissions:write', level: 'submissions', formFrom: 'submissionId' } },
        schema: {
          tags,
          operationId: 'updateSubmission',
          summary: 'Edit a submission',
          description: 'Only the fields named change (null clears one); the result is checked as on create.',
          params: submissionParams,
          headers: PasswordHeaders,
          body: SubmissionUpdate,
          response: { 200: Type.Ref(Submission), ...errors(403, 404, 409) },
        },
      },
      (req) =>
        updateSubmission(
          deps,
          principal(req),
          { submissionId: req.params.submissionId },
          req.body,
          passwordFrom(req.headers),
        ),
    );

    app.delete(
      '/submissions/:submissionId',
      {
        config: { access: { scope: 'submissions:write', level: 'submissions', formFrom: 'submissionId' } },
        schema: {
          tags,
          operationId: 'deleteSubmission',
          summary: 'Delete a submission permanently, with all its data',
          params: submissionParams,
          response: { 200: SubmissionDeleted, ...errors(403, 404) },
        },
      },
      (req) => deleteSubmission(deps, principal(req), { submissionId: req.params.submissionId }),
    );

    app.get(
      '/submissions',
      {
        config: { access: { scope: 'submissions:read' } },
        schema: {
          tags,
          operationId: 'searchSubmissions',
          summary: 'Search submissions across all forms',
          description:
            'Keyword search over every live form of the account, newest first, each with its standardized data.',
          querystring: AccountSearchQuery,
          response: { 200: SubmissionList, ...errors() },
        },
      },
      (req) => searchAccount(deps, principal(req), req.query),
    );

    app.get(
      '/submissions/:submissionId/upload',
      {
        config: { access: { scope: 'submissions:read', level: 'view', formFrom: 'submissionId' } },
        schema: {
          tags: ['Submissions'],
          operationId: 'downloadSubmissionFile',
          summary: 'Download a file of a submission',
          description:
            'The bytes of the index-th file (zero-based, default 0) of a file or signature field, as application/octet-stream ' +
            "with the original name in Content-Disposition. On an encrypted form the encryption password header is needed. 404 when the submission, the field's value or the file does not exist.",
          params: idParams('submissionId'),
          headers: PasswordHeaders,
          querystring: UploadQuery,
          response: {
            200: {
              description: 'The file, with its original name in Content-Disposition',
              content: { 'application/octet-stream': { schema: Type.String({ format: 'binary' }) } },
            },
            ...errors(403, 404),
          },
        },
      },
      async (req, reply) => {
        const file = await openSubmissionFile(
          deps,
          principal(req),
          { submissionId: req.params.submissionId },
          { fieldId: req.query.fieldId, index: req.query.index },
          passwordFrom(req.headers),
        );
        const raw = reply as FastifyReply;
        return raw
          .type('application/octet-stream')
          .header('content-length', String(file.size))
          .header('content-disposition', contentDisposition(file.filename))
          .header('x-content-type-options', 'nosniff')
          .send(file.stream);
      },
    );
  };
}
