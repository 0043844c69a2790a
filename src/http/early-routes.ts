import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { databaseUnavailable } from '../db/transaction.js';
import { AppError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { appErrorAnswer, errorBody } from './error-handler.js';
import { everyAnswersHeaders } from './headers.js';
import { requestIdOf } from './observability.js';
import { announcesBody, bodyTimeoutError } from './timeouts.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The GETs answered before Fastify routes them (app.ts). */
    earlyRoutes: EarlyRoutes;
  }
}

/** An answer that an early route gives: its route pattern (for the metrics), its status (200 when left out), its headers and its body. */
export interface EarlyAnswer {
  route: string;
  status?: number;
  /** Kept by the route and given again for every answer of the same kind: the raw header list is made once per object. */
  headers: Readonly<Record<string, string>>;
  /** Headers of this answer alone, as name and value pairs (an ETag, the rate limit's). */
  perAnswer?: readonly string[];
  body: Buffer;
}

/**
 * Given a GET with no body and its URL (path and query string), its answer, or undefined to
 * leave the request to Fastify. The route then runs in full: what it does must not have been
 * done already (a call counted against the quota).
 */
export type EarlyRoute = (req: IncomingMessage, url: string) => EarlyAnswer | undefined;

/**
 * Given a POST and its URL, undefined to leave the request to Fastify untouched, or the route
 * pattern it is taken as and what answers it once its body is in: that resolves to the
 * answer, or to undefined to give the request, with the body already read, to Fastify, which
 * then runs it in full. It may give the request on only while it has done nothing that
 * Fastify's run would do again (a call counted against the quota, a write); it must not
 * reject (EarlyRoutes answers a rejection with a 500).
 */
export type EarlyBodyRoute = (
  req: IncomingMessage,
  url: string,
) => { route: string; answer: (body: Buffer, requestId: string) => Promise<EarlyAnswer | undefined> } | undefined;

/** Bodies read before a request was given to Fastify (EarlyRoutes.handOff), which its parser reads instead of the socket. */
const readBodies = new WeakMap<IncomingMessage, Buffer>();

/**
 * Fastify reads a body that an early route read already from memory: a preParsing hook that
 * puts it in place of the request stream. Registered once, before any route.
 */
export function readEarlyBodies(app: FastifyInstance): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const body = readBodies.get(request.raw);
    if (body === undefined) return done(null, payload);
    readBodies.delete(request.raw);
    done(null, Readable.from([body], { objectMode: false }));
  });
}

/**
 * A few requests that are most of a deployment's traffic answered before Fastify routes them:
 * the hosted page of an open form that this process has in memory, a form read whose answer
 * and token this process holds (forms/early-read.ts), and a plain submission create
 * (submissions/early-create.ts, a body route). Fastify's routing, its request and reply
 * objects and the app's global hooks cost about as much again as such a read's own work, and
 * a sixth to a quarter of a create's (docs/performance.md, "Seventh", "Tenth" and
 * "Twenty-fourth pass"); here the answer carries what those hooks would have added
 * (x-request-id, the headers of registerSecurityHeaders) and is counted in the same metrics
 * series. Anything else falls through to Fastify: another method, a GET with a body,
 * whatever a route does not take early, and everything while the server is closing (Fastify
 * answers 503 then).
 *
 * Not used when LOG_LEVEL logs every request (info and below): Fastify's two lines per
 * request would be missing, and they cost more than what this saves.
 */
export class EarlyRoutes {
  private readonly routes: { prefix: string; answer: EarlyRoute }[] = [];
  private readonly bodyRoutes: { prefix: string; answer: EarlyBodyRoute }[] = [];
  /** Fastify's handler, for the requests given on after their body was read, and its logger. */
  private handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  private log: FastifyBaseLogger | undefined;
  private readonly rawHeaders = new WeakMap<object, string[]>();
  private readonly always: [string, string][];
  private open = true;
  /** How many requests were answered here (tests tell by it which way a request went). */
  answered = 0;

  /** How long a body taken here may take to arrive, as registerBodyTimeout gives Fastify's. */
  private readonly bodyTimeoutMs: number;

  constructor(
    private readonly metrics: Metrics,
    options: { publicUrl: string; logsRequests: boolean; bodyTimeoutMs: number },
  ) {
    this.bodyTimeoutMs = options.bodyTimeoutMs;
    this.always = Object.entries(everyAnswersHeaders(options.publicUrl));
    if (options.logsRequests) this.open = false;
  }

  /** Paths that start with prefix are offered to answer first. */
  add(prefix: string, answer: EarlyRoute): void {
    this.routes.push({ prefix, answer });
  }

  /** POSTs whose paths start with prefix are offered to answer first (see EarlyBodyRoute). */
  addBody(prefix: string, answer: EarlyBodyRoute): void {
    this.bodyRoutes.push({ prefix, answer });
  }

