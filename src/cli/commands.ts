import { parseArgs } from 'node:util';
import { Clock } from '../clock.js';
import { ConfigError, loadConfig, type Config } from '../config.js';
import type { AppContext } from '../context.js';
import { openDatabase } from '../db/database.js';
import { migrateToLatest } from '../db/migrate.js';
import { Hasher } from '../crypto/hasher.js';
import { AppError } from '../errors.js';
import { createAccount } from '../modules/accounts/service.js';
import { MAX_ID } from '../http/schemas.js';
import { accountExists, findUser } from '../modules/accounts/repository.js';
import { createClient } from '../modules/oauth-clients/service.js';
import { LEVELS, type Level } from '../modules/permissions/levels.js';
import { createTokenForUser, listTokensOfUser, revokeAnyToken } from '../modules/tokens/service.js';
import { createUser, deletePermission, setPermission } from '../modules/users/service.js';

export const USAGE = `Usage: formwork <command>

  serve [--no-worker]        start the API (and, unless --no-worker, the background worker)
  worker                     run only the background worker (for deployments with separate workers)
  migrate                    bring the database schema up to date
  admin create-account --name NAME --email EMAIL [--password PW] [--json]
  admin create-subaccount --account ID --name NAME --email EMAIL [--password PW] [--json]
                             (a subaccount of account ID, with its owner, default theme and a first token)
  admin create-token --user ID [--name NAME] [--scope SCOPE ...] [--expires-in-days N] [--json]
  admin list-tokens --user ID [--json]
  admin revoke-token --token-id ID | --token VALUE [--json]
  admin create-user --account ID --email EMAIL --name NAME --role admin|member [--password PW] [--json]
  admin set-permission --user ID --form ID --level view|submissions|edit|full [--json]
                             (--level none takes the member's level on the form away)
  admin create-client --account ID --name NAME --redirect-uri URI [--redirect-uri URI ...] [--no-pkce] [--json]
                             (--no-pkce lets the application leave out PKCE; it is required otherwise)

Settings come from the environment; see the README.`;

/** A refusal of the command's input: one line on stderr and exit code 1, no stack. */
export class CommandError extends Error {}

function fail(message: string): never {
  throw new CommandError(message);
}

