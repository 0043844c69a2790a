import type { FastifyRequest } from 'fastify';
import type { RequestMeta } from '../modules/submissions/write.js';

/**
 * What a submission keeps of the request that makes it: its client's user agent (the first
 * 500 characters) and address, and the request id that its jobs carry.
 */
export function requestMetaOf(req: FastifyRequest): RequestMeta {
  return { userAgent: (req.headers['user-agent'] ?? '').slice(0, 500), remoteAddr: req.ip, requestId: req.id };
}
