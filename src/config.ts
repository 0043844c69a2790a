import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';

/** Settings of one process, read from the environment once at start. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** A postgres:// URL, or undefined for the SQLite file in dataDir. */
  databaseUrl: string | undefined;
  /** PostgreSQL connections this process may hold at once (each write is a transaction on one of them). */
  databasePoolSize: number;
  publicUrl: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Signs URLs and wraps keys; a random one is made per process when unset (dev only). */
  secretKey: string;
  /** Largest JSON request body in bytes. */
  bodyLimit: number;
  /** Memory for serialized form reads kept per process, in bytes; 0 turns the cache off. */
  readCacheBytes: number;
  /** Fastify's trustProxy: whether, or which, proxies' X-Forwarded-For to believe for remoteAddr. */
  trustProxy: boolean | number | string[];
  /** API calls allowed per access token per UTC day; 0 turns the daily window off. */
  rateLimitPerDay: number;
  /** API calls allowed per access token per minute (the burst); 0 turns it off. */
  rateLimitPerMinute: number;
  /** A redis:// or rediss:// URL: counters shared by every process; undefined keeps them in memory. */
  redisUrl: string | undefined;
  /** Sign-in attempts per 15 minutes, counted per email and per client address. */
  signInAttempts: number;
  /** Encryption password attempts per form per 15 minutes. */
  encryptionPasswordAttempts: number;
  /** Password hashes (scrypt) one account's API calls may cause per 15 minutes. */
  accountHashAttempts: number;
  /** Password hashes run at once in this process (each holds 128 MiB while it runs). */
  hashConcurrency: number;
  /** Password hashes that may wait for a free slot; beyond it, 503 hashing_busy. */
  hashQueueLimit: number;
  /** Headers of a request, then its JSON body, must each arrive within this many ms. */
  requestTimeoutMs: number;
  /** An upload streamed to PUT /uploads/… must average at least this many bytes a second over each requestTimeoutMs. */
  uploadMinBytesPerSecond: number;
  /** How long an idle keep-alive connection stays open, in ms. */
  keepAliveTimeoutMs: number;
  /**
   * How long a stop (SIGTERM) may take, in ms: requests in flight are waited for this long,
   * then their connections are closed; claimed jobs get the same time to finish.
   */
  shutdownTimeoutMs: number;
  /**
   * The bearer token that GET /metrics asks for. Unset: /metrics answers only to a client on
   * loopback whose request came through no proxy (no X-Forwarded-For or Forwarded header).
   */
  metricsToken: string | undefined;
  /** `formwork worker` only: a port on which it serves GET /metrics (it has no API); unset, none. */
  workerMetricsPort: number | undefined;
  /** Failed authentications (unknown, expired or revoked bearer tokens, wrong client credentials) per client address per 15 minutes. */
  authFailureAttempts: number;
  /** How often each process writes the last use of personal access tokens, in seconds. */
  tokenUsageFlushSeconds: number;
  /** How often an idle worker looks for due jobs, in ms (jobs enqueued by this process wake it sooner). */
  workerPollMs: number;
  /** How long a claimed job is held without a checkpoint before another worker may take it over. */
  jobLeaseSeconds: number;
  /** Jobs one worker runs at once. */
  workerConcurrency: number;
  /** Finished (done or failed) jobs and their run logs are deleted after this many days. */
  jobRetentionDays: number;
  /**
   * A process that has not written its heartbeat for this long counts as stopped, even if
   * its lock still looks held (a machine cut off from the database, a process hung).
   */
  processTimeoutSeconds: number;
  /**
   * Webhooks may reach loopback, private, link-local and other internal addresses: for
   * development and tests, never for a service that strangers can add webhooks to.
   */
  webhookAllowPrivate: boolean;
  /** How long a webhook delivery may take, from connecting to the end of the response, in ms. */
  webhookTimeoutMs: number;
  /** smtp:// or smtps:// with credentials; undefined keeps every email in the mail log instead. */
  smtpUrl: string | undefined;
  /** The most connections to SMTP_URL one process keeps open at once; each carries one message at a time. */
  smtpConnections: number;
  /** The longest one message may take through SMTP_URL, from its send (waiting for a connection included) to the server's answer, in ms. */
  smtpTimeoutMs: number;
  /** The From address of every email: an address, or "Name <address>". */
  mailFrom: { name: string | undefined; address: string };
  /** The most bytes of files one email attaches, all files together; files beyond it are named, not attached. */
  mailAttachmentMaxBytes: number;
  /** The largest image a smart list option takes. */
  optionImageMaxBytes: number;
  /** Where uploaded files live. */
  storage: { driver: 'local' } | { driver: 's3'; s3: S3Settings };
  /** The hosted form pages (src/modules/hosted). */
  hosted: HostedSettings;
}

