import type { Readable } from 'node:stream';

/** A stream was longer than the byte limit given to put(); nothing of it was kept. */
export class ObjectTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`The object is larger than ${limit} bytes`);
  }
}

/** No object under that key. */
export class ObjectNotFoundError extends Error {
  constructor(readonly key: string) {
    super(`No stored object ${key}`);
  }
}

export interface PutOptions {
  /** More bytes than this and the put fails with ObjectTooLargeError, keeping nothing. */
  maxBytes: number;
  contentType?: string;
}

export interface StoredObject {
  stream: Readable;
  size: number;
}

/** A temporary file of a put: under way, or left by a process that stopped mid-put. */
export interface TemporaryFile {
  name: string;
  /** Who wrote it (the writer the driver was made with); undefined for files of versions that named none. */
  writer: string | undefined;
  /** Epoch ms, by the file system's clock. */
  modifiedAt: number;
}

/**
 * Where file bytes live. Keys are relative paths of [A-Za-z0-9_-] segments joined by '/',
 * chosen by the service, never by a client. Every driver keeps an object whole or not at all.
 */
export interface Storage {
  readonly driver: 'local' | 's3';
  /** Streams into the key; resolves with the size once the whole object is kept. */
  put(key: string, body: Readable, options: PutOptions): Promise<{ size: number }>;
  /** The object as a stream, or the byte range [start, end] of it (inclusive, like HTTP ranges). */
  get(key: string, range?: { start: number; end: number }): Promise<StoredObject>;
  head(key: string): Promise<{ size: number } | undefined>;
  /**
   * Copies the object under from to to, whole, within the store (no bytes pass through the
   * service on S3), and resolves with the copy's size; ObjectNotFoundError when from is missing.
   * What is written to from later does not reach the copy.
   */
  copy(from: string, to: string): Promise<{ size: number }>;
  /** Removes the objects that exist; missing keys are not an error (removal is idempotent). */
  deleteMany(keys: string[]): Promise<void>;
  /** A URL that takes one HTTP PUT of the object straight to the store, when the store can sign one. */
  presignPut?(key: string, expiresInSeconds: number): Promise<string>;
  /**
   * Drivers that write temporary files (local disk): those there now. What a process that
   * died mid-put left is removed through removeTemporary; S3 keeps the parts of an
   * unfinished multipart upload itself, until the bucket's lifecycle rule aborts it.
   */
  temporaryFiles?(): Promise<TemporaryFile[]>;
  removeTemporary?(names: string[]): Promise<void>;
  /** Resolves when objects can be stored: the directory is writable, the bucket answers. For /readyz. */
  check(signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

const KEY = /^[A-Za-z0-9_-]{1,200}(\/[A-Za-z0-9_-]{1,200}){0,8}$/;

/** Keys are made by the service; this guards against a bug ever turning one into a path escape. */
export function checkKey(key: string): string {
  if (!KEY.test(key)) throw new Error(`Invalid storage key: ${JSON.stringify(key)}`);
  return key;
}
