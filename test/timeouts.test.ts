/**
 * Slow clients against real `formwork serve` processes, over raw sockets: a body, an upload
 * or headers that trickle are cut off, and SIGTERM finishes whatever the clients do.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { dialectName } from './support/helpers.js';
import { ProcessSet, type Served } from './support/processes.js';

// Generous: each bound below is seconds where the behaviour needs one, and minutes without it.
const BOUND_MS = 20_000;

/** What came back on a raw connection, once the server closed it (or the bound passed). */
interface Outcome {
  text: string;
  closed: boolean;
}

/**
 * Opens a connection, sends head at once and then one byte of drip every interval until the
 * server closes the connection. Resolves when it does, or after boundMs with closed false.
 */
function trickle(
  port: number,
  head: string,
  drip: string,
  intervalMs = 200,
  boundMs = BOUND_MS,
): { outcome: Promise<Outcome>; socket: Socket } {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  let i = 0;
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (text += d));
  socket.on('error', () => undefined);
  socket.write(head);
  const timer = setInterval(() => {
    if (!socket.destroyed && socket.writable) socket.write(drip[i++ % drip.length]!);
  }, intervalMs);
  const outcome = new Promise<Outcome>((resolve) => {
    const bound = setTimeout(() => {
      clearInterval(timer);
      socket.destroy();
      resolve({ text, closed: false });
    }, boundMs);
    socket.once('close', () => {
      clearInterval(timer);
      clearTimeout(bound);
      resolve({ text, closed: true });
    });
  });
  return { outcome, socket };
}

function statusOf(text: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
}

function jsonOf(text: string): any {
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4));
}

