/**
 * Real `formwork` processes for the tests that need one of their own: several servers on one
 * database, signals, slow sockets, what a process writes to its log.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createPgDatabase, TEST_PG_URL } from './helpers.js';
import { cliArgs } from './node-entry.js';

const execFileAsync = promisify(execFile);

/** A loopback port that nothing listens on (for a moment). */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/**
 * Whether the process pid holds the socket that listens on loopback port (Linux's /proc);
 * undefined where there is no /proc to tell. freePort() closes its port before the child binds it, and
 * in that moment another suite's server (CI runs the SQLite and PostgreSQL legs side by side) can
 * take it: the child then exits on EADDRINUSE while the readiness poll is answered by the other
 * server, and the test talks to a stranger (seen once: its POST /forms answered 401).
 */
function listensOn(pid: number, port: number): boolean | undefined {
  let table: string;
  try {
    table = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return undefined;
  }
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    // The process has exited, or is exiting (its EADDRINUSE, as a CI run once found when this
    // answered "cannot tell" and the stranger was taken for it): it holds no socket.
    return false;
  }
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const listening = new Set<string>();
  for (const line of table.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    // local address, state 0A (LISTEN), inode
    if (cols[1]?.endsWith(`:${hexPort}`) && cols[3] === '0A') listening.add(cols[9] ?? '');
  }
  for (const fd of fds) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode && listening.has(inode)) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/** A served process that exited because another process had taken its port. */
class PortTaken extends Error {}

/**
 * launch(port) on fixed, or on a free port, and on another if a stranger takes that one before
 * the process binds it (a fixed port is the test's to keep free).
 */
async function onAFreePort(fixed: number | undefined, launch: (port: number) => Promise<Served>): Promise<Served> {
  if (fixed !== undefined) return launch(fixed);
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(await freePort());
    } catch (error) {
      if (!(error instanceof PortTaken) || attempt === 3) throw error;
    }
  }
}

export interface Served {
  child: ChildProcess;
  port: number;
  url: string;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * A data folder, a database (PostgreSQL when the suite runs on it) and the processes started
 * on them; close() stops the processes and removes the rest.
 */
export class ProcessSet {
  readonly dataDir: string;
  /** The environment every process gets: PATH, DATA_DIR and DATABASE_URL. */
  env: Record<string, string> = {};
  private database: { url: string; drop(): Promise<void> } | undefined;
  private readonly served: Served[] = [];

  constructor(prefix: string) {
    this.dataDir = mkdtempSync(join(tmpdir(), `formwork-${prefix}-`));
  }

  async open(): Promise<void> {
    if (TEST_PG_URL) this.database = await createPgDatabase();
    this.env = {
      PATH: process.env.PATH ?? '',
      DATA_DIR: this.dataDir,
      ...(this.database ? { DATABASE_URL: this.database.url } : {}),
    };
  }

  /** `formwork <args>` to its end; throws when it exits non-zero. */
  cli(args: string[], extra: Record<string, string> = {}): Promise<{ stdout: string; stderr: string }> {
    return execFileAsync(process.execPath, cliArgs(...args), {
      env: { ...this.env, LOG_LEVEL: 'silent', ...extra },
    });
  }

  /** An account made by the CLI (which also migrates, so servers start on a ready schema); its token. */
  async createAccount(name: string, email: string, more: string[] = []): Promise<string> {
    const created = await this.cli(['admin', 'create-account', '--name', name, '--email', email, ...more, '--json']);
    return (JSON.parse(created.stdout) as { token: string }).token;
  }

  /** `formwork serve` (with args such as --no-worker) on a port of its own (or extra.PORT), once /healthz answers. */
  serve(extra: Record<string, string> = {}, args: string[] = []): Promise<Served> {
    return onAFreePort(extra.PORT ? Number(extra.PORT) : undefined, (port) =>
      this.start('server', ['serve', ...args], port, '/healthz', {
        PORT: String(port),
        HOST: '127.0.0.1',
        PUBLIC_URL: `http://127.0.0.1:${port}`,
        LOG_LEVEL: 'silent',
        ...extra,
      }),
    );
  }

  /**
   * `formwork worker`, with its GET /metrics on a port of its own (WORKER_METRICS_PORT), once
   * that answers: url is where /metrics is.
   */
  worker(extra: Record<string, string> = {}): Promise<Served> {
    return onAFreePort(undefined, (port) =>
      this.start('worker', ['worker'], port, '/metrics', {
        HOST: '127.0.0.1',
        WORKER_METRICS_PORT: String(port),
        LOG_LEVEL: 'silent',
        ...extra,
      }),
    );
  }

  /** Spawns `formwork <args>` and waits until GET readyPath on port answers. */
  private async start(
    what: string,
    args: string[],
    port: number,
    readyPath: string,
    env: Record<string, string>,
  ): Promise<Served> {
    const url = `http://127.0.0.1:${port}`;
    const child = spawn(process.execPath, cliArgs(...args), {
      env: { ...this.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const served: Served = { child, port, url, output: () => output, exited };
    this.served.push(served);
    // Generous: on a loaded machine a process that loads the whole app (through tsx, when the
    // suite runs from the TypeScript) can take long to answer.
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (child.exitCode !== null) {
        const message = `${what} exited with ${child.exitCode}: ${output}`;
        throw output.includes('EADDRINUSE') ? new PortTaken(message) : new Error(message);
      }
      try {
        if ((await fetch(`${url}${readyPath}`)).ok) {
          if (listensOn(child.pid!, port) !== false) return served;
          // Someone else's server answered; ours exits on EADDRINUSE (reported above) or is
          // still starting.
        }
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`${what} on ${port} did not start: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Sends signal to a process that still runs and waits for it to end. */
  async stop(served: Served, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (served.child.exitCode === null && served.child.signalCode === null) {
      served.child.kill(signal);
      await served.exited;
    }
  }

  /** Stops every process that still runs, with signal. */
  async stopAll(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await Promise.all(this.served.map((s) => this.stop(s, signal)));
  }

  /** Stops every process (with signal), then drops the database and removes the data folder. */
  async close(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.stopAll(signal);
    await this.database?.drop();
    this.database = undefined;
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** What every process started so far wrote, one after another. */
  output(): string {
    return this.served.map((s) => s.output()).join('\n');
  }
}
