import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the receiver got it: the raw bytes of the body, as signatures are checked over. */
export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** What the receiver answers: a status (with headers), or nothing at all until it is closed. */
export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

export interface Receiver {
  /** http://127.0.0.1:port */
  url: string;
  port: number;
  received: Received[];
  /** Decides each answer; 200 unless set. */
  answer: (request: Received) => Answer;
  /** Resolves once the receiver has got at least n requests. */
  waitFor(n: number, limitMs?: number): Promise<void>;
  /** Cuts the requests that were left hanging. */
  dropHanging(): void;
  close(): Promise<void>;
}

/** A real HTTP server on a free loopback port that records every request and answers as told. */
export async function startReceiver(): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const waiters: { n: number; resolve(): void }[] = [];
  const receiver: Receiver = {
    url: '',
    port: 0,
    received: [],
    answer: () => ({ status: 200 }),
    async waitFor(n, limitMs = 60_000) {
      if (receiver.received.length >= n) return;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`the receiver got ${receiver.received.length} requests, not ${n}`)),
          limitMs,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    dropHanging() {
      for (const res of hanging) res.destroy();
      hanging.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        receiver.dropHanging();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: Received = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
      };
      receiver.received.push(request);
      for (const w of [...waiters])
        if (receiver.received.length >= w.n) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      const answer = receiver.answer(request);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `http://127.0.0.1:${receiver.port}`;
  return receiver;
}
