#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { describeFailure, runCommand } from './cli/commands.js';
import { loadConfig } from './config.js';

function fail(error: unknown): never {
  process.stderr.write(`formwork: ${describeFailure(error)}\n`);
  process.exit(1);
}

/** serve and worker: they run until a signal stops them. */
async function runService(command: 'serve' | 'worker', rest: string[]): Promise<void> {
  const config = loadConfig();
  if (command === 'serve') {
    const { values } = parseArgs({
      args: rest,
      options: { 'no-worker': { type: 'boolean', default: false } },
      strict: true,
    });
    const { startServer } = await import('./server.js');
    const server = await startServer(config, { worker: !values['no-worker'] });
    const stop = async () => {
      // close() bounds the wait for clients; this bounds whatever else might hang (a
      // dependency that does not answer while its pool closes).
      setTimeout(() => {
        process.stderr.write('formwork: the stop did not finish in time; exiting\n');
        process.exit(1);
      }, config.shutdownTimeoutMs + 10_000).unref();
      await server.close();
      process.exit(0);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    return;
  }
  parseArgs({ args: rest, options: {}, strict: true });
  const { startWorkerProcess } = await import('./server.js');
  const running = await startWorkerProcess(config);
  const stop = async () => {
    // The worker lets claimed jobs finish for SHUTDOWN_TIMEOUT_MS, then aborts them; this bounds the rest.
    setTimeout(() => {
      process.stderr.write('formwork: the stop did not finish in time; exiting\n');
      process.exit(1);
    }, config.shutdownTimeoutMs + 10_000).unref();
    await running.close();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'serve' || command === 'worker') runService(command, rest).catch(fail);
else runCommand(process.argv.slice(2), process.env, process).then((code) => (process.exitCode = code), fail);
