import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import type { RequestMeta } from '../modules/submissions/write.js';

/** Which proxies' X-Forwarded-For to believe: false for none, else whether the hop'th address from the socket is one. */
export type TrustProxy = false | ((address: string, hop: number) => boolean);

/**
 * TRUST_PROXY as one function, given to Fastify (its request.ip) and used by the routes that
 * answer before Fastify (clientAddress), so that both read a request's address alike: a
 * number of hops trusts that many proxies nearest to the server, a list those addresses and
 * ranges, true every one.
 */
export function trustProxyOf(config: Config['trustProxy']): TrustProxy {
  if (config === false) return false;
  if (config === true) return () => true;
  if (typeof config === 'number') return (_address, hop) => hop < config;
  return proxyAddr.compile(config);
}

/** A request's client address, as Fastify's request.ip gives it under the same trust (see trustProxyOf). */
export function clientAddress(req: IncomingMessage, trust: TrustProxy): string {
  if (trust === false) return req.socket.remoteAddress ?? '';
  const all = proxyAddr.all(req, trust);
  return all[all.length - 1] ?? '';
}

/**
 * What a submission keeps of the request that makes it: its client's user agent (the first
 * 500 characters) and address, and the request id that its jobs carry.
 */
export function requestMetaOf(req: FastifyRequest): RequestMeta {
  return metaOf(req.headers['user-agent'], req.ip, req.id);
}

/** The same, from its parts (an early route has no Fastify request). */
export function metaOf(userAgent: string | undefined, remoteAddr: string, requestId: string): RequestMeta {
  return { userAgent: (userAgent ?? '').slice(0, 500), remoteAddr, requestId };
}
