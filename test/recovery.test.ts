import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jobKinds } from '../src/job-kinds.js';
import { enqueue } from '../src/jobs/outbox.js';
import { createWorker } from '../src/jobs/worker.js';
import { sweepUploadsJob } from '../src/modules/uploads/jobs.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { cliArgs } from './support/node-entry.js';

// Processes killed with SIGKILL in the middle of work they hold, and what the processes that
// remain (or the one that restarts) make of it: an Idempotency-Key's first request, an upload.

const SECRET_KEY = randomBytes(32).toString('hex');
/**
 * An hour: no heartbeat goes stale during a test, so whatever notices a killed process here
 * is its lock, released by its end.
 */
const PROCESS_TIMEOUT_SECONDS = '3600';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  limitMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function ok(res: Promise<{ status: number; text: string; body: any }>, what: string): Promise<any> {
  const r = await res;
  assert.equal(r.status, 200, `${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.body;
}

interface Serve {
  process: ChildProcess;
  /** Resolves with the base URL once the server listens. */
  listening: Promise<string>;
  exited: Promise<NodeJS.Signals | number | null>;
  kill(): Promise<NodeJS.Signals | number | null>;
}

/**
 * S3 that takes requests and answers none until release(): storage that hangs, so a request
 * that writes a file waits there, holding whatever it holds.
 */
async function startHangingS3() {
  const held: ServerResponse[] = [];
  let released = false;
  let onRequest: (() => void) | undefined;
  const answer = (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'POST' && (req.url ?? '').includes('delete')) {
      res.writeHead(200, { 'content-type': 'application/xml' });
      res.end(
        '<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></DeleteResult>',
      );
    } else {
      res.writeHead(200, { etag: '"0"', 'content-length': '0' });
      res.end();
    }
  };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (released) return answer(req, res);
      held.push(Object.assign(res, { request: req }));
      onRequest?.();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    env: {
      STORAGE_DRIVER: 's3',
      S3_BUCKET: 'formwork-test',
      S3_ENDPOINT: `http://127.0.0.1:${port}`,
      S3_ACCESS_KEY_ID: 'test',
      S3_SECRET_ACCESS_KEY: 'test',
      S3_FORCE_PATH_STYLE: 'true',
    },
    /** Resolves once a request is being held. */
    requested: () => new Promise<void>((resolve) => (held.length > 0 ? resolve() : (onRequest = resolve))),
    release() {
      released = true;
      for (const res of held.splice(0)) answer((res as ServerResponse & { request: IncomingMessage }).request, res);
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A PUT whose body comes in two goes: some bytes now, the rest (or nothing: the client is gone) later. */
function slowPut(url: string, total: number, first: Buffer) {
  let settle!: (value: { status: number; body: any } | Error) => void;
  const done = new Promise<{ status: number; body: any } | Error>((resolve) => (settle = resolve));
  const req = httpRequest(
    url,
    { method: 'PUT', headers: { 'content-length': String(total), 'content-type': 'application/octet-stream' } },
    (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        settle({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }),
      );
      res.on('error', settle);
    },
  );
  req.on('error', settle);
  req.write(first);
  return {
    done,
    finish(rest: Buffer) {
      req.end(rest);
      return done;
    },
  };
}

describe(`recovery after a process is killed (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  const children: Serve[] = [];

  before(async () => {
    app = await startTestApp({
      SECRET_KEY,
      PROCESS_TIMEOUT_SECONDS,
      // The live upload of the service-upload tests waits, stalled, while processes are started
      // and killed beside it; on a loaded CI machine that took a minute, past the default rate
      // floor (1 KiB a second over each 30 s), which cut it. Those tests are about a process's
      // temporary files, not about the rate floor (test/timeouts covers that).
      REQUEST_TIMEOUT_MS: '600000',
      UPLOAD_MIN_BYTES_PER_SECOND: '1',
    });
    a = await app.account();
  });
  after(async () => {
    for (const child of children) child.process.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await app.close();
  });

  /** `formwork serve` in a process of its own, on the test app's database and DATA_DIR. */
  function serve(env: Record<string, string> = {}): Serve {
    const child = spawn(process.execPath, cliArgs('serve', '--no-worker'), {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: app.config.dataDir,
        ...(app.config.databaseUrl ? { DATABASE_URL: app.config.databaseUrl } : {}),
        SECRET_KEY,
        PROCESS_TIMEOUT_SECONDS,
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.once('exit', (code, signal) => resolve(signal ?? code)),
    );
    const listening = new Promise<string>((resolve, reject) => {
      const look = (chunk: Buffer) => {
        output += chunk.toString();
        const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (m) resolve(m[1]!);
      };
      child.stdout.on('data', look);
      child.stderr.on('data', look);
      void exited.then((how) => reject(new Error(`formwork serve ended (${String(how)}) before listening: ${output}`)));
    });
    listening.catch(() => undefined);
    const handle: Serve = {
      process: child,
      listening,
      exited,
      kill() {
        child.kill('SIGKILL');
        return exited;
      },
    };
    children.push(handle);
    return handle;
  }

  const countSubmissions = async (formId: number) =>
    (await app.server.db.kysely.selectFrom('submissions').select('id').where('form_id', '=', formId).execute()).length;

  describe('Idempotency-Key', () => {
    let form: any;
    const path = () => `/api/v2025/forms/${form.id}/submissions`;
    /** A submission with an inline file: the file goes to storage after the key is claimed. */
    const body = () => ({
      fields: [
        {
          id: form.fields[0].id,
          value: {
            subvalues: [{ subvalue: { filename: 'a.txt', content: Buffer.from('kept once').toString('base64') } }],
          },
        },
      ],
    });
    const post = (base: string, key: string) =>
      fetch(`${base}${path()}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(body()),
      });

    before(async () => {
      form = await ok(a.post('/forms', { name: 'Crashing', fields: [{ type: 'file', label: 'File' }] }), 'form');
    });

    it('answers 409 with Retry-After while the first request runs, and lets a retry take over at once once its process is killed', async () => {
      const s3 = await startHangingS3();
      try {
        const first = serve(s3.env);
        const firstUrl = await first.listening;
        const hanging = post(firstUrl, 'crash-1').catch(() => undefined);
        // The first request has claimed the key and waits for storage.
        await s3.requested();

        const busy = await a.post(`/forms/${form.id}/submissions`, body(), {
          headers: { 'idempotency-key': 'crash-1' },
        });
        assert.equal(busy.status, 409, busy.text);
        assert.equal(busy.body.code, 'idempotency_in_progress');
        assert.equal(busy.headers.get('retry-after'), '1');

        assert.equal(await first.kill(), 'SIGKILL');
        await hanging;
        // The process restarts (with storage that works) and the client retries with the same key.
        const restarted = serve();
        const retried = await post(await restarted.listening, 'crash-1');
        const created = await retried.json();
        assert.equal(retried.status, 200, JSON.stringify(created));
        assert.equal(retried.headers.get('idempotent-replayed'), null);

        const replay = await a.post(`/forms/${form.id}/submissions`, body(), {
          headers: { 'idempotency-key': 'crash-1' },
        });
        assert.equal(replay.status, 200);
        assert.equal(replay.headers.get('idempotent-replayed'), 'true');
        assert.deepEqual(replay.body, created);
        assert.equal(await countSubmissions(form.id), 1);
        await restarted.kill();
      } finally {
        await s3.close();
      }
    });

    it('fails the first request, keeping nothing of it, if a retry took its key over while it still ran', async () => {
      const s3 = await startHangingS3();
      const before = await countSubmissions(form.id);
      try {
        const first = serve(s3.env);
        const firstUrl = await first.listening;
        const firstReply = post(firstUrl, 'crash-2');
        await s3.requested();
        // The first process is judged stopped (its heartbeat as if it had gone silent long
        // ago) though it runs: a retry takes its key over.
        const db = app.server.db.kysely;
        const owner = await db
          .selectFrom('processes')
          .select('id')
          .where('pid', '=', first.process.pid!)
          .executeTakeFirstOrThrow();
        await db.updateTable('processes').set({ heartbeat_at: 0 }).where('id', '=', owner.id).execute();
        const taken = await a.post(`/forms/${form.id}/submissions`, body(), {
          headers: { 'idempotency-key': 'crash-2' },
        });
        assert.equal(taken.status, 200, taken.text);
        assert.equal(taken.headers.get('idempotent-replayed'), null);

        // Storage answers at last: the first request's write must not land as a second submission.
        s3.release();
        const late = await firstReply;
        assert.equal(late.status, 409);
        assert.equal(((await late.json()) as { code: string }).code, 'idempotency_in_progress');
        assert.equal(await countSubmissions(form.id), before + 1);
        const replay = await a.post(`/forms/${form.id}/submissions`, body(), {
          headers: { 'idempotency-key': 'crash-2' },
        });
        assert.equal(replay.headers.get('idempotent-replayed'), 'true');
        assert.deepEqual(replay.body, taken.body);
        await first.kill();
      } finally {
        await s3.close();
      }
    });
  });

  describe('service uploads (local storage)', () => {
    let form: any;
    const tmpDir = () => join(app.config.dataDir, 'files', '.tmp');
    const parts = () =>
      existsSync(tmpDir())
        ? readdirSync(tmpDir())
            .filter((n) => n.endsWith('.part'))
            .sort()
        : [];
    const stateOf = async (fileKey: string) =>
      (
        await app.server.db.kysely
          .selectFrom('uploads')
          .select('state')
          .where('file_key', '=', fileKey)
          .executeTakeFirstOrThrow()
      ).state;
    const at = (base: string, uploadUrl: string) => `${base}${uploadUrl.slice(app.config.publicUrl.length)}`;
    const FILE = randomBytes(300_000);

    async function issue(): Promise<{ fileKey: string; uploadUrl: string }> {
      const res = await ok(
        a.post(`/forms/${form.id}/fields/${form.fields[0].id}/upload-urls`, { filenames: ['big.bin'] }),
        'upload-urls',
      );
      return res.uploads[0];
    }

    /** A process of its own that is killed while it receives an upload: what it leaves behind. */
    async function killMidUpload(upload: { fileKey: string; uploadUrl: string }): Promise<string> {
      const known = parts();
      const first = serve();
      const broken = slowPut(at(await first.listening, upload.uploadUrl), FILE.length, FILE.subarray(0, 64 * 1024));
      const part = await waitFor('the upload to be under way', async () => {
        const fresh = parts().filter((p) => !known.includes(p));
        return fresh.length === 1 && (await stateOf(upload.fileKey)) === 'receiving' && fresh[0];
      });
      // Genuinely under way: a second PUT is refused.
      const again = await fetch(at(app.url, upload.uploadUrl), { method: 'PUT', body: Buffer.from('x') });
      assert.equal(again.status, 409);
      assert.equal(((await again.json()) as { code: string }).code, 'upload_url_used');
      assert.equal(await first.kill(), 'SIGKILL');
      assert.ok((await broken.done) instanceof Error, 'the killed process never answered');
      assert.ok(parts().includes(part), 'the killed process left its temporary file');
      return part;
    }

    before(async () => {
      form = await ok(
        a.post('/forms', {
          name: 'Uploads',
          fields: [{ type: 'file', label: 'File', attributes: { maxFileSize: 1_000_000 } }],
        }),
        'form',
      );
    });

    it("removes the temporary file of a process killed mid-upload when a process starts, leaves a live one's, and takes the upload again", async () => {
      const upload = await issue();
      // Another process (the test app) is receiving an upload of its own meanwhile.
      const other = await issue();
      const live = slowPut(at(app.url, other.uploadUrl), FILE.length, FILE.subarray(0, 64 * 1024));
      const livePart = await waitFor(
        'the live upload to be under way',
        async () => (await stateOf(other.fileKey)) === 'receiving' && parts().length === 1 && parts()[0],
      );

      const dead = await killMidUpload(upload);
      const restarted = serve();
      const base = await restarted.listening;
      assert.deepEqual(parts(), [livePart], "the dead process's temporary file is gone; the live one's stays");

      const res = await fetch(at(base, upload.uploadUrl), { method: 'PUT', body: FILE });
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(await res.json(), { fileKey: upload.fileKey, size: FILE.length });
      assert.ok(!parts().includes(dead));

      const created = await ok(
        a.post(`/forms/${form.id}/submissions`, {
          fields: [{ id: form.fields[0].id, value: { subvalues: [{ subvalue: upload.fileKey }] } }],
        }),
        'submit',
      );
      const download = await fetch(
        `${app.url}/api/v2025/submissions/${created.id}/upload?fieldId=${form.fields[0].id}`,
        { headers: { authorization: `Bearer ${a.token}` } },
      );
      assert.ok(Buffer.from(await download.arrayBuffer()).equals(FILE), 'the file as uploaded the second time');

      const finished = await live.finish(FILE.subarray(64 * 1024));
      assert.ok(!(finished instanceof Error), String(finished));
      assert.equal(finished.status, 200, JSON.stringify(finished.body));
      assert.deepEqual(parts(), []);
      await restarted.kill();
    });

    it('has the upload sweep remove the temporary file of a process killed mid-upload, and the URL takes the upload at once', async () => {
      const upload = await issue();
      const dead = await killMidUpload(upload);
      await enqueue(app.server.ctx.db, sweepUploadsJob, {});
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      assert.ok(!parts().includes(dead), 'the sweep removed it');

      const res = await fetch(at(app.url, upload.uploadUrl), { method: 'PUT', body: FILE });
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(await stateOf(upload.fileKey), 'stored');
    });
  });
});

