import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Metrics } from '../metrics.js';
import { everyAnswersHeaders } from './headers.js';
import { requestIdOf } from './observability.js';
import { announcesBody } from './timeouts.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The GETs answered before Fastify routes them (app.ts). */
    earlyRoutes: EarlyRoutes;
  }
}

/** A 200 that an early route gives: its route pattern (for the metrics), its headers and its body. */
export interface EarlyAnswer {
  route: string;
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
 * A few GETs that are most of a deployment's traffic answered before Fastify routes them: the
 * hosted page of an open form that this process has in memory, and a form read whose answer
 * and token this process holds (forms/early-read.ts). Fastify's routing, its request and reply
 * objects and the app's global hooks cost about as much again as such an answer's own work
 * (docs/performance.md, "Seventh pass" and "Tenth pass"); here the answer carries what those
 * hooks would have added (x-request-id, the headers of registerSecurityHeaders) and is
 * counted in the same metrics series. Anything else falls through to Fastify: another
 * method, a body, whatever a route does not take early, and everything while the server is
 * closing (Fastify answers 503 then).
 *
 * Not used when LOG_LEVEL logs every request (info and below): Fastify's two lines per
 * request would be missing, and they cost more than what this saves.
 */
export class EarlyRoutes {
  private readonly routes: { prefix: string; answer: EarlyRoute }[] = [];
  private readonly rawHeaders = new WeakMap<object, string[]>();
  private readonly always: [string, string][];
  private open = true;
  /** How many requests were answered here (tests tell by it which way a request went). */
  answered = 0;

  constructor(
    private readonly metrics: Metrics,
    options: { publicUrl: string; logsRequests: boolean },
  ) {
    this.always = Object.entries(everyAnswersHeaders(options.publicUrl));
    if (options.logsRequests) this.open = false;
  }

  /** Paths that start with prefix are offered to answer first. */
  add(prefix: string, answer: EarlyRoute): void {
    this.routes.push({ prefix, answer });
  }

  /** From now on every request goes to Fastify (its preClose: it answers 503 while closing). */
  close(): void {
    this.open = false;
  }

  /** Answers the request and says true, or says false and leaves it untouched. */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.open || req.method !== 'GET') return false;
    const url = req.url;
    if (url === undefined || announcesBody(req)) return false;
    const started = performance.now();
    for (const { prefix, answer } of this.routes) {
      if (!url.startsWith(prefix)) continue;
      const found = answer(req, url);
      if (!found) return false;
      const headers = this.headerList(found.headers);
      res.writeHead(200, [
        ...headers,
        ...(found.perAnswer ?? []),
        'x-request-id',
        requestIdOf(req),
        'content-length',
        String(found.body.length),
      ]);
      res.end(found.body);
      this.answered++;
      this.metrics.request('GET', found.route, 200, (performance.now() - started) / 1000);
      return true;
    }
    return false;
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
