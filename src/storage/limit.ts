import { Transform, type TransformCallback } from 'node:stream';
import { ObjectTooLargeError } from './types.js';

/** Passes bytes through and fails with ObjectTooLargeError at the first byte past the limit. */
export class ByteLimit extends Transform {
  bytes = 0;
  exceeded = false;

  constructor(private readonly limit: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.limit) {
      this.exceeded = true;
      done(new ObjectTooLargeError(this.limit));
      return;
    }
    done(null, chunk);
  }
}
