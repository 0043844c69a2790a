import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest, FastifySchemaCompiler } from 'fastify';
import type { AppContext } from '../../context.js';
import { validatorCompiler } from '../../http/validation.js';
import { readImagePart } from './part.js';

/**
 * What the routes that take an image (an option's image, a portal's avatar) share: multipart
 * bodies read in their own scope only (the rest of the API takes JSON alone), the body left to
 * readImagePart rather than a validator, and the limits read from the settings.
 */
export async function withMultipart(app: FastifyInstance, routes: (scope: FastifyInstance) => void): Promise<void> {
  await app.register(async (scope) => {
    // A file past the limit is refused by readImagePart, which reads it to its end while it can.
    await scope.register(multipart, { throwFileSizeLimit: false });
    // An answer given before the body's end (a multipart body that cannot be read, too many
    // parts) closes the connection: the rest of the body is never read, and a connection kept
    // alive answered nothing more until its keep-alive timeout.
    scope.addHook('onSend', async (req, reply) => {
      if (!req.raw.complete) reply.header('connection', 'close');
    });
    routes(scope);
  });
}

/** The body is a stream of parts, read (and checked) by readImagePart; the schema only describes it. */
export const imageBodyValidator: FastifySchemaCompiler<object> = (req) =>
  req.httpPart === 'body' ? () => true : validatorCompiler(req);

/** The image the request sends (null: remove it), within OPTION_IMAGE_MAX_BYTES and the upload rate floor. */
export function readImage(ctx: AppContext, req: FastifyRequest): Promise<Buffer | null> {
  return readImagePart(req, {
    maxBytes: ctx.config.optionImageMaxBytes,
    bytesPerSecond: ctx.config.uploadMinBytesPerSecond,
    windowMs: ctx.config.requestTimeoutMs,
  });
}