describe(`which processes have stopped (${dialectName})`, () => {
  it('a process stops being alive when it closes, when its lock is free or when its heartbeat is older than the timeout', async () => {
    const app = await startTestApp({ PROCESS_TIMEOUT_SECONDS: '60' });
    // Its own heartbeat is ten minutes away: the test sets its row as it likes.
    const other = await startTestApp({ PROCESS_TIMEOUT_SECONDS: '3600' }, app);
    try {
      const { presence, db } = app.server.ctx;
      const otherId = other.server.ctx.presence.id;
      assert.deepEqual([...(await presence.stopped([presence.id, otherId]))], [], 'itself and a running process');

      // A row with a fresh heartbeat but no lock held: a process that died before anyone removed its row.
      const [ghost] = await db
        .insertInto('processes')
        .values({ host: 'gone', pid: 1, started_at: 0, heartbeat_at: Date.now() })
        .returning('id')
        .execute();
      assert.deepEqual([...(await presence.stopped([ghost!.id, otherId]))], [ghost!.id]);
      // A lock still held, but no heartbeat for longer than the timeout: a machine cut off.
      await db.updateTable('processes').set({ heartbeat_at: 0 }).where('id', '=', otherId).execute();
      assert.deepEqual([...(await presence.stopped([otherId]))], [otherId]);
      await presence.reap();
      assert.equal(
        (await db.selectFrom('processes').select('id').where('id', 'in', [ghost!.id, otherId]).execute()).length,
        1,
        'the stale row is reaped, the ghost waits for its timeout',
      );
    } finally {
      await other.close();
      await app.close();
    }
  });

  it('a closed process is stopped, and a process never counts itself', async () => {
    const app = await startTestApp();
    const other = await startTestApp({}, app);
    const otherId = other.server.ctx.presence.id;
    await other.close();
    try {
      assert.deepEqual([...(await app.server.ctx.presence.stopped([otherId, app.server.ctx.presence.id]))], [otherId]);
    } finally {
      await app.close();
    }
  });
});
