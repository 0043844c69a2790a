import type * as ClientS3 from '@aws-sdk/client-s3';
import type { S3Client } from '@aws-sdk/client-s3';
import type * as LibStorage from '@aws-sdk/lib-storage';
import type * as Presigner from '@aws-sdk/s3-request-presigner';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { S3Settings } from '../config.js';
import { lazyRequire } from '../lazy-require.js';
import { ByteLimit } from './limit.js';
import {
  checkKey,
  ObjectNotFoundError,
  ObjectTooLargeError,
  type PutOptions,
  type Storage,
  type StoredObject,
} from './types.js';

const PART_SIZE = 5 * 1024 * 1024;

// The SDK is loaded when an S3 store is first made: the local driver never needs it.
const loadClientS3 = lazyRequire<typeof ClientS3>('@aws-sdk/client-s3');
const loadLibStorage = lazyRequire<typeof LibStorage>('@aws-sdk/lib-storage');
const loadPresigner = lazyRequire<typeof Presigner>('@aws-sdk/s3-request-presigner');

function isNotFound(error: unknown): boolean {
  return (
    error instanceof loadClientS3().S3ServiceException &&
    (error.name === 'NoSuchKey' || error.name === 'NotFound' || error.$metadata.httpStatusCode === 404)
  );
}

/**
 * An S3-compatible bucket. Streams of unknown length go up as multipart uploads in 5 MiB
 * parts (two in flight, so memory stays near 10 MiB per upload whatever the file size);
 * a stream over its limit aborts the multipart upload, so no object appears. A process
 * killed mid-way cannot abort its multipart upload: the parts stay in the bucket, unseen
 * and billed, until the bucket's lifecycle rule AbortIncompleteMultipartUpload removes them
 * (the README says to set one).
 */
export class S3Storage implements Storage {
  readonly driver = 's3' as const;
  private readonly client: S3Client;
  private readonly bucket: string;

  constructor(settings: S3Settings) {
    this.bucket = settings.bucket;
    this.client = new (loadClientS3().S3Client)({
      region: settings.region,
      endpoint: settings.endpoint,
      forcePathStyle: settings.forcePathStyle,
      credentials:
        settings.accessKeyId && settings.secretAccessKey
          ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey }
          : undefined,
      // Checksums only where S3 requires them: S3-compatible stores (and presigned PUTs from
      // browsers) do not all understand the SDK's default trailing checksums.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async put(key: string, body: Readable, options: PutOptions): Promise<{ size: number }> {
    const Key = checkKey(key);
    const limit = new ByteLimit(options.maxBytes);
    // pipeline, not pipe: a source that fails (or already has) fails the upload too. Its own
    // outcome is the upload's, reported by done() below.
    pipeline(body, limit).catch(() => undefined);
    const upload = new (loadLibStorage().Upload)({
      client: this.client,
      params: { Bucket: this.bucket, Key, Body: limit, ContentType: options.contentType },
      partSize: PART_SIZE,
      queueSize: 2,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
      return { size: limit.bytes };
    } catch (error) {
      if (limit.exceeded) throw new ObjectTooLargeError(options.maxBytes);
      throw error;
    }
  }

  async get(key: string, range?: { start: number; end: number }): Promise<StoredObject> {
    try {
      const out = await this.client.send(
        new (loadClientS3().GetObjectCommand)({
          Bucket: this.bucket,
          Key: checkKey(key),
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      if (!(out.Body instanceof Readable)) throw new Error('The S3 client returned no Node stream');
      return { stream: out.Body, size: out.ContentLength ?? 0 };
    } catch (error) {
      if (isNotFound(error)) throw new ObjectNotFoundError(key);
      throw error;
    }
  }

  async head(key: string): Promise<{ size: number } | undefined> {
    try {
      const out = await this.client.send(
        new (loadClientS3().HeadObjectCommand)({ Bucket: this.bucket, Key: checkKey(key) }),
      );
      return { size: out.ContentLength ?? 0 };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** One CopyObject, which takes up to 5 GB: no presigned PUT (a single PUT) makes an object larger. */
  async copy(from: string, to: string): Promise<{ size: number }> {
    try {
      await this.client.send(
        new (loadClientS3().CopyObjectCommand)({
          Bucket: this.bucket,
          // Bucket names and keys (checkKey) hold nothing that would need encoding.
          CopySource: `${this.bucket}/${checkKey(from)}`,
          Key: checkKey(to),
        }),
      );
    } catch (error) {
      if (isNotFound(error)) throw new ObjectNotFoundError(from);
      throw error;
    }
    // CopyObject answers no size. The copy's key is the service's alone, so its HEAD is the copy's.
    const head = await this.head(to);
    if (!head) throw new ObjectNotFoundError(to);
    return head;
  }

  async deleteMany(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const chunk = keys.slice(i, i + 1000).map((Key) => ({ Key: checkKey(Key) }));
      const out = await this.client.send(
        new (loadClientS3().DeleteObjectsCommand)({ Bucket: this.bucket, Delete: { Objects: chunk, Quiet: true } }),
      );
      const failed = (out.Errors ?? []).filter((e) => e.Code !== 'NoSuchKey');
      if (failed.length > 0)
        throw new Error(
          `S3 could not delete ${failed.length} objects: ${failed[0]!.Code ?? ''} ${failed[0]!.Message ?? ''}`,
        );
    }
  }

  presignPut(key: string, expiresInSeconds: number): Promise<string> {
    return loadPresigner().getSignedUrl(
      this.client,
      new (loadClientS3().PutObjectCommand)({ Bucket: this.bucket, Key: checkKey(key) }),
      {
        expiresIn: expiresInSeconds,
      },
    );
  }

  async check(signal?: AbortSignal): Promise<void> {
    // HeadBucket needs the bucket to exist and the credentials to reach it.
    await this.client.send(new (loadClientS3().HeadBucketCommand)({ Bucket: this.bucket }), { abortSignal: signal });
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
