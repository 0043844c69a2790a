import { scrypt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ServiceUnavailableError } from '../errors.js';

export interface ScryptParams {
  N: number;
  r: number;
  p: number;
}

/** OWASP's scrypt floor: N=2^17, r=8, p=1 (128 MiB, about a third of a second here). */
export const SCRYPT_PARAMS: Readonly<ScryptParams> = Object.freeze({ N: 2 ** 17, r: 8, p: 1 });

/**
 * Derives a key from a password: what password hashes and form keys are made with. params
 * are the parameters that new hashes and keys are made with; a stored one is checked with
 * its own.
 */
export interface Kdf {
  (password: string, salt: Buffer, keylen: number, params: ScryptParams): Promise<Buffer>;
  readonly params: ScryptParams;
}

// N=2^17, r=8 needs 128 MiB; twice that leaves room for records made with larger parameters.
const MAXMEM = 256 * 1024 * 1024;

export class HashingBusyError extends ServiceUnavailableError {
  constructor(retryAfterSeconds: number) {
    super('hashing_busy', `Too many passwords are being checked right now; try again in ${retryAfterSeconds} s`, {
      retryAfterSeconds,
    });
  }
}

export interface HasherOptions {
  /** Hashes that run at once. */
  concurrency: number;
  /** Hashes that may wait for a free slot; one more is refused with HashingBusyError. */
  queueLimit: number;
  /** Counts one hash against an account's budget; throws (a 429) when it is spent. */
  chargeAccount?: (accountId: number) => Promise<void>;
  /**
   * What new hashes and keys are made with; SCRYPT_PARAMS unless given. Not a setting: the
   * test suite alone lowers it (test/support/helpers.ts), where a third of a second of CPU
   * for each of its hundreds of passwords made no test stronger.
   */
  params?: ScryptParams;
}

export interface HashOptions {
  /** The account whose budget pays for the hash; none for sign-in (throttled per email and address) and the command line. */
  account?: number;
  /** Another limit the hash counts against, once it is admitted (a form's password attempts). */
  attempt?: () => Promise<void>;
}

/**
 * Every scrypt of the process goes through one Hasher. scrypt runs on libuv's thread pool,
 * off the event loop, but each call holds a thread, a core and 128 MiB for a third of a
 * second: unbounded, a burst of encrypted-form creations or sign-ins starves file and DNS
 * work of the pool's threads and the machine of memory. So at most `concurrency` run,
 * `queueLimit` wait, and the next is refused at once with 503 and a Retry-After, before any
 * attempt or budget is counted, rather than waiting without bound.
 */
export class Hasher {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  // A guess until the first hash is measured; it only shapes Retry-After.
  private meanMs = 400;

  constructor(private readonly options: HasherOptions) {}

  /** A Kdf whose every call is bounded here and counted as the options say. */
  kdf(options: HashOptions = {}): Kdf {
    return Object.assign(
      (password: string, salt: Buffer, keylen: number, params: ScryptParams) =>
        this.scrypt(password, salt, keylen, params, options),
      { params: this.options.params ?? SCRYPT_PARAMS },
    );
  }

  async scrypt(
    password: string,
    salt: Buffer,
    keylen: number,
    params: ScryptParams,
    options: HashOptions = {},
  ): Promise<Buffer> {
    this.refuseWhenFull();
    await options.attempt?.();
    if (options.account !== undefined) await this.options.chargeAccount?.(options.account);
    await this.slot();
    const started = performance.now();
    try {
      return await new Promise<Buffer>((resolve, reject) =>
        scrypt(password, salt, keylen, { ...params, maxmem: MAXMEM }, (err, key) => (err ? reject(err) : resolve(key))),
      );
    } finally {
      this.meanMs = 0.8 * this.meanMs + 0.2 * (performance.now() - started);
      this.release();
    }
  }

  /** Hashes running and waiting now. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  private refuseWhenFull(): void {
    if (this.running < this.options.concurrency || this.waiting.length < this.options.queueLimit) return;
    const ahead = this.running + this.waiting.length;
    throw new HashingBusyError(Math.max(1, Math.ceil((this.meanMs * ahead) / this.options.concurrency / 1000)));
  }

  private slot(): Promise<void> {
    if (this.running < this.options.concurrency) {
      this.running++;
      return Promise.resolve();
    }
    // The queue may have filled while the attempt and the budget were counted.
    this.refuseWhenFull();
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    // The slot passes straight to the next in line, so running stays as it is.
    if (next) next();
    else this.running--;
  }
}