/** Where a command writes: the process's streams, or a test's buffers. */
export interface CommandOutput {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** The part of a context that admin commands use: the database and the system's time. */
type AdminContext = Pick<AppContext, 'db' | 'clock'>;

async function withDatabase<T>(config: Config, fn: (ctx: AdminContext) => Promise<T>): Promise<T> {
  const db = openDatabase({
    databaseUrl: config.databaseUrl,
    poolSize: config.databasePoolSize,
    dataDir: config.dataDir,
  });
  try {
    await migrateToLatest(db);
    return await fn({ db: db.kysely, clock: new Clock() });
  } finally {
    await db.close();
  }
}

function print(out: CommandOutput, json: boolean, value: Record<string, unknown>): void {
  if (json) out.stdout.write(`${JSON.stringify(value)}\n`);
  else for (const [k, v] of Object.entries(value)) out.stdout.write(`${k}: ${String(v)}\n`);
}

function idOption(raw: string | undefined, flag: string, what: string): number {
  const id = Number(raw);
  if (!raw || !/^\d+$/.test(raw) || id < 1 || id > MAX_ID) fail(`${flag} needs ${what}`);
  return id;
}

// One command hashes at most one password; the bound is the API's concern.
const commandHasher = new Hasher({ concurrency: 1, queueLimit: 0 });

async function admin(config: Config, args: string[], out: CommandOutput): Promise<void> {
  const [action, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      name: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      user: { type: 'string' },
      account: { type: 'string' },
      role: { type: 'string' },
      form: { type: 'string' },
      level: { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      scope: { type: 'string', multiple: true },
      'expires-in-days': { type: 'string' },
      'token-id': { type: 'string' },
      token: { type: 'string' },
      'no-pkce': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (action === 'create-account') {
    if (!values.name || !values.email) fail('create-account needs --name and --email');
    const created = await withDatabase(config, (ctx) =>
      createAccount(ctx, { name: values.name!, email: values.email!, password: values.password }, commandHasher.kdf()),
    );
    print(out, values.json, { ...created });
  } else if (action === 'create-subaccount') {
    const parentAccountId = idOption(values.account, '--account', 'the id of the parent account');
    if (!values.name || !values.email) fail('create-subaccount needs --account, --name and --email');
    const created = await withDatabase(config, async (ctx) => {
      if (!(await accountExists(ctx.db, parentAccountId))) fail('Account not found');
      return createAccount(
        ctx,
        { name: values.name!, email: values.email!, password: values.password, parentAccountId },
        commandHasher.kdf(),
      );
    });
    print(out, values.json, { parentAccountId, ...created });
  } else if (action === 'create-token') {
    const userId = idOption(values.user, '--user', 'a user id');
    const days = values['expires-in-days'];
    if (days !== undefined && !/^\d{1,9}$/.test(days)) fail('--expires-in-days needs a whole number of days');
    const input = {
      name: values.name ?? 'personal',
      ...(values.scope ? { scopes: values.scope.flatMap((s) => s.split(/[\s,]+/)).filter((s) => s !== '') } : {}),
      ...(days !== undefined ? { expiresInDays: Number(days) } : {}),
    };
    const created = await withDatabase(config, (ctx) => createTokenForUser(ctx.db, userId, input, ctx.clock.now()));
    print(out, values.json, {
      userId,
      tokenId: created.id,
      name: created.name,
      prefix: created.prefix,
      scopes: created.scopes,
      expiresAt: created.expiresAt,
      token: created.token,
    });
  } else if (action === 'list-tokens') {
    const userId = idOption(values.user, '--user', 'a user id');
    const listed = await withDatabase(config, (ctx) => listTokensOfUser(ctx.db, userId));
    if (values.json) print(out, true, listed);
    else
      for (const t of listed.tokens)
        out.stdout.write(
          `${t.id}\t${t.prefix ?? '-'}\t${t.name}\t${t.scopes.join(' ')}\tcreated ${t.created}\tlast used ${t.lastUsed ?? 'never'}\texpires ${t.expiresAt ?? 'never'}\n`,
        );
  } else if (action === 'revoke-token') {
    if ((values['token-id'] === undefined) === (values.token === undefined))
      fail('revoke-token needs --token-id or --token, one of them');
    const by =
      values.token !== undefined
        ? { token: values.token }
        : { id: idOption(values['token-id'], '--token-id', 'a token id') };
    const revoked = await withDatabase(config, (ctx) => revokeAnyToken(ctx.db, by, ctx.clock.now()));
    print(out, values.json, { ...revoked });
  } else if (action === 'create-user') {
    const accountId = idOption(values.account, '--account', 'an account id');
    if (!values.email || !values.name) fail('create-user needs --email and --name');
    if (values.role !== 'admin' && values.role !== 'member') fail('create-user needs --role admin or --role member');
    if (values.password !== undefined && values.password.length < 8) fail('--password must be at least 8 characters');
    const user = await withDatabase(config, async (ctx) => {
      if (!(await accountExists(ctx.db, accountId))) fail('Account not found');
      return createUser(
        ctx,
        { accountId },
        {
          email: values.email!,
          name: values.name!,
          role: values.role as 'admin' | 'member',
          password: values.password,
        },
        commandHasher.kdf(),
      );
    });
    print(out, values.json, { ...user });
  } else if (action === 'set-permission') {
    const userId = idOption(values.user, '--user', 'a user id');
    const formId = idOption(values.form, '--form', 'a form id');
    const level = values.level;
    if (level !== 'none' && !LEVELS.includes(level as Level))
      fail(`set-permission needs --level ${LEVELS.join('|')}|none`);
    const result = await withDatabase(config, async (ctx) => {
      const user = await findUser(ctx.db, userId);
      if (!user) fail('User not found');
      if (level === 'none') return deletePermission(ctx.db, { accountId: user.account_id }, { userId, formId });
      return {
        userId,
        ...(await setPermission(ctx, { accountId: user.account_id }, { userId, formId }, level as Level)),
      };
    });
    print(out, values.json, { ...result });
  } else if (action === 'create-client') {
    const accountId = idOption(values.account, '--account', 'an account id');
    if (!values.name || !values['redirect-uri']?.length)
      fail('create-client needs --name and at least one --redirect-uri');
    const client = await withDatabase(config, async (ctx) => {
      if (!(await accountExists(ctx.db, accountId))) fail('Account not found');
      return createClient(
        ctx,
        { accountId },
        {
          name: values.name!,
          redirectUris: values['redirect-uri']!,
          requirePkce: !values['no-pkce'],
        },
      );
    });
    print(out, values.json, { ...client });
  } else {
    fail(`unknown admin command "${action ?? ''}"\n${USAGE}`);
  }
}

async function migrate(config: Config, out: CommandOutput): Promise<void> {
  const db = openDatabase({
    databaseUrl: config.databaseUrl,
    poolSize: config.databasePoolSize,
    dataDir: config.dataDir,
  });
  try {
    const names = await migrateToLatest(db);
    out.stdout.write(names.length ? `applied: ${names.join(', ')}\n` : 'schema is up to date\n');
  } finally {
    await db.close();
  }
}

/** The command's one line for an error: refusals and bad flags as they are, anything else with its stack. */
export function describeFailure(error: unknown): string {
  if (error instanceof CommandError || error instanceof AppError) return error.message;
  if (error instanceof ConfigError) return `configuration error: ${error.message}`;
  if (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'))
    return error.message;
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}

/**
 * Runs a command that finishes (help, migrate, admin) and answers its exit code; serve and
 * worker run for the life of the process and stay in src/cli.ts. Tests call this in-process.
 */
export async function runCommand(argv: string[], env: NodeJS.ProcessEnv, out: CommandOutput): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (!command || command === 'help' || command === '--help') out.stdout.write(`${USAGE}\n`);
    else if (command === 'migrate') await migrate(loadConfig(env), out);
    else if (command === 'admin') await admin(loadConfig(env), rest, out);
    else fail(`unknown command "${command}"\n${USAGE}`);
    return 0;
  } catch (error) {
    out.stderr.write(`formwork: ${describeFailure(error)}\n`);
    return 1;
  }
}
