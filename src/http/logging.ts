import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { pino, type Logger, type LoggerOptions } from 'pino';

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

type LevelName = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];

/**
 * A request's logger, made into pino's child (with the request id bound) on its first line
 * that the level lets through. pino's child() serializes its bindings as it is made, which was
 * a few percent of a small request's CPU; most requests write no line at all below info.
 */
class LazyChildLogger {
  #child: FastifyBaseLogger | undefined;
  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
    private readonly options: ChildOptions,
  ) {}
  private get real(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }
  private write(level: LevelName, args: unknown[]): void {
    if (this.#child === undefined && !this.parent.isLevelEnabled(level)) return;
    (this.real[level] as (...a: unknown[]) => void)(...args);
  }
  get level(): string {
    return this.#child?.level ?? this.parent.level;
  }
  set level(level: string) {
    this.real.level = level;
  }
  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}
  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.real.child(bindings, options);
  }
}

/** Fastify's childLoggerFactory: a LazyChildLogger over the app's pino logger. */
export function lazyChildLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildOptions,
): FastifyBaseLogger {
  const parent = logger as Logger;
  // Another logger than pino (none is configured today) gets its child at once, and so does a
  // route with a level of its own (Fastify's logLevel), which the parent's level cannot judge.
  if (typeof parent.isLevelEnabled !== 'function' || options?.level !== undefined)
    return logger.child(bindings, options);
  return new LazyChildLogger(parent, bindings, options) as unknown as FastifyBaseLogger;
}
