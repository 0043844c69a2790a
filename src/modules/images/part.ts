import type {} from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { BadRequestError } from '../../errors.js';
import { watchUploadRate, type BodyTimeoutError } from '../../http/timeouts.js';

export interface ImageLimits {
  maxBytes: number;
  /** The slowest a body may arrive, averaged over each window, as for uploads (UPLOAD_MIN_BYTES_PER_SECOND). */
  bytesPerSecond: number;
  windowMs: number;
}

/** How far past the limit a file is still read (and thrown away) so that its sender gets a quick answer. */
export function drainBytes(maxBytes: number): number {
  return maxBytes * 4 + 1024 * 1024;
}

/**
 * The image a request sends: the bytes of its one part named image, or null to remove the
 * image (no body, no part, an empty file part, or an image part that is empty or "null"). A
 * body must end with its closing boundary.
 * Every part is read to its end, kept or not, so that a refused request is answered as soon as
 * it has been sent rather than left waiting on a body nobody reads. Shared by the routes that
 * take an image (smart list option images, portal avatars); the route registers
 * @fastify/multipart in its own scope and reads its body at its own pace (streamedBody).
 */
export async function readImagePart(
  req: FastifyRequest,
  { maxBytes, bytesPerSecond, windowMs }: ImageLimits,
): Promise<Buffer | null> {
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
  const ending = watchEnding(req);
  // The route reads its body at its own pace (streamedBody): a client that stalls is cut off here.
  let tooSlow: BodyTimeoutError | undefined;
  watchUploadRate(req.raw, { bytesPerSecond, windowMs }, (error) => {
    tooSlow = error;
    req.raw.destroy(error);
  });
  try {
    // The limit is kept here, reading a file a little past it to its end so that its sender gets
    // the answer at once; past drainBytes, the reader cuts the file and the rest of the body.
    for await (const part of req.parts({ limits: { fileSize: drainBytes(maxBytes), parts: 10 } })) {
      const other = part.fieldname !== 'image' || image !== undefined;
      if (part.type === 'file') {
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const chunk of part.file as AsyncIterable<Buffer>) {
          size += chunk.length;
          if (size <= maxBytes && !other) chunks.push(chunk);
        }
        if (other) problem ??= 'The body takes one part, named image';
        else if (size > maxBytes || part.file.truncated) problem ??= `The image is larger than ${maxBytes} bytes`;
        else image = size === 0 ? null : Buffer.concat(chunks);
      } else {
        const value = String(part.value ?? '');
        if (other) problem ??= 'The body takes one part, named image';
        else if (value !== '' && value !== 'null')
          problem ??= 'The image part must be a file, or empty (or null) to remove it';
        else image = null;
      }
    }
  } catch (error) {
    if (tooSlow) throw tooSlow;
    throw new BadRequestError('invalid_image', 'The multipart body could not be read', { cause: error });
  }
  if (!problem && ending.bytes() > 0 && !ending.closed())
    problem = 'The multipart body ends before its closing boundary: it was cut short, or sent under another boundary';
  if (problem) throw new BadRequestError('invalid_image', problem);
  return image ?? null;
}

/**
 * Whether the body holds its closing delimiter (--boundary--). @fastify/multipart ends a body
 * without one quietly, as if it were whole: a body cut short would set what it held so far,
 * and one sent under another boundary (all preamble to the parser) would remove the image.
 */
function watchEnding(req: FastifyRequest): { bytes(): number; closed(): boolean } {
  const found = /(?:^|;)\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(req.headers['content-type'] ?? '');
  const close = Buffer.from(`--${found?.[1] ?? found?.[2] ?? ''}--`);
  const keep = close.length - 1;
  let bytes = 0;
  let closed = false;
  let tail: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    bytes += chunk.length;
    if (closed) return;
    // The delimiter may straddle two chunks: the end of the last one is kept.
    closed = chunk.includes(close) || Buffer.concat([tail, chunk.subarray(0, keep)]).includes(close);
    tail = chunk.length >= keep ? chunk.subarray(chunk.length - keep) : Buffer.concat([tail, chunk]).subarray(-keep);
  };
  req.raw.on('data', onData);
  return { bytes: () => bytes, closed: () => closed && found !== null };
}
