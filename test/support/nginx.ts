/**
 * nginx run with deploy/nginx.conf as shipped, only its ports changed: the balancer of the
 * scaled-out shape (docs/scale-out.md), for the tests that put real API processes behind it.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const NGINX = '/usr/sbin/nginx';

/** What a balancer test lacks to run (besides what missing names): nginx itself. */
export function nginxMissing(): string[] {
  return existsSync(NGINX) ? [] : [`${NGINX} (apt-get install nginx-light)`];
}

/**
 * Why a balancer test is skipped, given what it lacks, or false when it lacks nothing;
 * with FORMWORK_TEST_REQUIRE_SCALEOUT set (CI sets it), lacking anything throws instead.
 */
export function skipUnlessPresent(missing: string[]): string | false {
  if (missing.length === 0) return false;
  const reason = `missing ${missing.join(' and ')}`;
  if (process.env.FORMWORK_TEST_REQUIRE_SCALEOUT)
    throw new Error(`FORMWORK_TEST_REQUIRE_SCALEOUT is set but: ${reason}`);
  return `${reason}; set FORMWORK_TEST_REQUIRE_SCALEOUT=1 to fail instead`;
}

export interface Balancer {
  child: ChildProcess;
  url: string;
  /** What nginx wrote to its output and its error log. */
  output(): string;
  /** Stops nginx (SIGTERM) if it still runs, and waits for its end. */
  stop(): Promise<void>;
}

/**
 * nginx under dir (its prefix: logs, temporary files) listening on balancerPort, in front of
 * the API processes on apiPorts ([first, second], as the shipped file's 8081 and 8082), once
 * it answers GET /healthz (from whichever process is up).
 */
export async function startBalancer(dir: string, apiPorts: [number, number], balancerPort: number): Promise<Balancer> {
  const prefix = join(dir, 'nginx');
  for (const sub of ['logs', 'tmp']) mkdirSync(join(prefix, sub), { recursive: true });
  // nginx's worker drops to nobody, which must reach its temporary folder.
  chmodSync(dir, 0o755);
  chmodSync(prefix, 0o777);
  chmodSync(join(prefix, 'tmp'), 0o777);
  const shipped = readFileSync('deploy/nginx.conf', 'utf8');
  for (const needle of ['127.0.0.1:8081', '127.0.0.1:8082', 'listen 127.0.0.1:8080;'])
    assert.ok(shipped.includes(needle), needle);
  const conf = shipped
    .replaceAll('127.0.0.1:8081', `127.0.0.1:${apiPorts[0]}`)
    .replaceAll('127.0.0.1:8082', `127.0.0.1:${apiPorts[1]}`)
    .replace('listen 127.0.0.1:8080;', `listen 127.0.0.1:${balancerPort};`);
  writeFileSync(join(prefix, 'nginx.conf'), conf);
  const child = spawn(NGINX, ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const balancer: Balancer = {
    child,
    url: `http://127.0.0.1:${balancerPort}`,
    output: () =>
      output + (existsSync(join(prefix, 'logs/error.log')) ? readFileSync(join(prefix, 'logs/error.log'), 'utf8') : ''),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) assert.fail(`nginx exited: ${balancer.output()}`);
    try {
      if ((await fetch(`${balancer.url}/healthz`)).ok) return balancer;
    } catch {
      // not yet
    }
    if (i >= 100) {
      child.kill('SIGKILL');
      assert.fail(`nginx did not answer: ${balancer.output()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