export interface HostedSettings {
  /** Submissions (and partial saves) one client address may make on hosted pages per minute. */
  publicSubmitPerMinute: number;
  /** A hosted page submitted sooner than this after it was loaded is refused as automated. */
  publicSubmitMinSeconds: number;
  /** Partial submissions are removed this many days after their last save. */
  partialRetentionDays: number;
  /** Prefill URLs stop working after this many days. */
  prefillTtlDays: number;
  /** How often each process adds its page counts (views, starts …) to the form statistics. */
  statsFlushSeconds: number;
}

export interface S3Settings {
  bucket: string;
  /** For S3-compatible stores (MinIO, R2, ...); unset means AWS itself. */
  endpoint: string | undefined;
  region: string;
  /** Both or neither; neither leaves the SDK's default credential chain (environment, instance role). */
  accessKeyId: string | undefined;
  secretAccessKey: string | undefined;
  forcePathStyle: boolean;
}

export class ConfigError extends Error {
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(`${setting}: ${message}`);
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function url(env: NodeJS.ProcessEnv, name: string, protocols: string[]): URL | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  }
  return parsed;
}

function trustProxy(raw: string | undefined): Config['trustProxy'] {
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  if (/^\d+$/.test(raw)) return Number(raw);
  const list = raw.split(',').map((s) => s.trim());
  if (list.some((s) => !/^[0-9a-fA-F.:/]+$/.test(s))) {
    throw new ConfigError(
      'TRUST_PROXY',
      'must be true, false, a number of hops, or a comma-separated list of addresses or CIDR ranges',
    );
  }
  return list;
}

function flag(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function storage(env: NodeJS.ProcessEnv): Config['storage'] {
  const driver = env.STORAGE_DRIVER && env.STORAGE_DRIVER !== '' ? env.STORAGE_DRIVER : 'local';
  if (driver === 'local') return { driver };
  if (driver !== 's3') throw new ConfigError('STORAGE_DRIVER', `must be local or s3, got "${driver}"`);
  const bucket = env.S3_BUCKET ?? '';
  if (bucket === '') throw new ConfigError('S3_BUCKET', 'is required when STORAGE_DRIVER is s3');
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
    throw new ConfigError('S3_BUCKET', `is not a valid bucket name: "${bucket}"`);
  const accessKeyId = env.S3_ACCESS_KEY_ID || undefined;
  const secretAccessKey = env.S3_SECRET_ACCESS_KEY || undefined;
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new ConfigError(
      accessKeyId === undefined ? 'S3_ACCESS_KEY_ID' : 'S3_SECRET_ACCESS_KEY',
      'S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together',
    );
  }
  const endpoint = url(env, 'S3_ENDPOINT', ['http:', 'https:'])?.toString().replace(/\/+$/, '');
  return {
    driver,
    s3: {
      bucket,
      endpoint,
      region: env.S3_REGION && env.S3_REGION !== '' ? env.S3_REGION : 'us-east-1',
      accessKeyId,
      secretAccessKey,
      // Most S3-compatible servers want path-style addressing; AWS wants virtual hosts.
      forcePathStyle: flag(env, 'S3_FORCE_PATH_STYLE', endpoint !== undefined),
    },
  };
}

