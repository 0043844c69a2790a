import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import S3rver from 's3rver';

/** An S3-compatible server (s3rver) on a free loopback port, with one bucket, in a temporary directory. */
export interface TestS3 {
  /** The settings that point a test app at it (STORAGE_DRIVER=s3 and the rest). */
  env: Record<string, string>;
  bucket: string;
  /** s3rver's directory: where the bucket's bytes really are. */
  directory: string;
  /** Every object key in the bucket, from s3rver's own directory: what the bucket really holds. */
  objectKeys(): string[];
  close(): Promise<void>;
}

export const S3_BUCKET = 'formwork-test';

export async function startS3(): Promise<TestS3> {
  const directory = mkdtempSync(join(tmpdir(), 'formwork-s3-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    directory,
    silent: true,
    configureBuckets: [{ name: S3_BUCKET }],
  });
  const { port } = await server.run();
  const bucketDir = join(directory, S3_BUCKET);
  return {
    bucket: S3_BUCKET,
    directory,
    env: {
      STORAGE_DRIVER: 's3',
      S3_BUCKET,
      S3_ENDPOINT: `http://127.0.0.1:${port}`,
      S3_REGION: 'us-east-1',
      // s3rver's fixed credentials.
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      S3_FORCE_PATH_STYLE: 'true',
    },
    objectKeys() {
      const out: string[] = [];
      const walk = (dir: string) => {
        for (const name of readdirSync(dir)) {
          const path = join(dir, name);
          if (statSync(path).isDirectory()) walk(path);
          // s3rver keeps each object as <key>._S3rver_object beside its metadata files.
          else if (name.endsWith('._S3rver_object'))
            out.push(relative(bucketDir, path).slice(0, -'._S3rver_object'.length));
        }
      };
      walk(bucketDir);
      return out.sort();
    },
    async close() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