  /** Where the requests go that a body route gives on: Fastify's handler (its serverFactory's). */
  handOffTo(handler: (req: IncomingMessage, res: ServerResponse) => void): void {
    this.handler = handler;
  }

  /** Where a body route's unexpected failures are logged: the app's logger, once there is one. */
  logTo(log: FastifyBaseLogger): void {
    this.log = log;
  }

  /** From now on every request goes to Fastify (its preClose: it answers 503 while closing). */
  close(): void {
    this.open = false;
  }

  /** Answers the request and says true, or says false and leaves it untouched. */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.open) return false;
    if (req.method === 'POST') return this.handleBody(req, res);
    if (req.method !== 'GET') return false;
    const url = req.url;
    if (url === undefined || announcesBody(req)) return false;
    const started = performance.now();
    for (const { prefix, answer } of this.routes) {
      if (!url.startsWith(prefix)) continue;
      const found = answer(req, url);
      if (!found) return false;
      this.send(res, requestIdOf(req), 'GET', found, started);
      return true;
    }
    return false;
  }

  /**
   * A POST that a body route takes: its body read here (the route checked its length), then
   * answered, or given to Fastify with the body. A body that has not come whole within the
   * body timeout is answered as registerBodyTimeout answers it (408, the connection closed);
   * one whose client goes is dropped with its socket, as Node does.
   */
  private handleBody(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url;
    const handler = this.handler;
    if (url === undefined || handler === undefined) return false;
    const started = performance.now();
    for (const { prefix, answer } of this.bodyRoutes) {
      if (!url.startsWith(prefix)) continue;
      const taken = answer(req, url);
      if (!taken) return false;
      const chunks: Buffer[] = [];
      let timedOut = false;
      const onData = (chunk: Buffer) => chunks.push(chunk);
      const timer = setTimeout(() => {
        timedOut = true;
        req.off('data', onData);
        const requestId = requestIdOf(req);
        const refused = earlyErrorAnswer(taken.route, bodyTimeoutError(this.bodyTimeoutMs), this.log, requestId);
        this.send(
          res,
          requestId,
          'POST',
          { ...refused, perAnswer: [...(refused.perAnswer ?? []), 'connection', 'close'] },
          started,
        );
      }, this.bodyTimeoutMs);
      timer.unref();
      req.on('data', onData);
      req.once('close', () => clearTimeout(timer));
      req.once('end', () => {
        clearTimeout(timer);
        if (timedOut) return;
        const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        const requestId = requestIdOf(req);
        taken.answer(body, requestId).then(
          (found) => {
            if (found) return this.send(res, requestId, 'POST', found, started);
            readBodies.set(req, body);
            handler(req, res);
          },
          (error: unknown) =>
            this.send(res, requestId, 'POST', earlyErrorAnswer(taken.route, error, this.log, requestId), started),
        );
      });
      return true;
    }
    return false;
  }

  private send(res: ServerResponse, requestId: string, method: string, found: EarlyAnswer, started: number): void {
    const status = found.status ?? 200;
    res.writeHead(status, [
      ...this.headerList(found.headers),
      ...(found.perAnswer ?? []),
      'x-request-id',
      requestId,
      'content-length',
      String(found.body.length),
    ]);
    res.end(found.body);
    this.answered++;
    this.metrics.request(method, found.route, status, (performance.now() - started) / 1000);
  }

  private headerList(headers: Readonly<Record<string, string>>): string[] {
    let list = this.rawHeaders.get(headers);
    if (!list) {
      list = [...Object.entries(headers), ...this.always].flat();
      this.rawHeaders.set(headers, list);
    }
    return list;
  }
}

/** The headers of an API route's JSON answers, as its hooks set them (but the quota's). */
const JSON_ANSWER_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'no-store',
} as const;

/** An API route's JSON answer given early: its status, its text, and headers of its own (the quota's, Retry-After). */
export function jsonAnswer(route: string, status: number, body: string, perAnswer?: string[]): EarlyAnswer {
  return { route, status, headers: JSON_ANSWER_HEADERS, body: Buffer.from(body), ...(perAnswer && { perAnswer }) };
}

/**
 * An early body route's answer to an error, as the error handler gives it: the app's own
 * errors (and a database out of reach, databaseUnavailable) through appErrorAnswer (with
 * Retry-After, logged as it says), anything else a 500, logged.
 */
export function earlyErrorAnswer(
  route: string,
  thrown: unknown,
  log: FastifyBaseLogger | undefined,
  requestId: string,
): EarlyAnswer {
  const error = databaseUnavailable(thrown) ?? thrown;
  if (!(error instanceof AppError)) {
    log?.error({ err: error, requestId }, 'request failed');
    return jsonAnswer(route, 500, JSON.stringify(errorBody('internal_error')));
  }
  const refused = appErrorAnswer(error);
  if (refused.log) log?.[refused.log.level]({ err: error, requestId }, refused.log.message);
  return jsonAnswer(route, refused.status, JSON.stringify(refused.body), refused.headers);
}