function metricsToken(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (raw.length < 16 || !/^[\x21-\x7e]+$/.test(raw))
    throw new ConfigError('METRICS_TOKEN', 'must be at least 16 printable characters without spaces');
  return raw;
}

const ADDRESS = /^[^\s@<>",;]+@[^\s@<>",;.]+(\.[^\s@<>",;.]+)+$/;

function mailFrom(raw: string | undefined, publicUrl: string): Config['mailFrom'] {
  if (raw === undefined || raw === '') return { name: 'Formwork', address: `formwork@${new URL(publicUrl).hostname}` };
  const named = /^\s*(.*?)\s*<([^<>]+)>\s*$/.exec(raw);
  const name = named ? named[1]!.replace(/^"(.*)"$/, '$1') : undefined;
  const address = (named ? named[2]! : raw).trim();
  if (!ADDRESS.test(address))
    throw new ConfigError('MAIL_FROM', `must be an address or "Name <address>", got "${raw}"`);
  return { name: name === '' ? undefined : name, address };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = integer(env, 'PORT', 8080, 0, 65535);
  const host = env.HOST && env.HOST !== '' ? env.HOST : '0.0.0.0';
  const dataDir = resolve(env.DATA_DIR && env.DATA_DIR !== '' ? env.DATA_DIR : './data');
  const database = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const publicUrl = url(env, 'PUBLIC_URL', ['http:', 'https:']);

  const logLevel = (env.LOG_LEVEL && env.LOG_LEVEL !== '' ? env.LOG_LEVEL : 'info') as Config['logLevel'];
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }

  let secretKey = env.SECRET_KEY ?? '';
  if (secretKey === '') {
    secretKey = randomBytes(32).toString('hex');
  } else if (secretKey.length < 32) {
    throw new ConfigError('SECRET_KEY', 'must be at least 32 characters long');
  }

  const resolvedPublicUrl = (publicUrl?.toString() ?? `http://localhost:${port}/`).replace(/\/+$/, '');
  // At least 5 seconds: a shorter lease would be taken over while a healthy handler is between checkpoints.
  const jobLeaseSeconds = integer(env, 'JOB_LEASE_SECONDS', 300, 5, 86_400);
  const webhookTimeoutMs = integer(env, 'WEBHOOK_TIMEOUT_MS', 15_000, 100, 600_000);
  const smtpTimeoutMs = integer(env, 'SMTP_TIMEOUT_MS', 120_000, 1_000, 600_000);
  // A delivery or a message that waited its whole timeout would outlast its lease: aborted as a
  // lost run, it would be sent again at once rather than on the retry schedule, and end failed
  // for its lease.
  const smtpUrl = url(env, 'SMTP_URL', ['smtp:', 'smtps:'])?.toString();
  for (const [name, ms, what] of [
    ['WEBHOOK_TIMEOUT_MS', webhookTimeoutMs, 'a webhook delivery'],
    // Without SMTP_URL messages go to the mail log, a write of the job's own.
    ...(smtpUrl === undefined ? [] : ([['SMTP_TIMEOUT_MS', smtpTimeoutMs, 'an email']] as const)),
  ] as const) {
    if (jobLeaseSeconds * 1000 <= ms)
      throw new ConfigError(
        'JOB_LEASE_SECONDS',
        `must be longer than ${name} (${ms} ms), or ${what} could outlast its lease; got ${jobLeaseSeconds}`,
      );
  }
  return {
    port,
    host,
    dataDir,
    databaseUrl: database?.toString(),
    databasePoolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    publicUrl: resolvedPublicUrl,
    logLevel,
    secretKey,
    bodyLimit: integer(env, 'BODY_LIMIT', 1024 * 1024, 1024, 100 * 1024 * 1024),
    readCacheBytes: integer(env, 'READ_CACHE_MB', 64, 0, 65536) * 1024 * 1024,
    trustProxy: trustProxy(env.TRUST_PROXY),
    // 14,400 a day is the original service's quota; 600 a minute lets a client spend it in bursts.
    rateLimitPerDay: integer(env, 'RATE_LIMIT_PER_DAY', 14_400, 0, 1_000_000_000),
    rateLimitPerMinute: integer(env, 'RATE_LIMIT_PER_MINUTE', 600, 0, 1_000_000_000),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:'])?.toString(),
    // No 0 here: turning off guessing protection is not a setting.
    signInAttempts: integer(env, 'SIGN_IN_ATTEMPTS', 10, 1, 1_000_000),
    encryptionPasswordAttempts: integer(env, 'ENCRYPTION_PASSWORD_ATTEMPTS', 10, 1, 1_000_000),
    accountHashAttempts: integer(env, 'ACCOUNT_HASH_ATTEMPTS', 100, 1, 1_000_000),
    // Two: scrypt holds 128 MiB and a core for a third of a second, and libuv's pool (four
    // threads by default) must keep threads for file and DNS work.
    hashConcurrency: integer(env, 'HASH_CONCURRENCY', 2, 1, 64),
    hashQueueLimit: integer(env, 'HASH_QUEUE_LIMIT', 16, 0, 10_000),
    requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000),
    uploadMinBytesPerSecond: integer(env, 'UPLOAD_MIN_BYTES_PER_SECOND', 1024, 1, 1_000_000_000),
    // Longer than the 60 s idle timeout of common load balancers, so that they close first.
    keepAliveTimeoutMs: integer(env, 'KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    metricsToken: metricsToken(env.METRICS_TOKEN),
    workerMetricsPort: env.WORKER_METRICS_PORT ? integer(env, 'WORKER_METRICS_PORT', 0, 0, 65535) : undefined,
    // A client with a valid token never fails; 100 leaves room for one that keeps retrying a
    // revoked token for a while, and no 0 for the same reason as above.
    authFailureAttempts: integer(env, 'AUTH_FAILURE_ATTEMPTS', 100, 1, 1_000_000),
    tokenUsageFlushSeconds: integer(env, 'TOKEN_USAGE_FLUSH_SECONDS', 60, 1, 86_400),
    workerPollMs: integer(env, 'WORKER_POLL_MS', 1000, 10, 3_600_000),
    jobLeaseSeconds,
    workerConcurrency: integer(env, 'WORKER_CONCURRENCY', 4, 1, 64),
    jobRetentionDays: integer(env, 'JOB_RETENTION_DAYS', 30, 1, 3650),
    // At least 5 seconds: heartbeats go every sixth of it, and a busy database may delay one.
    processTimeoutSeconds: integer(env, 'PROCESS_TIMEOUT_SECONDS', 30, 5, 3600),
    webhookAllowPrivate: flag(env, 'WEBHOOK_ALLOW_PRIVATE', false),
    webhookTimeoutMs,
    smtpUrl,
    // At most the 10 emails a worker sends at once (emails/jobs.ts): more would never all be used.
    smtpConnections: integer(env, 'SMTP_CONNECTIONS', 5, 1, 10),
    smtpTimeoutMs,
    mailFrom: mailFrom(env.MAIL_FROM, resolvedPublicUrl),
    mailAttachmentMaxBytes: integer(env, 'MAIL_ATTACHMENT_MAX_BYTES', 10 * 1024 * 1024, 0, 1024 * 1024 * 1024),
    optionImageMaxBytes: integer(env, 'OPTION_IMAGE_MAX_BYTES', 2 * 1024 * 1024, 1024, 100 * 1024 * 1024),
    storage: storage(env),
    hosted: {
      publicSubmitPerMinute: integer(env, 'PUBLIC_SUBMIT_PER_MINUTE', 10, 1, 1_000_000),
      publicSubmitMinSeconds: integer(env, 'PUBLIC_SUBMIT_MIN_SECONDS', 3, 0, 3600),
      partialRetentionDays: integer(env, 'PARTIAL_RETENTION_DAYS', 30, 1, 3650),
      prefillTtlDays: integer(env, 'PREFILL_TTL_DAYS', 30, 1, 3650),
      statsFlushSeconds: integer(env, 'STATS_FLUSH_SECONDS', 10, 1, 3600),
    },
  };
}
