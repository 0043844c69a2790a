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
 * POSTs body to url once. Redirects are not followed (a 3xx is the answer); an address that
 * webhooks may not reach is refused when the connection is made, after DNS resolution. The
 * response body is read and dropped, so that the connection can be used again.
 */
export function post(url: URL, headers: Record<string, string>, body: Buffer, options: SendOptions): Promise<Response> {
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
    const timer = setTimeout(() => cutShort(`no complete response within ${options.timeoutMs} ms`), options.timeoutMs);
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
    request.on('response', (response) => {
      response.on('error', fail);
      response.on('aborted', () => fail(new SendFailed('the connection closed before the response ended')));
      response.on('end', () => {
        settle();
        const retryAfter = response.headers['retry-after'];
        resolve({ status: response.statusCode ?? 0, retryAfter });
      });
      response.resume();
    });
    request.on('error', fail);
    if (options.signal.aborted) stop();
    else request.end(body);
  });
}
