import type { IncomingMessage } from 'node:http';
import type { ServerOptions } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route reads its body as a stream at its own pace (uploads): no JSON body deadline, see RateFloor. */
    streamedBody?: boolean;
  }
}

/** A request body that stopped coming; 408, and the connection is closed after the answer. */
export class BodyTimeoutError extends AppError<'body_timeout'> {
  constructor(message: string) {
    super('body_timeout', message);
  }
}

/**
 * Node's own timers: the headers of a request must arrive within REQUEST_TIMEOUT_MS (checked
 * a few times per timeout, not every 30 s as by default); its body is timed by
 * registerBodyTimeout, because a whole-request deadline would cut long uploads as well.
 */
export function serverTimeouts(config: Pick<Config, 'requestTimeoutMs' | 'keepAliveTimeoutMs'>): {
  keepAliveTimeout: number;
  requestTimeout: number;
  http: ServerOptions;
} {
  return {
    keepAliveTimeout: config.keepAliveTimeoutMs,
    requestTimeout: 0,
    http: {
      // Off: a whole-request deadline would cut long uploads too (Node checks it when created).
      requestTimeout: 0,
      headersTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(30_000, Math.max(50, Math.floor(config.requestTimeoutMs / 4))),
    },
  };
}

/** Whether the request says a body follows (a GET usually does not, and needs no timer). */
export function announcesBody(raw: IncomingMessage): boolean {
  const length = raw.headers['content-length'];
  return raw.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The refusal of a body that did not arrive within timeoutMs (here, and in EarlyRoutes). */
export function bodyTimeoutError(timeoutMs: number): BodyTimeoutError {
  return new BodyTimeoutError(`The request body did not arrive within ${timeoutMs} ms`);
}

function closeWhenSent(request: FastifyRequest, reply: FastifyReply): void {
  if (reply.sent) request.raw.socket?.destroy();
  else reply.header('connection', 'close');
}

/**
 * A request body that is still arriving when the headers are in must be complete within
 * REQUEST_TIMEOUT_MS. Past it the body parser fails with 408 body_timeout (JSON, like every
 * error) and the connection closes after the answer; when the answer has already gone (a 401
 * before the body was read), the connection is closed outright. A client that trickles a
 * body therefore holds neither memory nor a connection for longer than the timeout. A
 * deadline that passes while the request still waits for its hooks (a token read from a
 * slow database) is answered the same way as soon as they are done, before the body is read.
 */
export function registerBodyTimeout(app: FastifyInstance, timeoutMs: number): void {
  const timedOut = () => bodyTimeoutError(timeoutMs);
  app.addHook('onRequest', (request, reply, done) => {
    const raw: IncomingMessage = request.raw;
    if (raw.complete || !announcesBody(raw) || request.routeOptions.config.streamedBody) return done();
    const timer = setTimeout(() => {
      if (raw.complete) return;
      closeWhenSent(request, reply);
      // Fails the body's reader (Fastify's, which listens for errors on the request while it
      // reads) without touching the socket, so that the 408 can still be written. Not a stream
      // between the request and the reader for this: one per request cost every JSON request
      // about a twentieth of its time (docs/performance.md, "Twentieth pass").
      const fail = () => raw.emit('error', timedOut());
      if (raw.listenerCount('error') > 0) return fail();
      // No reader yet (an onRequest hook still waits): the first one is failed once it listens,
      // which costs nothing to the requests whose deadline does not pass.
      const onListener = (event: string | symbol) => {
        if (event !== 'error') return;
        raw.off('newListener', onListener);
        // Emitted before the listener is added.
        process.nextTick(() => {
          if (!raw.complete) fail();
        });
      };
      raw.on('newListener', onListener);
    }, timeoutMs);
    timer.unref();
    const clear = () => clearTimeout(timer);
    raw.once('end', clear);
    raw.once('close', clear);
    done();
  });
}

/**
 * The pace an upload must keep: at least bytesPerSecond on average over each window. A
 * window in which the service itself stopped reading (storage pushing back) is not held
 * against the client. Calls tooSlow once, and stops when the body is complete or gone.
 */
export function watchUploadRate(
  raw: IncomingMessage,
  options: { bytesPerSecond: number; windowMs: number },
  tooSlow: (error: BodyTimeoutError) => void,
): void {
  let bytes = 0;
  let pushedBack = false;
  const onData = (chunk: Buffer) => {
    bytes += chunk.length;
  };
  const onPause = () => {
    pushedBack = true;
  };
  const floor = Math.ceil((options.bytesPerSecond * options.windowMs) / 1000);
  const timer = setInterval(() => {
    if (bytes < floor && !pushedBack && !raw.isPaused() && !raw.complete) {
      stop();
      tooSlow(new BodyTimeoutError(`The upload arrived slower than ${options.bytesPerSecond} bytes a second`));
      return;
    }
    bytes = 0;
    pushedBack = raw.isPaused();
  }, options.windowMs);
  timer.unref();
  const stop = () => {
    clearInterval(timer);
    raw.off('data', onData);
    raw.off('pause', onPause);
  };
  raw.on('data', onData);
  raw.on('pause', onPause);
  raw.once('end', stop);
  raw.once('close', stop);
}
