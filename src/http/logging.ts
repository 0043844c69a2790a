import type { FastifyRequest } from 'fastify';
import { pino, type LoggerOptions } from 'pino';

/**
 * Query strings hold what must not reach a log: search words of encrypted forms (keyword,
 * search[n][value], the cross-form search) and the signature of upload URLs, which lets
 * anyone upload for two hours. Logs keep each parameter's name and drop its value, on every
 * route: `/api/v2025/forms/1/submissions?keyword=&search[0][value]=`.
 */
export function urlForLog(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const names = url
    .slice(q + 1)
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => `${pair.split('=', 1)[0]}=`);
  return `${url.slice(0, q)}?${names.join('&')}`;
}

// A URL inside free text (some of Fastify's own messages and errors quote the request URL).
const QUERY_IN_TEXT = /(\/[^\s"'`<>?]*)\?([^\s"'`<>]+)/g;

export function redactQueries(text: string): string {
  return text.replace(QUERY_IN_TEXT, (_, path: string, query: string) => urlForLog(`${path}?${query}`));
}

// The user name and password of a URL (SMTP_URL, DATABASE_URL, REDIS_URL), should a driver's message quote one.
const CREDENTIALS_IN_URL = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'`<>]+@/gi;

/** Text fit for a log: query values and URL credentials taken out. */
export function redactText(text: string): string {
  return redactQueries(text).replace(CREDENTIALS_IN_URL, '$1[redacted]@');
}

/** Fastify's request serializer, with the URL as urlForLog writes it. */
function requestForLog(req: FastifyRequest) {
  return {
    method: req.method,
    url: urlForLog(req.url),
    version: req.headers?.['accept-version'],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

function errorForLog(err: Error) {
  const out = pino.stdSerializers.err(err);
  if (typeof out.message === 'string') out.message = redactText(out.message);
  if (typeof out.stack === 'string') out.stack = redactText(out.stack);
  return out;
}

/** The serializers and hook that keep query values and URL credentials out of the logs. */
export const queryRedaction: Pick<LoggerOptions, 'serializers' | 'hooks'> = {
  serializers: { req: requestForLog, err: errorForLog },
  hooks: {
    logMethod(args, method) {
      return method.apply(
        this,
        args.map((a) => (typeof a === 'string' ? redactText(a) : a)) as Parameters<typeof method>,
      );
    },
  },
};
