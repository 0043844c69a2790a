#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from './config.js';
import { openDatabase } from './db/database.js';
import { migrateToLatest } from './db/migrate.js';
import { AppError } from './errors.js';
import { createAccount, createPersonalToken } from './modules/accounts/service.js';
import { startServer } from './server.js';

const USAGE = `Usage: formwork <command>

  serve [--no-worker]        start the API (and, unless --no-worker, the background worker)
  migrate                    bring the database schema up to date
  admin create-account --name NAME --email EMAIL [--password PW] [--json]
  admin create-token --user ID [--name NAME] [--json]

Settings come from the environment; see the README.`;

function fail(message: string): never {
  process.stderr.write(`formwork: ${message}\n`);
  process.exit(1);
}

async function withDatabase<T>(config: Config, fn: (db: ReturnType<typeof openDatabase>) => Promise<T>): Promise<T> {
  const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    await migrateToLatest(db);
    return await fn(db);
  } finally {
    await db.close();
  }
}

function print(json: boolean, value: Record<string, unknown>): void {
  if (json) process.stdout.write(`${JSON.stringify(value)}\n`);
  else for (const [k, v] of Object.entries(value)) process.stdout.write(`${k}: ${String(v)}\n`);
}

async function admin(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      name: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      user: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (action === 'create-account') {
    if (!values.name || !values.email) fail('create-account needs --name and --email');
    const created = await withDatabase(config, (db) =>
      createAccount(db.kysely, { name: values.name!, email: values.email!, password: values.password }),
    );
    print(values.json, { ...created });
  } else if (action === 'create-token') {
    const userId = Number(values.user);
    if (!values.user || !Number.isInteger(userId) || userId < 1) fail('create-token needs --user with a user id');
    const created = await withDatabase(config, (db) => createPersonalToken(db.kysely, userId, values.name));
    print(values.json, { userId, token: created.token });
  } else {
    fail(`unknown admin command "${action ?? ''}"\n${USAGE}`);
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) fail(`configuration error: ${error.message}`);
    throw error;
  }

  switch (command) {
    case 'serve': {
      parseArgs({ args: rest, options: { 'no-worker': { type: 'boolean' } }, strict: true });
      const server = await startServer(config);
      const stop = async () => {
        await server.close();
        process.exit(0);
      };
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      break;
    }
    case 'migrate': {
      const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
      try {
        const names = await migrateToLatest(db);
        process.stdout.write(names.length ? `applied: ${names.join(', ')}\n` : 'schema is up to date\n');
      } finally {
        await db.close();
      }
      break;
    }
    case 'admin':
      await admin(config, rest);
      break;
    default:
      fail(`unknown command "${command}"\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof AppError) fail(error.message);
  if (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS')) fail(error.message);
  fail(error instanceof Error ? (error.stack ?? error.message) : String(error));
});