describe(`slow clients and stopping (${dialectName})`, () => {
  const processes = new ProcessSet('timeouts');
  let token: string;
  const serve = (extra: Record<string, string>) => processes.serve(extra);
  const stop = (served: Served) => processes.stop(served);

  const api = (served: Served, method: string, path: string, body?: unknown) =>
    fetch(`${served.url}/api/v2025${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  /** A signed upload URL (the local driver's, this service's own) for a new file field. */
  async function uploadPath(served: Served): Promise<string> {
    const made = await api(served, 'POST', '/forms', {
      name: 'Files',
      fields: [{ type: 'file', label: 'F', attributes: { maxFileSize: 1_000_000 } }],
    });
    const form = (await made.json()) as any;
    // Seen once in CI (2026-11-30) as a form with no fields: the answer, and what the process said, tell why.
    const said = () => `; the process (exit ${served.child.exitCode}) said: ${served.output().slice(-500)}`;
    assert.equal(made.status, 200, `the form: ${JSON.stringify(form)}${said()}`);
    const asked = await api(served, 'POST', `/forms/${form.id}/fields/${form.fields[0].id}/upload-urls`, {
      filenames: ['a.txt'],
    });
    const issued = (await asked.json()) as any;
    assert.equal(asked.status, 200, `the upload URL: ${JSON.stringify(issued)}${said()}`);
    const url = new URL(issued.uploads[0].uploadUrl);
    return `${url.pathname}${url.search}`;
  }

  const jsonHead = (length: number, auth = true) =>
    `POST /api/v2025/forms HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n` +
    `${auth ? `Authorization: Bearer ${token}\r\n` : ''}\r\n{"name":"`;

  before(async () => {
    await processes.open();
    token = await processes.createAccount('Slow', 'slow@example.com');
  });

  after(() => processes.close());

  it('cuts off a JSON body, an unread body and headers that trickle, after REQUEST_TIMEOUT_MS', async () => {
    const served = await serve({ REQUEST_TIMEOUT_MS: '1000' });
    try {
      const body = trickle(served.port, jsonHead(10_000), 'a');
      // The token check answers before the body is read; the rest of the body may not hold the connection.
      const unread = trickle(served.port, jsonHead(10_000, false), 'a');
      const headers = trickle(served.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ', 'a');
      const [b, u, h] = await Promise.all([body.outcome, unread.outcome, headers.outcome]);

      assert.ok(b.closed, 'the connection of a trickling body is closed');
      assert.equal(statusOf(b.text), 408, b.text);
      assert.deepEqual(jsonOf(b.text), {
        status: 'error',
        error: 'The request body did not arrive within 1000 ms',
        code: 'body_timeout',
      });
      assert.match(b.text, /\r\nconnection: close\r\n/i);

      assert.ok(u.closed, 'the connection of an unread trickling body is closed');
      assert.equal(statusOf(u.text), 401, u.text);

      assert.ok(h.closed, 'the connection of trickling headers is closed');
      assert.equal(statusOf(h.text), 408, h.text);
      assert.equal(jsonOf(h.text).code, 'headers_timeout', h.text);

      // Nothing was created, and the service answers as before.
      const forms = (await (await api(served, 'GET', '/forms')).json()) as any;
      assert.equal(forms.forms.length, 0);
      assert.equal((await api(served, 'POST', '/forms', { name: 'Quick' })).status, 200);
    } finally {
      await stop(served);
    }
  });

  it(
    'answers 408 when the body deadline passed while the token was still being read, before reading the body',
    { skip: dialectName === 'sqlite' && 'PostgreSQL only: a lock held on the tokens makes the token check wait' },
    async () => {
      const served = await serve({ REQUEST_TIMEOUT_MS: '500' });
      const formCount = async () => ((await (await api(served, 'GET', '/forms')).json()) as any).forms.length;
      const formsBefore = await formCount();
      const locker = new pg.Client({ connectionString: processes.env.DATABASE_URL });
      await locker.connect();
      try {
        // Every request on PostgreSQL reads its token: while the table is locked, the check waits.
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE access_tokens IN ACCESS EXCLUSIVE MODE');
        const started = Date.now();
        const body = trickle(served.port, jsonHead(10_000), 'a');
        await new Promise((resolve) => setTimeout(resolve, 1500));
        await locker.query('COMMIT');
        const b = await body.outcome;

        assert.ok(b.closed, 'the connection is closed once the token is read, not when the body ends');
        assert.equal(statusOf(b.text), 408, b.text);
        assert.equal(jsonOf(b.text).code, 'body_timeout');
        assert.match(b.text, /\r\nconnection: close\r\n/i);
        assert.ok(Date.now() - started < BOUND_MS / 2, 'answered soon after the lock went');
        assert.equal(await formCount(), formsBefore, 'nothing was created');
      } finally {
        await locker.end();
        await stop(served);
      }
    },
  );

  it('cuts off an upload slower than UPLOAD_MIN_BYTES_PER_SECOND, keeps nothing and lets the URL be used again', async () => {
    const served = await serve({ REQUEST_TIMEOUT_MS: '1000', UPLOAD_MIN_BYTES_PER_SECOND: '1000' });
    try {
      const path = await uploadPath(served);
      // About 50 bytes a second, against a floor of 1000.
      const slow = trickle(
        served.port,
        `PUT ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\nhello`,
        '0123456789',
        200,
      );
      const cut = await slow.outcome;
      assert.ok(cut.closed, 'the connection of a trickling upload is closed');
      assert.equal(statusOf(cut.text), 408, cut.text);
      assert.equal(jsonOf(cut.text).code, 'body_timeout');
      const tmp = join(processes.dataDir, 'files', '.tmp');
      assert.deepEqual(readdirSync(tmp), [], 'no partial file is left');

      // The URL was given back: a whole upload at a normal pace takes it.
      const whole = await fetch(`${served.url}${path}`, {
        method: 'PUT',
        headers: { 'content-type': 'text/plain' },
        body: 'x'.repeat(50_000),
      });
      assert.equal(whole.status, 200, await whole.clone().text());
      assert.equal(((await whole.json()) as any).size, 50_000);
    } finally {
      await stop(served);
    }
  });

  it('finishes a SIGTERM within SHUTDOWN_TIMEOUT_MS while clients trickle a body and an upload', async () => {
    // Deadlines far away, so that only the stop can end these requests.
    const served = await serve({
      REQUEST_TIMEOUT_MS: '600000',
      UPLOAD_MIN_BYTES_PER_SECOND: '1',
      SHUTDOWN_TIMEOUT_MS: '1000',
    });
    try {
      const path = await uploadPath(served);
      // The clients would go on for three times the bound the stop is given, so that only the server can end them.
      const body = trickle(served.port, jsonHead(10_000), 'a', 200, 3 * BOUND_MS);
      const upload = trickle(
        served.port,
        `PUT ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\nhello`,
        '0123456789',
        200,
        3 * BOUND_MS,
      );
      // An idle keep-alive connection too.
      const idle = connect(served.port, '127.0.0.1');
      idle.on('error', () => undefined);
      idle.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await once(idle, 'data');
      await new Promise((r) => setTimeout(r, 1000));

      served.child.kill('SIGTERM');
      const exit = await Promise.race([
        served.exited,
        new Promise<'hung'>((r) => setTimeout(() => r('hung'), BOUND_MS)),
      ]);
      assert.deepEqual(exit, { code: 0, signal: null }, 'the process stops, cleanly, within the bound');
      const [b, u] = await Promise.all([body.outcome, upload.outcome]);
      assert.ok(b.closed && u.closed, 'the trickling connections were closed');
      idle.destroy();
    } finally {
      await stop(served);
    }
  });
});
