/**
 * deploy/nginx.conf in front of a real API process while the other is away (stopped, or
 * restarting: its port refuses connections), on either database. The shipped retry rule sends
 * a request on after a 503 (a stopping process's answer) and so counts a 503 as a failure; a
 * running process answers 503 now and then (hashing_busy, rate_limiter_unavailable). One such
 * answer must not leave nginx with no process to send to: before the file's backup servers,
 * it answered 502 to every request for fail_timeout (2 s), which a rolling restart on a busy
 * machine once met (test/scale-out.test.ts).
 *
 * Skipped without nginx (/usr/sbin/nginx), unless FORMWORK_TEST_REQUIRE_SCALEOUT is set (CI
 * sets it), which makes that a failure.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { nginxMissing, skipUnlessPresent, startBalancer, type Balancer } from './support/nginx.js';
import { freePort, ProcessSet } from './support/processes.js';

const skip = skipUnlessPresent(nginxMissing());

describe('the shipped nginx configuration, one API process away', { skip }, () => {
  const processes = new ProcessSet('balancer');
  let balancer: Balancer | undefined;
  let token: string;

  before(async () => {
    await processes.open();
    token = await processes.createAccount('Balanced', 'balanced@example.com');
    // Redis that never answers: every API call is a 503 rate_limiter_unavailable, while
    // /healthz (no quota) answers 200. The second port is the process that is away.
    const [running, away, balancerPort] = [
      await processes.serve({ REDIS_URL: 'redis://127.0.0.1:1', TRUST_PROXY: '1' }, ['--no-worker']),
      await freePort(),
      await freePort(),
    ];
    balancer = await startBalancer(processes.dataDir, [running.port, away], balancerPort);
  });

  after(async () => {
    await balancer?.stop();
    await processes.close();
  });

  it('keeps sending to the running process after it answered 503', async () => {
    const healthz = async () => (await fetch(`${balancer!.url}/healthz`)).status;
    // Round robin meets the refused port, which nginx then leaves out; the running one answers.
    for (let i = 0; i < 4; i++) assert.equal(await healthz(), 200);

    const busy = await fetch(`${balancer!.url}/api/v2025/forms`, { headers: { authorization: `Bearer ${token}` } });
    const body = await busy.text();
    // The process's own 503, or nginx's 502 when its last try met the refused port.
    assert.ok(busy.status === 503 || busy.status === 502, `${busy.status} ${body}`);
    if (busy.status === 503) assert.match(body, /rate_limiter_unavailable/);

    // Within fail_timeout of that 503: still served, not "no live upstreams".
    const after503: number[] = [];
    for (let i = 0; i < 6; i++) after503.push(await healthz());
    assert.deepEqual(after503, [200, 200, 200, 200, 200, 200], balancer!.output());
  });
});
