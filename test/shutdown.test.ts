/**
 * Graceful shutdown of real processes: SIGTERM stops taking new connections, answers the
 * requests in flight and lets the jobs already claimed finish; a job that would outlast
 * SHUTDOWN_TIMEOUT_MS is aborted and put back in the queue, so the process still exits.
 * (Cut-off of trickling clients is test/timeouts.test.ts; rolling restarts behind a balancer
 * are test/scale-out.test.ts.) And the start that cannot happen: a port another process holds.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { openDatabase } from '../src/db/database.js';
import { ProcessSet, type Served } from './support/processes.js';

/** A webhook receiver that answers each delivery after delayMs, or never (Infinity) until closed. */
async function slowReceiver(delayMs: number) {
  const got: string[] = [];
  const waiting = new Set<() => void>();
  const server: Server = createServer((req, res) => {
    req.resume();
    got.push(String(req.headers['webhook-id']));
    for (const w of waiting) w();
    if (delayMs !== Infinity) setTimeout(() => res.writeHead(200).end(), delayMs);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    got,
    async waitFor(n: number) {
      while (got.length < n) await new Promise<void>((resolve) => waiting.add(resolve)).then(() => waiting.clear());
    },
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe('graceful shutdown (SIGTERM)', () => {
  const processes = new ProcessSet('shutdown');
  let token: string;
  before(async () => {
    await processes.open();
    token = await processes.createAccount('Stops', 'stops@example.com');
  });
  after(() => processes.close('SIGKILL'));

  const api = async (served: Served, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${served.url}/api/v2025${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text);
  };

  /** A hooked form and one submission; resolves once the delivery has reached the receiver (the job is claimed and running). */
  async function deliveryInFlight(served: Served, receiver: Awaited<ReturnType<typeof slowReceiver>>) {
    const form = await api(served, 'POST', '/forms', { name: 'Hooked', fields: [{ type: 'text', label: 'Note' }] });
    await api(served, 'POST', `/form/${form.id}/webhook`, { url: `${receiver.url}/hook` });
    await api(served, 'POST', `/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: 'x' }] });
    await receiver.waitFor(1);
  }

  async function jobRows() {
    const db = openDatabase({ databaseUrl: processes.env.DATABASE_URL, dataDir: processes.dataDir });
    try {
      const jobs = await db.kysely
        .selectFrom('jobs')
        .select(['id', 'state', 'attempts'])
        .where('kind', '=', 'webhooks.deliver')
        .execute();
      const runs = await db.kysely
        .selectFrom('job_runs')
        .innerJoin('jobs', 'jobs.id', 'job_runs.job_id')
        .select(['job_runs.outcome', 'job_runs.job_id'])
        .where('jobs.kind', '=', 'webhooks.deliver')
        .execute();
      return {
        jobs,
        runs: runs.map((r) => r.outcome),
        runsOf: (id: number) => runs.filter((r) => r.job_id === id).map((r) => r.outcome),
      };
    } finally {
      await db.close();
    }
  }

  it('answers the request in flight, refuses new connections, finishes the claimed job, then exits 0', async () => {
    const receiver = await slowReceiver(1500);
    const served = await processes.serve({
      SHUTDOWN_TIMEOUT_MS: '20000',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WORKER_POLL_MS: '100',
    });
    try {
      await deliveryInFlight(served, receiver);

      // A request in flight: its headers are in, its body comes after the SIGTERM.
      const body = JSON.stringify({ name: 'Made while stopping' });
      const inFlight = new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port: served.port,
            method: 'POST',
            path: '/api/v2025/forms',
            headers: {
              authorization: `Bearer ${token}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
              // The server answers 100 Continue once it has the headers: the request is then in flight.
              expect: '100-continue',
            },
          },
          (res) => {
            let text = '';
            res.on('data', (d: Buffer) => (text += d.toString()));
            res.on('end', () => resolve({ status: res.statusCode!, text }));
          },
        );
        req.on('error', reject);
        req.flushHeaders();
        req.once('continue', () => {
          req.write(body.slice(0, 5));
          served.child.kill('SIGTERM');
          // Until the listener is closed, new connections still come in; once it is, they are refused.
          void (async () => {
            for (;;) {
              try {
                await fetch(`${served.url}/healthz`);
              } catch {
                break;
              }
              await new Promise((r) => setTimeout(r, 20));
            }
            req.end(body.slice(5));
          })();
        });
      });
      const answered = await inFlight;
      assert.equal(answered.status, 200, answered.text);
      assert.equal(JSON.parse(answered.text).name, 'Made while stopping');

      const exit = await served.exited;
      assert.deepEqual(exit, { code: 0, signal: null }, served.output());
      const { jobs, runs } = await jobRows();
      assert.deepEqual(
        jobs.map((j) => j.state),
        ['done'],
        'the delivery claimed before the SIGTERM finished',
      );
      assert.deepEqual(runs, ['done']);
      assert.equal(receiver.got.length, 1);
    } finally {
      receiver.close();
      await processes.stop(served);
    }
  });

  it('aborts a claimed job that outlasts SHUTDOWN_TIMEOUT_MS and puts it back in the queue, then exits 0', async () => {
    const receiver = await slowReceiver(Infinity);
    const served = await processes.serve(
      { SHUTDOWN_TIMEOUT_MS: '500', WEBHOOK_ALLOW_PRIVATE: 'true', WORKER_POLL_MS: '100' },
      [],
    );
    try {
      await deliveryInFlight(served, receiver);
      served.child.kill('SIGTERM');
      const exit = await served.exited;
      assert.deepEqual(exit, { code: 0, signal: null }, served.output());
      const { jobs, runsOf } = await jobRows();
      const last = jobs.sort((x, y) => y.id - x.id)[0]!;
      const runs = runsOf(last.id);
      assert.equal(last.state, 'queued', 'interrupted, not failed: another worker runs it again');
      assert.deepEqual(runs, ['interrupted']);

      // It is claimable again: a worker process started later runs it (the receiver is gone by then, so that run fails and is retried).
      receiver.close();
      const worker = await processes.worker({ WEBHOOK_ALLOW_PRIVATE: 'true', WORKER_POLL_MS: '100' });
      for (;;) {
        const now = (await jobRows()).runsOf(last.id);
        if (now.length > runs.length && !now.includes(null)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await processes.stop(worker, 'SIGTERM');
      assert.equal((await worker.exited).code, 0, worker.output());
    } finally {
      receiver.close();
      await processes.stop(served);
    }
  });

  it('exits 1 on a port another process holds, and the readiness poll does not take that one for it', async () => {
    // The stranger answers 200 to anything, /healthz too: a poll that only asked the port would
    // start the test on it (how a CI run once sent its requests to another suite's server).
    const stranger = createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    stranger.listen(0, '127.0.0.1');
    await once(stranger, 'listening');
    try {
      const port = (stranger.address() as AddressInfo).port;
      await assert.rejects(processes.serve({ PORT: String(port) }), (error: Error) => {
        assert.match(error.message, /server exited with 1: .*EADDRINUSE/s);
        return true;
      });
    } finally {
      stranger.close();
    }
  });
});
