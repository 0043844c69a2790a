import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.js';
import { createStorage, ObjectNotFoundError, ObjectTooLargeError, type Storage } from '../src/storage/index.js';
import { filesUnder } from './support/disk.js';
import { startS3, type TestS3 } from './support/s3.js';

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A stream of n bytes in 64 KiB chunks, made as it is read (no length known up front). */
function bytes(n: number, seed = 1): Readable {
  const chunk = Buffer.alloc(64 * 1024, seed);
  let left = n;
  return new Readable({
    read() {
      if (left <= 0) return void this.push(null);
      const part = chunk.subarray(0, Math.min(chunk.length, left));
      left -= part.length;
      this.push(part);
    },
  });
}

for (const driver of ['local', 's3'] as const) {
  describe(`storage driver: ${driver}`, () => {
    let s3: TestS3 | undefined;
    let dataDir: string;
    let storage: Storage;
    const listed = () => (s3 ? s3.objectKeys() : filesUnder(join(dataDir, 'files')));

    before(async () => {
      dataDir = mkdtempSync(join(tmpdir(), 'formwork-storage-'));
      if (driver === 's3') s3 = await startS3();
      storage = createStorage(loadConfig({ DATA_DIR: dataDir, ...s3?.env }));
      assert.equal(storage.driver, driver);
    });
    after(async () => {
      await storage?.close();
      await s3?.close();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('puts, heads, reads whole and in ranges, and deletes idempotently', async () => {
      const data = randomBytes(100_000);
      assert.deepEqual(await storage.put('a1/f1/one', Readable.from([data]), { maxBytes: data.length }), {
        size: data.length,
      });
      assert.deepEqual(await storage.head('a1/f1/one'), { size: data.length });
      const whole = await storage.get('a1/f1/one');
      assert.equal(whole.size, data.length);
      assert.ok((await readAll(whole.stream)).equals(data));
      const part = await storage.get('a1/f1/one', { start: 0, end: 7 });
      assert.ok((await readAll(part.stream)).equals(data.subarray(0, 8)));
      assert.deepEqual(listed(), ['a1/f1/one']);
      await storage.deleteMany(['a1/f1/one', 'a1/f1/never']);
      await storage.deleteMany(['a1/f1/one']);
      assert.equal(await storage.head('a1/f1/one'), undefined);
      await assert.rejects(storage.get('a1/f1/one'), ObjectNotFoundError);
      assert.deepEqual(listed(), []);
    });

    it('refuses a stream over the limit with ObjectTooLargeError and keeps nothing, also past one multipart part', async () => {
      await assert.rejects(storage.put('a1/f1/small', bytes(2000), { maxBytes: 1999 }), ObjectTooLargeError);
      // 7 MiB against a 6 MiB limit: on S3 the first 5 MiB part is already up when the limit trips.
      await assert.rejects(
        storage.put('a1/f1/large', bytes(7 * 1024 * 1024), { maxBytes: 6 * 1024 * 1024 }),
        ObjectTooLargeError,
      );
      assert.equal(await storage.head('a1/f1/small'), undefined);
      assert.equal(await storage.head('a1/f1/large'), undefined);
      // Local: no file, temporary ones included. S3: no object (the driver aborts the multipart
      // upload; s3rver does not implement AbortMultipartUpload, so its parts are not checked here).
      assert.deepEqual(listed(), [], 'nothing kept');
      // Exactly at the limit is fine, and a multipart object reads back whole.
      assert.deepEqual(await storage.put('a1/f1/large', bytes(6 * 1024 * 1024, 7), { maxBytes: 6 * 1024 * 1024 }), {
        size: 6 * 1024 * 1024,
      });
      const back = await readAll((await storage.get('a1/f1/large')).stream);
      assert.equal(back.length, 6 * 1024 * 1024);
      assert.ok(back.every((b) => b === 7));
      await storage.deleteMany(['a1/f1/large']);
    });

    it('keeps nothing of a stream that fails midway', async () => {
      let sent = 0;
      const broken = new Readable({
        read() {
          if (sent++ < 3) this.push(Buffer.alloc(64 * 1024));
          else this.destroy(new Error('client went away'));
        },
      });
      await assert.rejects(storage.put('a1/f1/broken', broken, { maxBytes: 10 * 1024 * 1024 }));
      assert.deepEqual(listed(), []);
    });

    it('copies an object whole, which later writes to its source do not reach', async () => {
      const data = randomBytes(70_000);
      await storage.put('a1/f1/source', Readable.from([data]), { maxBytes: data.length });
      assert.deepEqual(await storage.copy('a1/f1/source', 'a1/f1/source-kept'), { size: data.length });
      await storage.put('a1/f1/source', Readable.from([Buffer.from('other')]), { maxBytes: 10 });
      assert.ok((await readAll((await storage.get('a1/f1/source-kept')).stream)).equals(data));
      await assert.rejects(storage.copy('a1/f1/missing', 'a1/f1/missing-kept'), ObjectNotFoundError);
      assert.deepEqual(
        listed(),
        ['a1/f1/source', 'a1/f1/source-kept'],
        'no copy of a missing object, nothing temporary',
      );
      await storage.deleteMany(['a1/f1/source', 'a1/f1/source-kept']);
    });

    it("refuses keys that could escape or are not the service's own", async () => {
      for (const key of ['../x', 'a/../../x', '/abs', 'a//b', 'a/./b', '', 'a b', 'a\\b', '%2e%2e']) {
        await assert.rejects(
          storage.put(key, Readable.from([Buffer.from('x')]), { maxBytes: 10 }),
          /Invalid storage key/,
          key,
        );
        await assert.rejects(storage.get(key), /Invalid storage key/, key);
        await assert.rejects(storage.copy(key, 'a1/f1/x'), /Invalid storage key/, key);
        await assert.rejects(storage.copy('a1/f1/x', key), /Invalid storage key/, key);
      }
      assert.deepEqual(listed(), []);
    });

    if (driver === 's3') {
      it('signs a PUT URL that the bucket takes', async () => {
        const url = await storage.presignPut!('a1/f1/signed', 60);
        const res = await fetch(url, { method: 'PUT', body: Buffer.from('signed bytes') });
        assert.equal(res.status, 200);
        assert.equal((await readAll((await storage.get('a1/f1/signed')).stream)).toString(), 'signed bytes');
        await storage.deleteMany(['a1/f1/signed']);
      });
    } else {
      it('has no presigned URLs (the service signs its own)', () => assert.equal(storage.presignPut, undefined));
    }
  });
}

describe('storage settings', () => {
  it('defaults to local disk and reads the S3 settings', () => {
    assert.deepEqual(loadConfig({}).storage, { driver: 'local' });
    assert.deepEqual(
      loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'forms-files', S3_ACCESS_KEY_ID: 'k', S3_SECRET_ACCESS_KEY: 's' })
        .storage,
      {
        driver: 's3',
        s3: {
          bucket: 'forms-files',
          endpoint: undefined,
          region: 'us-east-1',
          accessKeyId: 'k',
          secretAccessKey: 's',
          forcePathStyle: false,
        },
      },
    );
    const compatible = loadConfig({
      STORAGE_DRIVER: 's3',
      S3_BUCKET: 'files',
      S3_ENDPOINT: 'http://127.0.0.1:9000/',
      S3_REGION: 'eu-west-1',
    }).storage;
    assert.deepEqual(
      compatible.driver === 's3' && [compatible.s3.endpoint, compatible.s3.region, compatible.s3.forcePathStyle],
      ['http://127.0.0.1:9000', 'eu-west-1', true],
    );
  });

  it('stops on a bad storage setting, naming it', () => {
    for (const [env, name] of [
      [{ STORAGE_DRIVER: 'ftp' }, 'STORAGE_DRIVER'],
      [{ STORAGE_DRIVER: 's3' }, 'S3_BUCKET'],
      [{ STORAGE_DRIVER: 's3', S3_BUCKET: 'Bad_Bucket' }, 'S3_BUCKET'],
      [{ STORAGE_DRIVER: 's3', S3_BUCKET: 'files', S3_ENDPOINT: 'ftp://x' }, 'S3_ENDPOINT'],
      [{ STORAGE_DRIVER: 's3', S3_BUCKET: 'files', S3_ACCESS_KEY_ID: 'only-the-id' }, 'S3_SECRET_ACCESS_KEY'],
      [{ STORAGE_DRIVER: 's3', S3_BUCKET: 'files', S3_SECRET_ACCESS_KEY: 'only-the-secret' }, 'S3_ACCESS_KEY_ID'],
      [{ STORAGE_DRIVER: 's3', S3_BUCKET: 'files', S3_FORCE_PATH_STYLE: 'sometimes' }, 'S3_FORCE_PATH_STYLE'],
    ] as const) {
      assert.throws(
        () => loadConfig(env),
        (e: unknown) => e instanceof ConfigError && e.setting === name,
        name,
      );
    }
  });
});
