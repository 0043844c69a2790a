import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import pg from 'pg';
import { runCommand } from '../src/cli/commands.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { createPgDatabase, dialectName, startTestApp, TEST_PG_URL } from './support/helpers.js';
import { cliArgs } from './support/node-entry.js';

const run = promisify(execFile);
const dataDir = mkdtempSync(join(tmpdir(), 'formwork-cli-'));
let database: { url: string; drop(): Promise<void> } | undefined;

function commandEnv(env: Record<string, string>): Record<string, string | undefined> {
  return {
    PATH: process.env.PATH,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    ...(database ? { DATABASE_URL: database.url } : {}),
    ...env,
  };
}

/** The command run in this process: what it writes and the exit code it answers. */
async function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCommand(args, commandEnv(env), {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  });
  return { code, stdout, stderr };
}

/** The command as a process of its own, for what only a process shows: its exit code and streams. */
async function spawnCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, cliArgs(...args), {
      env: commandEnv(env),
    });
    return { code: 0, stdout, stderr };
  } catch (error: any) {
    return { code: error.code, stdout: error.stdout, stderr: error.stderr };
  }
}

describe(`formwork command (${dialectName})`, () => {
  before(async () => {
    if (TEST_PG_URL) database = await createPgDatabase();
  });
  after(async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  it('creates an account, its owner and a token, and another token for the user', async () => {
    // As a process of its own once: what is printed reaches stdout, and the exit code is 0.
    const created = await spawnCli([
      'admin',
      'create-account',
      '--name',
      'Acme',
      '--email',
      'Owner@Example.com',
      '--password',
      'correct horse',
      '--json',
    ]);
    assert.equal(created.code, 0, created.stderr);
    const account = JSON.parse(created.stdout);
    assert.deepEqual(Object.keys(account).sort(), ['accountId', 'token', 'userId']);
    assert.match(account.token, /^fw_pat_[A-Za-z0-9_-]{43}$/);

    const token = await cli(['admin', 'create-token', '--user', String(account.userId), '--json']);
    assert.equal(token.code, 0, token.stderr);
    const second = JSON.parse(token.stdout);
    assert.equal(second.userId, account.userId);
    assert.notEqual(second.token, account.token);

    // Only hashes are stored: the database holds neither token nor the password.
    const secrets = [account.token.slice(7), second.token.slice(7), 'correct horse'];
    let stored: string;
    if (database) {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      const rows = await client.query('SELECT u.*, t.* FROM users u JOIN access_tokens t ON t.user_id = u.id');
      await client.end();
      stored = JSON.stringify(rows.rows);
      assert.equal(rows.rows.length, 2);
    } else {
      stored = readFileSync(join(dataDir, 'formwork.db')).toString('latin1');
    }
    for (const secret of secrets) assert.ok(!stored.includes(secret), 'no secret in the database');
  });

  it('adds users, sets their form levels and registers OAuth clients', async () => {
    const owner = JSON.parse(
      (await cli(['admin', 'create-account', '--name', 'Cli Co', '--email', 'cli-owner@example.com', '--json'])).stdout,
    );
    const user = await cli([
      'admin',
      'create-user',
      '--account',
      String(owner.accountId),
      '--email',
      'Member@Example.com',
      '--name',
      'Mem',
      '--role',
      'member',
      '--password',
      'long enough',
      '--json',
    ]);
    assert.equal(user.code, 0, user.stderr);
    const member = JSON.parse(user.stdout);
    assert.equal(member.email, 'member@example.com');
    assert.equal(member.role, 'member');
    assert.equal(member.canSignIn, true);

    const client = await cli([
      'admin',
      'create-client',
      '--account',
      String(owner.accountId),
      '--name',
      'Sync',
      '--redirect-uri',
      'https://app.example.com/cb',
      '--redirect-uri',
      'http://localhost:3000/cb',
      '--json',
    ]);
    assert.equal(client.code, 0, client.stderr);
    const created = JSON.parse(client.stdout);
    assert.match(created.clientId, /^fwc_/);
    assert.match(created.clientSecret, /^fw_cs_[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(created.redirectUris, ['https://app.example.com/cb', 'http://localhost:3000/cb']);
    assert.equal(created.requirePkce, true, 'PKCE is required unless --no-pkce');
    const lax = await cli([
      'admin',
      'create-client',
      '--account',
      String(owner.accountId),
      '--name',
      'Legacy',
      '--redirect-uri',
      'https://legacy.example.com/cb',
      '--no-pkce',
      '--json',
    ]);
    assert.equal(lax.code, 0, lax.stderr);
    assert.equal(JSON.parse(lax.stdout).requirePkce, false);

    // A form of the account, made through the API of a server on the same database.
    const app = await startTestApp(database ? { DATABASE_URL: database.url } : { DATA_DIR: dataDir });
    try {
      const form = await app.request('POST', '/api/v2025/forms', { token: owner.token, body: { name: 'Cli form' } });
      const set = await cli([
        'admin',
        'set-permission',
        '--user',
        String(member.id),
        '--form',
        String(form.body.id),
        '--level',
        'edit',
        '--json',
      ]);
      assert.equal(set.code, 0, set.stderr);
      assert.deepEqual(
        { ...JSON.parse(set.stdout), updated: undefined },
        { userId: member.id, formId: form.body.id, level: 'edit', updated: undefined },
      );
      const listed = await app.request('GET', `/api/v2025/users/${member.id}/permissions`, { token: owner.token });
      assert.equal(listed.body.permissions[0].level, 'edit');
      const removed = await cli([
        'admin',
        'set-permission',
        '--user',
        String(member.id),
        '--form',
        String(form.body.id),
        '--level',
        'none',
        '--json',
      ]);
      assert.equal(removed.code, 0, removed.stderr);
      assert.deepEqual(
        (await app.request('GET', `/api/v2025/users/${member.id}/permissions`, { token: owner.token })).body
          .permissions,
        [],
      );
    } finally {
      await app.close();
    }

    assert.match(
      (
        await cli([
          'admin',
          'create-user',
          '--account',
          '999999',
          '--email',
          'x@example.com',
          '--name',
          'X',
          '--role',
          'member',
        ])
      ).stderr,
      /Account not found/,
    );
    assert.match(
      (
        await cli([
          'admin',
          'create-user',
          '--account',
          String(owner.accountId),
          '--email',
          'y@example.com',
          '--name',
          'Y',
          '--role',
          'owner',
        ])
      ).stderr,
      /--role admin or --role member/,
    );
    assert.match(
      (
        await cli([
          'admin',
          'create-client',
          '--account',
          String(owner.accountId),
          '--name',
          'Bad',
          '--redirect-uri',
          'http://example.com/cb',
        ])
      ).stderr,
      /https/,
    );
    assert.match(
      (await cli(['admin', 'create-client', '--account', String(owner.accountId), '--name', 'None'])).stderr,
      /--redirect-uri/,
    );
    assert.match(
      (await cli(['admin', 'set-permission', '--user', String(member.id), '--form', '1', '--level', 'god'])).stderr,
      /--level/,
    );
  });

  it('makes tokens with scopes and an expiry, lists them without values, and revokes them by id or by value', async () => {
    const owner = JSON.parse(
      (await cli(['admin', 'create-account', '--name', 'Tokens Co', '--email', 'tokens-owner@example.com', '--json']))
        .stdout,
    );
    const made = await cli([
      'admin',
      'create-token',
      '--user',
      String(owner.userId),
      '--name',
      'ci',
      '--scope',
      'submissions:read',
      '--scope',
      'forms:read',
      '--expires-in-days',
      '7',
      '--json',
    ]);
    assert.equal(made.code, 0, made.stderr);
    const ci = JSON.parse(made.stdout);
    assert.deepEqual(Object.keys(ci).sort(), ['expiresAt', 'name', 'prefix', 'scopes', 'token', 'tokenId', 'userId']);
    assert.deepEqual(ci.scopes, ['forms:read', 'submissions:read']);
    assert.equal(ci.prefix, ci.token.slice(0, 11));
    const days = (Date.parse(ci.expiresAt) - Date.now()) / 86_400_000;
    assert.ok(days > 6.9 && days <= 7, `expires in ${days} days`);

    const listed = await cli(['admin', 'list-tokens', '--user', String(owner.userId), '--json']);
    assert.equal(listed.code, 0, listed.stderr);
    const { tokens } = JSON.parse(listed.stdout);
    assert.deepEqual(
      tokens.map((t: any) => t.name),
      ['initial', 'ci'],
    );
    assert.ok(
      !listed.stdout.includes(ci.token.slice(11)) && !listed.stdout.includes(owner.token.slice(11)),
      'no token value listed',
    );
    const table = await cli(['admin', 'list-tokens', '--user', String(owner.userId)]);
    assert.match(table.stdout, new RegExp(`^${ci.tokenId}\\t${ci.prefix}\\tci\\tforms:read submissions:read\\t`, 'm'));

    // Both tokens work until revoked; then the API refuses them.
    const app = await startTestApp({ DATA_DIR: dataDir, ...(database ? { DATABASE_URL: database.url } : {}) });
    try {
      const status = async (token: string) => (await app.request('GET', '/api/v2025/forms', { token })).status;
      assert.equal(await status(ci.token), 200);
      assert.equal(await status(owner.token), 200);
      const byId = await cli(['admin', 'revoke-token', '--token-id', String(ci.tokenId), '--json']);
      assert.equal(byId.code, 0, byId.stderr);
      assert.deepEqual(JSON.parse(byId.stdout), {
        tokenId: ci.tokenId,
        userId: owner.userId,
        kind: 'pat',
        revoked: true,
      });
      assert.equal(await status(ci.token), 401);
      const byValue = await cli(['admin', 'revoke-token', '--token', owner.token, '--json']);
      assert.equal(byValue.code, 0, byValue.stderr);
      assert.equal(await status(owner.token), 401);
    } finally {
      await app.close();
    }
    assert.deepEqual(
      JSON.parse((await cli(['admin', 'list-tokens', '--user', String(owner.userId), '--json'])).stdout).tokens,
      [],
    );

    assert.match(
      (await cli(['admin', 'revoke-token', '--token-id', String(ci.tokenId)])).stderr,
      /^formwork: Token not found\n$/,
    );
    assert.match((await cli(['admin', 'revoke-token'])).stderr, /--token-id or --token/);
    assert.match((await cli(['admin', 'list-tokens', '--user', '999999'])).stderr, /User not found/);
    assert.match(
      (await cli(['admin', 'create-token', '--user', String(owner.userId), '--scope', 'everything'])).stderr,
      /unknown scope everything/,
    );
    assert.match(
      (await cli(['admin', 'create-token', '--user', String(owner.userId), '--expires-in-days', 'soon'])).stderr,
      /--expires-in-days/,
    );
    assert.match(
      (await cli(['admin', 'create-token', '--user', String(owner.userId), '--expires-in-days', '0'])).stderr,
      /expiresInDays/,
    );
  });

  it('refuses bad admin input with one clear line', async () => {
    // Emails are unique per account: the owner of one account may own another, but an account
    // cannot have two users with one email.
    const again = await cli(['admin', 'create-account', '--name', 'Again', '--email', 'owner@example.com', '--json']);
    assert.equal(again.code, 0, again.stderr);
    const { accountId } = JSON.parse(again.stdout) as { accountId: number };
    const dup = await cli([
      'admin',
      'create-user',
      '--account',
      String(accountId),
      '--email',
      'Owner@example.com',
      '--name',
      'Twin',
      '--role',
      'member',
      '--json',
    ]);
    assert.equal(dup.code, 1);
    assert.match(dup.stderr, /^formwork: .*already has this email/m);
    assert.equal((await cli(['admin', 'create-account', '--name', 'x'])).code, 1);
    assert.match((await cli(['admin', 'create-token', '--user', '999999'])).stderr, /User not found/);
    assert.match((await cli(['admin', 'create-token', '--user', 'abc'])).stderr, /--user/);
    const unknown = await spawnCli(['frobnicate']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^formwork: unknown command "frobnicate"/);
    assert.match((await cli(['admin', 'create-account', '--colour', 'red'])).stderr, /colour/);
  });

  it('names the bad setting', () => {
    for (const [env, name] of [
      [{ PORT: 'eighty' }, 'PORT'],
      [{ PORT: '70000' }, 'PORT'],
      [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
      [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
      [{ SECRET_KEY: 'short' }, 'SECRET_KEY'],
      [{ PUBLIC_URL: 'not a url' }, 'PUBLIC_URL'],
      [{ BODY_LIMIT: '10' }, 'BODY_LIMIT'],
      [{ TRUST_PROXY: 'maybe; drop table' }, 'TRUST_PROXY'],
      [{ SMTP_URL: 'https://mail.example.com' }, 'SMTP_URL'],
      [{ MAIL_FROM: 'nobody' }, 'MAIL_FROM'],
      [{ MAIL_FROM: 'Desk <two@a.com, three@b.com>' }, 'MAIL_FROM'],
      [{ MAIL_ATTACHMENT_MAX_BYTES: 'lots' }, 'MAIL_ATTACHMENT_MAX_BYTES'],
    ] as const) {
      assert.throws(
        () => loadConfig(env),
        (e: unknown) => e instanceof ConfigError && e.setting === name,
        name,
      );
    }
  });

  it('reads the mail settings', () => {
    const defaults = loadConfig({ PUBLIC_URL: 'https://forms.example.org' });
    assert.equal(defaults.smtpUrl, undefined);
    assert.deepEqual(defaults.mailFrom, { name: 'Formwork', address: 'formwork@forms.example.org' });
    assert.equal(defaults.mailAttachmentMaxBytes, 10 * 1024 * 1024);
    const set = loadConfig({
      SMTP_URL: 'smtps://user:p%40ss@mail.example.com:465',
      MAIL_FROM: '"Forms Desk" <desk@example.org>',
      MAIL_ATTACHMENT_MAX_BYTES: '0',
    });
    assert.equal(set.smtpUrl, 'smtps://user:p%40ss@mail.example.com:465');
    assert.deepEqual(set.mailFrom, { name: 'Forms Desk', address: 'desk@example.org' });
    assert.equal(set.mailAttachmentMaxBytes, 0);
    assert.deepEqual(loadConfig({ MAIL_FROM: 'desk@example.org' }).mailFrom, {
      name: undefined,
      address: 'desk@example.org',
    });
  });

  it('stops on a bad setting with one line naming it', async () => {
    const res = await spawnCli(['serve'], { PORT: 'eighty' });
    assert.equal(res.code, 1);
    assert.equal(res.stderr, 'formwork: configuration error: PORT: must be a whole number, got "eighty"\n');
  });

  it('reads settings with their defaults', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.databaseUrl, undefined);
    assert.match(config.dataDir, /\/data$/);
    assert.equal(config.publicUrl, 'http://localhost:8080');
    assert.equal(loadConfig({ PUBLIC_URL: 'https://forms.example.com/' }).publicUrl, 'https://forms.example.com');
  });

  it('migrates an empty database and says so the second time', async () => {
    const fresh = TEST_PG_URL ? await createPgDatabase() : undefined;
    const env: Record<string, string> = fresh
      ? { DATABASE_URL: fresh.url }
      : { DATA_DIR: mkdtempSync(join(tmpdir(), 'formwork-migrate-')) };
    try {
      const first = await cli(['migrate'], env);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /applied: 0001_foundation/);
      assert.match((await cli(['migrate'], env)).stdout, /schema is up to date/);
    } finally {
      await fresh?.drop();
      if (env.DATA_DIR) rmSync(env.DATA_DIR, { recursive: true, force: true });
    }
  });
});

describe(`access tokens (${dialectName})`, () => {
  it('accepts a live token and answers missing, malformed and unknown ones with 401', async () => {
    const app = await startTestApp();
    try {
      const a = await app.account();
      assert.equal((await a.get('/forms')).status, 200);
      for (const [authorization, code] of [
        [undefined, 'token_missing'],
        ['Bearer', 'token_malformed'],
        [`Basic ${Buffer.from('a:b').toString('base64')}`, 'token_malformed'],
        [`Bearer ${a.token} extra`, 'token_malformed'],
        [`Bearer fw_pat_${'A'.repeat(43)}`, 'token_invalid'],
      ] as const) {
        const res = await app.request('GET', '/api/v2025/forms', { headers: authorization ? { authorization } : {} });
        assert.equal(res.status, 401, String(authorization));
        assert.deepEqual(Object.keys(res.body).sort(), ['code', 'error', 'status']);
        assert.equal(res.body.code, code);
      }
    } finally {
      await app.close();
    }
  });
});
