import { PassThrough } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import type { AppContext } from '../../context.js';
import { BadRequestError } from '../../errors.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { watchUploadRate, type BodyTimeoutError } from '../../http/timeouts.js';
import { ServiceUploadDone, ServiceUploadQuery, UploadUrls, UploadUrlsRequest } from './schemas.js';
import * as service from './service.js';

/** RFC 6266 with RFC 5987's filename* for names that are not plain ASCII. */
export function contentDisposition(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return fallback === filename
    ? `attachment; filename="${filename}"`
    : `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

const UPLOAD_FLOW =
  "File upload flow: (1) call this with the file names; (2) PUT each file's bytes to its uploadUrl (no JSON, no token; " +
  "not subject to the JSON body limit), once, within 2 hours; (3) send the fileKeys as the field's subvalues when " +
  "creating or editing a submission. With the local storage driver the uploadUrl is this service's own signed URL, which " +
  "enforces the field's maxFileSize while the bytes arrive (413 file_too_large, nothing kept), refuses an empty file " +
  '(400 invalid_request, nothing kept, the URL stays usable), takes one complete upload ' +
  '(409 upload_url_used after it, and while another PUT to it is under way; a refused or broken upload may be retried, also one ' +
  'cut off by a crash of the service, as soon as the service process that took it is known to have stopped), cuts off an upload that averages less than ' +
  'UPLOAD_MIN_BYTES_PER_SECOND (1 KiB/s by default) over a window of REQUEST_TIMEOUT_MS (408 body_timeout, nothing kept, retry allowed) ' +
  'and answers 410 upload_url_expired after 2 hours. ' +
  'With the S3 driver it is a presigned PUT straight to the bucket, which can enforce neither the size limit nor single ' +
  "use: the object's size is checked when a submission claims the fileKey, and an object over the limit is deleted and " +
  'the submission refused (an empty object refuses it too). The submission keeps a copy of the checked object, so a PUT to ' +
  'the URL after that changes nothing it holds. Uploads that no submission claims are removed once their URL expires.';

/** The API route that issues upload URLs for a field (a submission's file is read through the submissions routes). */
export function uploadRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/forms/:formId/fields/:fieldId/upload-urls',
      {
        config: { access: { scope: 'submissions:write', level: 'submissions', formFrom: 'formId' } },
        schema: {
          tags: ['Fields'],
          operationId: 'createUploadUrls',
          summary: 'Get upload URLs and fileKeys for files of a file or signature field',
          description:
            `${UPLOAD_FLOW} 400 when filenames is missing or empty, names more files than the field's maxFiles (default 1; ` +
            'a signature takes one), has a bad name (empty, over 255 characters (code points), / or \\, control characters ' +
            '(U+0000–U+001F, U+007F–U+009F) or bidirectional controls (U+200E, U+200F, U+061C, U+202A–U+202E, U+2066–U+2069)) ' +
            'or an extension outside allowedTypes, ' +
            'or when the field is not a file or signature field.',
          params: idParams('formId', 'fieldId'),
          body: UploadUrlsRequest,
          response: { 200: UploadUrls, ...errors(403, 404) },
        },
      },
      (req) =>
        service.issueUploadUrls(
          ctx,
          principal(req),
          { formId: req.params.formId, fieldId: req.params.fieldId },
          req.body.filenames,
        ),
    );
  };
}

/**
 * PUT /uploads/{fileKey}: the service's own signed upload URL, outside the token API. The
 * body is any bytes, read as a stream (no JSON parsing, no JSON body limit): the field's
 * size limit is enforced while it arrives.
 */
export function serviceUploadRoute(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    // Every content type, left unread for the handler to stream.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_req, _payload, done) => done(null));

    app.put(
      '/uploads/:fileKey',
      {
        config: { streamedBody: true },
        schema: {
          hide: true,
          params: Type.Object({ fileKey: Type.String({ maxLength: 100 }) }, { additionalProperties: false }),
          querystring: ServiceUploadQuery,
          response: { 200: ServiceUploadDone, ...errors(403, 408, 409, 410, 413) },
        },
      },
      async (req, reply) => {
        const length = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
        // The request stays readable for a 4xx: it is unpiped rather than destroyed when storage stops.
        const body = new PassThrough();
        req.raw.pipe(body);
        // pipe() does not pass on a client that goes away: without this, storage would wait forever.
        // Storage learns of it through its own pipeline; this listener keeps a client that goes
        // away before storage starts reading from being an uncaught exception.
        body.on('error', () => undefined);
        // A client that goes away is the client's doing, like any refused request: a 400 (that
        // nobody receives), whatever error storage then meets, not a 500 logged as an error.
        let interrupted: BadRequestError | undefined;
        req.raw.on('close', () => {
          if (req.raw.complete || body.destroyed) return;
          interrupted = new BadRequestError('bad_request', 'The upload was interrupted before its end', {
            cause: new Error('the client closed the connection'),
          });
          body.destroy(interrupted);
        });
        // A client that stalls is cut off like a broken upload: storage keeps nothing, the URL can be used again.
        let tooSlow: BodyTimeoutError | undefined;
        watchUploadRate(
          req.raw,
          { bytesPerSecond: ctx.config.uploadMinBytesPerSecond, windowMs: ctx.config.requestTimeoutMs },
          (error) => {
            tooSlow = error;
            body.destroy(error);
          },
        );
        try {
          return await service.receiveUpload(
            ctx,
            req.params.fileKey,
            req.query,
            body,
            Number.isFinite(length) ? length : undefined,
          );
        } catch (error) {
          req.raw.unpipe(body);
          body.destroy();
          // The rest of a refused body is not worth reading: answer and close the connection.
          if (!req.raw.complete) (reply as FastifyReply).header('connection', 'close');
          throw tooSlow ?? interrupted ?? error;
        }
      },
    );
  };
}
