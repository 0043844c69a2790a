import http from 'node:http';
import https from 'node:https';
import { checkedLookup, checkLiteralHost } from './address.js';

export interface Response {
  status: number;
  /** The Retry-After header, as sent. */
  retryAfter: string | undefined;
}

export interface SendOptions {
  /** From connecting to the end of the response body. */
  timeoutMs: number;
  /** WEBHOOK_ALLOW_PRIVATE: no address checks. */
  allowPrivate: boolean;
  /** The worker stopping, or the run losing its lease. */
  signal: AbortSignal;
}

/** A delivery that got no answer in time, or was stopped; the message goes to the delivery log. */
export class SendFailed extends Error {}

// Keep-alive: deliveries to one receiver reuse connections. A reused connection was checked
// (by its lookup, or as a literal) when it was made.
let checkedAgents: { http: http.Agent; https: https.Agent } | undefined;
let openAgents: { http: http.Agent; https: https.Agent } | undefined;

function agentsFor(allowPrivate: boolean) {
  if (allowPrivate)
    return (openAgents ??= { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) });
  return (checkedAgents ??= {
    http: new http.Agent({ keepAlive: true, lookup: checkedLookup }),
    https: new https.Agent({ keepAlive: true, lookup: checkedLookup }),
  });
}

/**
 * How many times a delivery is sent again at once when a kept-alive connection turns out to be
 * closed (StaleConnection): each try uses up one such connection from the agent's pool.
 */
const STALE_RETRIES = 3;

/**
 * The request failed on a reused connection before any answer: the receiver closed the idle
 * connection (its keep-alive timeout) as we sent on it. Node's documentation of Agent names the
 * race; the request is sent again, on another connection.
 */
class StaleConnection extends Error {}

/**
 * POSTs body to url. Redirects are not followed (a 3xx is the answer); an address that
 * webhooks may not reach is refused when the connection is made, after DNS resolution. The
 * response body is read and dropped, so that the connection can be used again. A request that
 * fails on a kept-alive connection the receiver had just closed is sent again at once (at most
 * STALE_RETRIES times, all within timeoutMs), not left to the retry schedule: the receiver's
 * idle timeout is not the receiver failing. Webhooks are delivered at least once, under one
 * webhook-id, so a receiver that did read such a request dedupes it.
 */
export async function post(
  url: URL,
  headers: Record<string, string>,
  body: Buffer,
  options: SendOptions,
): Promise<Response> {
  const deadline = performance.now() + options.timeoutMs;
  for (let retries = 0; ; retries++) {
    try {
      return await postOnce(url, headers, body, options, deadline);
    } catch (error) {
      if (!(error instanceof StaleConnection)) throw error;
      if (retries >= STALE_RETRIES) throw error.cause;
    }
  }
}

function postOnce(
  url: URL,
  headers: Record<string, string>,
  body: Buffer,
  options: SendOptions,
  deadline: number,
): Promise<Response> {
  return new Promise<Response>((resolve, reject) => {
    if (!options.allowPrivate) {
      try {
        checkLiteralHost(url.hostname);
      } catch (error) {
        reject(error as Error);
        return;
      }
    }
    const agents = agentsFor(options.allowPrivate);
    const secure = url.protocol === 'https:';
    const request = (secure ? https : http).request(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(body.length) },
      agent: secure ? agents.https : agents.http,
    });
    // Why we cut the request short: what the log says, whatever error the socket then reports.
    let cut: SendFailed | undefined;
    const cutShort = (why: string) => {
      cut ??= new SendFailed(why);
      request.destroy(cut);
    };
    const timer = setTimeout(
      () => cutShort(`no complete response within ${options.timeoutMs} ms`),
      Math.max(0, deadline - performance.now()),
    );
    const stop = () => cutShort('the worker stopped before the response came');
    options.signal.addEventListener('abort', stop, { once: true });
    const settle = () => {
      clearTimeout(timer);
      options.signal.removeEventListener('abort', stop);
    };
    const fail = (error: Error) => {
      settle();
      reject(cut ?? error);
    };
    let answered = false;
    request.on('response', (response) => {
      answered = true;
      response.on('error', fail);
      response.on('aborted', () => fail(new SendFailed('the connection closed before the response ended')));
      response.on('end', () => {
        settle();
        const retryAfter = response.headers['retry-after'];
        resolve({ status: response.statusCode ?? 0, retryAfter });
      });
      response.resume();
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      const stale =
        !cut && !answered && request.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE');
      fail(stale ? new StaleConnection('a kept-alive connection was closed', { cause: error }) : error);
    });
    if (options.signal.aborted) stop();
    else request.end(body);
  });
}
