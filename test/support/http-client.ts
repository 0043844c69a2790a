import http from 'node:http';

/**
 * The test apps' HTTP client, on node:http. Node's fetch (undici, with WHATWG streams and
 * Headers on both sides of every call) cost about 600 µs of the test process's CPU a request
 * more than this on a slow machine of the kind, and the matrices send thousands: `fetch` and
 * its streams were 10–15% of their CPU (docs/development.md, "What the suite spends").
 *
 * It sends the headers fetch sent by default, but for accept-encoding (nothing here unpacks an
 * answer); a header the test gives wins, whatever its case. It sends a body with any method (a
 * GET's too, which fetch refuses), reads the answer's body as UTF-8 and gives its headers as a
 * Headers object, as fetch did. A redirect is answered as it is, its status and Location for
 * the test to see: no request of the helpers' is redirected (the pages that redirect are tested
 * with fetch and `redirect: 'manual'`).
 */

const DEFAULT_HEADERS: Record<string, string> = {
  accept: '*/*',
  'accept-language': '*',
  'sec-fetch-mode': 'cors',
  'user-agent': 'node',
};

/** Kept-alive connections, as fetch's pool kept them: a test app answers many requests in a row. */
const agent = new http.Agent({ keepAlive: true });
const utf8 = new TextDecoder();

export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
}

export function httpRequest(
  url: string,
  init: { method: string; headers?: Record<string, string>; body?: string },
): Promise<HttpAnswer> {
  // One header of each name, whatever its case (the later given wins).
  const headers: Record<string, string> = { ...DEFAULT_HEADERS };
  for (const [name, value] of Object.entries(init.headers ?? {})) headers[name.toLowerCase()] = value;
  // Given whatever the method: node:http sends a GET's body without it, and the server would not read it.
  if (init.body !== undefined) headers['content-length'] ??= String(Buffer.byteLength(init.body));
  return once(new URL(url), init.method, headers, init.body);
}

/** Sent once more after a kept-alive connection failed under them: reading them twice changes nothing. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/**
 * One request and its whole answer. A kept-alive connection that the server closed just as it
 * was taken again fails with no answer: an idempotent request is then sent once more, on a new
 * connection (as Node's documentation advises for kept-alive agents); any other fails, since
 * the server may have read it.
 */
function once(url: URL, method: string, headers: Record<string, string>, body?: string): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const send = (retried: boolean) => {
      let answered = false;
      const req = http.request(url, { method, headers, agent }, (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const answerHeaders = new Headers();
          for (let i = 0; i < res.rawHeaders.length; i += 2)
            answerHeaders.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          resolve({
            status: res.statusCode!,
            headers: answerHeaders,
            text: utf8.decode(Buffer.concat(chunks)),
          });
        });
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        const stale = req.reusedSocket && !answered && (error.code === 'ECONNRESET' || error.code === 'EPIPE');
        if (stale && !retried && IDEMPOTENT.has(method.toUpperCase())) send(true);
        else reject(error);
      });
      req.end(body);
    };
    send(false);
  });
}
