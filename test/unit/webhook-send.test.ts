import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { post } from '../../src/modules/webhooks/send.js';

const options = { timeoutMs: 5000, allowPrivate: true, signal: new AbortController().signal };

/**
 * A receiver that answers the first request of each connection and keeps it open, and then
 * does what `second` says with the next request on it: the race of a receiver's idle timeout
 * with a sender reusing the connection, made to happen every time.
 */
async function receiver(second: 'close' | 'answer', first: 'close' | 'answer' = 'answer') {
  const seen: { socket: Socket; path: string }[] = [];
  const server: Server = createServer((req, res) => {
    const onSocket = seen.filter((s) => s.socket === req.socket).length;
    seen.push({ socket: req.socket, path: req.url ?? '' });
    req.resume();
    req.on('end', () => {
      if ((onSocket === 0 ? first : second) === 'close') req.socket.destroy();
      else res.end('ok');
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path: string) => new URL(`http://127.0.0.1:${port}${path}`),
    seen,
    connections: () => new Set(seen.map((s) => s.socket)).size,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('webhook sending (send.ts)', () => {
  const receivers: { close(): Promise<void> }[] = [];
  after(() => Promise.all(receivers.map((r) => r.close())));

  it('sends again on a new connection when a kept-alive one was closed as it was reused', async () => {
    const r = await receiver('close');
    receivers.push(r);
    const first = await post(r.url('/one'), {}, Buffer.from('{}'), options);
    assert.equal(first.status, 200);
    const second = await post(r.url('/two'), {}, Buffer.from('{}'), options);
    assert.equal(second.status, 200, 'delivered, not failed for the receiver closing an idle connection');
    assert.deepEqual(
      r.seen.map((s) => s.path),
      ['/one', '/two', '/two'],
    );
    assert.equal(r.connections(), 2);
  });

  it('does not send again when a new connection fails', async () => {
    const r = await receiver('answer', 'close');
    receivers.push(r);
    await assert.rejects(post(r.url('/once'), {}, Buffer.from('{}'), options), { code: 'ECONNRESET' });
    assert.deepEqual(
      r.seen.map((s) => s.path),
      ['/once'],
    );
  });

  it('reuses a connection that is still open', async () => {
    const r = await receiver('answer');
    receivers.push(r);
    for (const path of ['/a', '/b', '/c'])
      assert.equal((await post(r.url(path), {}, Buffer.from('{}'), options)).status, 200);
    assert.equal(r.connections(), 1);
  });
});
