/**
 * Observability: GET /metrics (Prometheus text, protected), the request id (x-request-id) in
 * every answer and log line and in the jobs a request enqueues, and the worker's lines for
 * those jobs.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker, type WorkerLog } from '../src/jobs/worker.js';
import { requestIdHolders, requestIdHoldsTaken } from '../src/request-context.js';
import { startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { ProcessSet } from './support/processes.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { sample } from './support/prometheus.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('observability', () => {
  let app: TestApp;
  let a: TestAccount;
  let receiver: Receiver;

  before(async () => {
    app = await startTestApp({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    a = await app.account();
    receiver = await startReceiver();
  });
  after(async () => {
    await app.close();
    await receiver.close();
  });

  it('answers x-request-id: the sane one it was sent, else a new one, on every kind of answer', async () => {
    const sent = await app.request('GET', '/api/v2025/forms', {
      token: a.token,
      headers: { 'x-request-id': 'lb-1234.abc' },
    });
    assert.equal(sent.status, 200);
    assert.equal(sent.headers.get('x-request-id'), 'lb-1234.abc');
    for (const [path, headers, status] of [
      ['/api/v2025/forms', {}, 401],
      ['/api/v2025/nowhere', {}, 404],
      ['/healthz', { 'x-request-id': 'has space' }, 200],
      ['/readyz', { 'x-request-id': 'x'.repeat(129) }, 200],
      ['/api/v2025/forms', { 'x-request-id': '<script>' }, 401],
    ] as const) {
      const res = await app.request('GET', path, { headers });
      assert.equal(res.status, status, path);
      assert.match(res.headers.get('x-request-id') ?? '', UUID, `${path} ${JSON.stringify(headers)}`);
    }
    const bad = await app.request('POST', '/api/v2025/forms', {
      token: a.token,
      raw: '{"name":',
      headers: { 'x-request-id': 'bad-json-1' },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.headers.get('x-request-id'), 'bad-json-1');
  });

  it('serves /metrics to loopback without a proxy header, by route pattern and status, and refuses it through a proxy', async () => {
    const form = (await a.post<any>('/forms', { name: 'Counted', fields: [{ type: 'text', label: 'Note' }] })).body;
    for (let i = 0; i < 3; i++) assert.equal((await a.get(`/forms/${form.id}`)).status, 200);
    assert.equal((await a.get(`/forms/999999999`)).status, 404);
    const res = await app.request('GET', '/metrics');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const body = res.text;
    assert.ok(
      (sample(body, 'formwork_http_requests_total', {
        method: 'GET',
        route: '/api/v2025/forms/:formId',
        status: '200',
      }) ?? 0) >= 3,
      body
        .split('\n')
        .filter((l) => l.startsWith('formwork_http_requests_total'))
        .join('\n'),
    );
    assert.equal(
      sample(body, 'formwork_http_requests_total', { method: 'GET', route: '/api/v2025/forms/:formId', status: '404' }),
      1,
    );
    assert.ok(!body.includes(`/forms/${form.id}"`), 'no raw URL in a label');
    assert.ok(body.includes('formwork_http_request_duration_seconds_bucket{'));
    if (app.config.databaseUrl) assert.ok(sample(body, 'formwork_db_pool_connections', { state: 'max' }) === 10);

    const proxied = await app.request('GET', '/metrics', { headers: { 'x-forwarded-for': '203.0.113.9' } });
    assert.equal(proxied.status, 404);
    assert.equal((proxied.body as any).code, 'route_not_found');
  });

  it('lets go of the request id once each writing request is over, whatever its answer, and reads never take it', async () => {
    const form = (await a.post<any>('/forms', { name: 'Held', fields: [{ type: 'text', label: 'Note' }] })).body;
    const statuses = [
      (await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: 'x' }] })).status,
      (await a.post(`/forms/${form.id}/submissions`, { fields: 'not a list' })).status,
      (await a.post('/forms/999999/submissions', { fields: [] })).status,
      (await app.request('POST', '/api/v2025/forms', { body: { name: 'No token' } })).status,
      (await a.post('/forms', undefined, { raw: '{"name":', headers: { 'content-type': 'application/json' } })).status,
      (await a.put(`/forms/${form.id}`, { name: 'Held again' })).status,
      (await a.get(`/forms/${form.id}`)).status,
    ];
    assert.deepEqual(statuses, [200, 400, 404, 401, 400, 200, 200]);
    // A request whose client goes away in the middle of its body.
    const socket = connect(new URL(app.url).port ? Number(new URL(app.url).port) : 80, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      `POST /api/v2025/forms HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.token}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":',
    );
    await sleep(100);
    socket.destroy();
    const deadline = Date.now() + 5000;
    while (requestIdHolders() > 0 && Date.now() < deadline) await sleep(20);
    assert.equal(requestIdHolders(), 0);
  });

  it('runs a plain create outside the request-id context (a promise hook on Node 20), and other writes inside it', async () => {
    const form = (await a.post<any>('/forms', { name: 'Quiet', fields: [{ type: 'text', label: 'Note' }] })).body;
    const create = () => a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: 'x' }] });
    // The first create reads the form's definition; the ones after it find it kept.
    assert.equal((await create()).status, 200);
    const before = requestIdHoldsTaken();
    for (let i = 0; i < 3; i++) assert.equal((await create()).status, 200);
    assert.equal(requestIdHoldsTaken(), before);
    assert.equal((await a.put(`/forms/${form.id}`, { name: 'Quiet still' })).status, 200);
    assert.equal(requestIdHoldsTaken(), before + 1);
  });

  it('carries the request id into the jobs a request enqueues and the worker lines of their runs, and counts outbox depth and runs', async () => {
    const form = (await a.post<any>('/forms', { name: 'Hooked', fields: [{ type: 'text', label: 'Note' }] })).body;
    const hook = await a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/hook` });
    assert.ok(hook.status < 300, hook.text);
    const submitted = await a.post<any>(
      `/forms/${form.id}/submissions`,
      { fields: [{ id: form.fields[0].id, value: 'hello' }] },
      { headers: { 'x-request-id': 'req-from-balancer-42' } },
    );
    assert.equal(submitted.status, 200, submitted.text);
    assert.equal(submitted.headers.get('x-request-id'), 'req-from-balancer-42');

    const jobs = await app.server.db.kysely
      .selectFrom('jobs')
      .select(['kind', 'request_id', 'state'])
      .where('kind', '=', 'webhooks.deliver')
      .execute();
    assert.deepEqual(
      jobs.map((j) => [j.request_id, j.state]),
      [['req-from-balancer-42', 'queued']],
    );

    // No worker runs in the test app: the delivery waits in the outbox, and /metrics says so.
    const before = (await app.request('GET', '/metrics')).text;
    assert.equal(
      sample(before, 'formwork_outbox_jobs', { kind: 'webhooks.deliver', state: 'due' }),
      1,
      before
        .split('\n')
        .filter((l) => l.includes('outbox'))
        .join('\n'),
    );
    assert.ok((sample(before, 'formwork_outbox_oldest_due_age_seconds', { kind: 'webhooks.deliver' }) ?? -1) >= 0);

    const lines: { level: string; details: Record<string, unknown>; message: string }[] = [];
    const log = Object.fromEntries(
      (['info', 'warn', 'error', 'debug'] as const).map((level) => [
        level,
        (details: Record<string, unknown>, message: string) => lines.push({ level, details, message }),
      ]),
    ) as unknown as WorkerLog;
    const ctx = app.server.ctx;
    const worker = createWorker(ctx, {
      kinds: jobKinds,
      log,
      onRun: (kind, outcome, seconds) => ctx.metrics.jobRun(kind, outcome, seconds),
    });
    await worker.runDue();
    await receiver.waitFor(1);
    const run = lines.find((l) => l.message === 'job run ended' && l.details.kind === 'webhooks.deliver');
    assert.ok(run, JSON.stringify(lines));
    assert.equal(run.details.requestId, 'req-from-balancer-42');
    assert.equal(run.details.outcome, 'done');

    const afterRun = (await app.request('GET', '/metrics')).text;
    // A drained kind reads 0 (its finished jobs are kept), not a series that vanishes.
    assert.equal(sample(afterRun, 'formwork_outbox_jobs', { kind: 'webhooks.deliver', state: 'due' }), 0);
    assert.equal(sample(afterRun, 'formwork_outbox_oldest_due_age_seconds', { kind: 'webhooks.deliver' }), 0);
    assert.ok((sample(afterRun, 'formwork_job_runs_total', { kind: 'webhooks.deliver', outcome: 'done' }) ?? 0) >= 1);
  });

  it('asks for METRICS_TOKEN when it is set', async () => {
    const guarded = await startTestApp({ METRICS_TOKEN: 'a-long-metrics-token-123' }, app);
    try {
      assert.equal((await guarded.request('GET', '/metrics')).status, 404);
      assert.equal(
        (await guarded.request('GET', '/metrics', { headers: { authorization: 'Bearer wrong-token-wrong-token' } }))
          .status,
        404,
      );
      const res = await guarded.request('GET', '/metrics', {
        headers: { authorization: 'Bearer a-long-metrics-token-123', 'x-forwarded-for': '203.0.113.9' },
      });
      assert.equal(res.status, 200);
      assert.ok(res.text.includes('formwork_http_requests_total'));
    } finally {
      await guarded.close();
    }
  });
});

describe('request ids in the logs of real processes', () => {
  const processes = new ProcessSet('reqid');
  before(() => processes.open());
  after(() => processes.close('SIGTERM'));

  it('writes the request id on every line of a request, and the worker process serves its own /metrics', async () => {
    const token = await processes.createAccount('Ids', 'ids@example.com');
    const server = await processes.serve({ LOG_LEVEL: 'debug' }, ['--no-worker']);
    const worker = await processes.worker({ LOG_LEVEL: 'debug', WORKER_POLL_MS: '100' });
    const res = await fetch(`${server.url}/api/v2025/forms`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-request-id': 'trace-me-7' },
      body: JSON.stringify({ name: 'Logged', fields: [{ type: 'text', label: 'Note' }] }),
    });
    const form = (await res.json()) as any;
    assert.equal(res.status, 200, JSON.stringify(form));
    // A notification email (kept in the mail log without SMTP_URL) is a job that the worker process runs.
    const notify = await fetch(`${server.url}/api/v2025/forms/${form.id}/notifications`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ subject: 'New', message: 'New one', recipients: ['team@example.com'] }),
    });
    assert.equal(notify.status, 201, await notify.text());
    const submitted = await fetch(`${server.url}/api/v2025/forms/${form.id}/submissions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-request-id': 'submit-me-8' },
      body: JSON.stringify({ fields: [{ id: form.fields[0].id, value: 'hi' }] }),
    });
    assert.equal(submitted.status, 200, await submitted.text());
    const deadline = Date.now() + 60_000;
    while (!worker.output().includes('"submit-me-8"')) {
      assert.ok(Date.now() < deadline, `the worker logged no line for the job: ${worker.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const runLine = worker
      .output()
      .split('\n')
      .find((l) => l.includes('"submit-me-8"'))!;
    assert.equal(JSON.parse(runLine).kind, 'emails.send', runLine);
    const metrics = await (await fetch(`${worker.url}/metrics`)).text();
    assert.match(metrics, /formwork_job_runs_total\{kind="emails.send",outcome="done",role="worker"\} 1/);
    assert.equal((await fetch(`${worker.url}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } })).status, 404);
    await processes.stop(server, 'SIGTERM');
    await processes.stop(worker, 'SIGTERM');
    assert.equal((await worker.exited).code, 0, worker.output());
    const mine = server
      .output()
      .split('\n')
      .filter((l) => l.includes('trace-me-7'));
    assert.ok(mine.length >= 2, server.output());
    for (const line of mine) assert.equal(JSON.parse(line).requestId, 'trace-me-7', line);
    // Every line about a request carries one.
    for (const line of server.output().split('\n')) {
      if (!line.startsWith('{')) continue;
      const entry = JSON.parse(line);
      if (entry.req || entry.res) assert.ok(entry.requestId, line);
    }
  });
});
