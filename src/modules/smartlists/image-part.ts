import type {} from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { BadRequestError } from '../../errors.js';

/**
 * The image a request sends: the bytes of its one part named image, or null to remove the
 * image (no body, no part, an empty file part, or an image part that is empty or "null").
 * Every part is read to its end, kept or not, so that a refused request is answered as soon as
 * it has been sent rather than left waiting on a body nobody reads.
 */
export async function readImagePart(req: FastifyRequest, maxBytes: number): Promise<Buffer | null> {
  if (!req.isMultipart()) {
    const body = req.body as unknown;
    if (body === undefined || body === null) return null;
    if (typeof body === 'object' && !Array.isArray(body)) {
      const keys = Object.keys(body);
      if (keys.length === 1 && keys[0] === 'image' && (body as { image: unknown }).image === null) return null;
    }
    throw new BadRequestError('invalid_image', 'Send the image as multipart/form-data, in one part named image');
  }
  let image: Buffer | null | undefined;
  let problem: string | undefined;
  try {
    for await (const part of req.parts({ limits: { fileSize: maxBytes, parts: 10 } })) {
      const other = part.fieldname !== 'image' || image !== undefined;
      if (part.type === 'file') {
        const bytes = await part.toBuffer();
        if (other) problem ??= 'The body takes one part, named image';
        else if (part.file.truncated) problem ??= `The image is larger than ${maxBytes} bytes`;
        else image = bytes.length === 0 ? null : bytes;
      } else {
        const value = String(part.value ?? '');
        if (other) problem ??= 'The body takes one part, named image';
        else if (value !== '' && value !== 'null')
          problem ??= 'The image part must be a file, or empty (or null) to remove it';
        else image = null;
      }
    }
  } catch (error) {
    throw new BadRequestError('invalid_image', 'The multipart body could not be read', { cause: error });
  }
  if (problem) throw new BadRequestError('invalid_image', problem);
  return image ?? null;
}
