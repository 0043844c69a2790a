import { connect, type Socket } from 'node:net';
import type * as Nodemailer from 'nodemailer';
import type { Transporter } from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';
import type { Config } from '../../config.js';
import { lazyRequire } from '../../lazy-require.js';

// Loaded with the first message: most processes send none.
const loadNodemailer = lazyRequire<typeof Nodemailer>('nodemailer');
const loadSmtpPool = lazyRequire<typeof SMTPPool>('nodemailer/lib/smtp-pool/index.js');

const CONNECTION_TIMEOUT_MS = 30_000;
const GREETING_TIMEOUT_MS = 30_000;
const SOCKET_TIMEOUT_MS = 60_000;

export interface OutgoingMail {
  from: { name: string; address: string };
  to: string[];
  replyTo: string | undefined;
  subject: string;
  text: string;
  html: string | undefined;
  attachments: { filename: string; content: Buffer; contentType: string }[];
  /** The same for every attempt of one job, so that a receiver can drop a message that a retry sent twice. */
  messageId: string;
}

/** How a process reaches SMTP_URL: from the configuration (smtpOf). */
export interface SmtpSettings {
  url: string;
  /** SMTP_CONNECTIONS. */
  connections: number;
  /** SMTP_TIMEOUT_MS: the longest one message may take, from its send to the server's answer. */
  timeoutMs: number;
}

/** SMTP_URL's settings, or undefined when it is unset (every message goes to the mail log). */
export function smtpOf(
  config: Pick<Config, 'smtpUrl' | 'smtpConnections' | 'smtpTimeoutMs'>,
): SmtpSettings | undefined {
  return config.smtpUrl === undefined
    ? undefined
    : { url: config.smtpUrl, connections: config.smtpConnections, timeoutMs: config.smtpTimeoutMs };
}

/** A pool of connections to one server, with the sockets it opened (to cut them all at once). */
interface Pool {
  /** Its key in pools. */
  key: string;
  transport: Transporter;
  sockets: Set<Socket>;
  /** Why it was cut, once it is. */
  cutBecause?: string;
}

const pools = new Map<string, Pool>();

interface SocketOptions {
  host?: string;
  port?: number | string;
  secure?: boolean;
  connectionTimeout?: number;
}

/**
 * The pool's connections, opened here with Nagle's algorithm off. nodemailer leaves it on, and
 * a message is written in several small writes before the server answers: each write after
 * the first waited for the server to acknowledge the one before, which a server delays (40 ms
 * on Linux) while it has nothing to say. That was about 40 ms a message on each connection
 * (99 messages a second through the pool's 5 connections to a local sink, 155 without it;
 * docs/performance.md). nodemailer greets, authenticates and upgrades to TLS (implicit or
 * STARTTLS) on the socket given, as on its own; host and port default as nodemailer's do.
 *
 * The socket is handed over at once, still connecting, as nodemailer's own are: a connect that
 * fails is then an error of the connection, which ends the pool's resource for it. Reported
 * through this callback instead, the error reached the message but not the pool
 * (PoolResource.connect passes it to the message and emits nothing), so the resource stayed
 * in the pool, taken, for good: after SMTP_CONNECTIONS failed connects (a short outage) the
 * pool could open no connection, and every later message waited out SMTP_TIMEOUT_MS.
 */
function openSocket(
  sockets: Set<Socket>,
  options: SocketOptions,
  callback: (error: Error | null, socket?: { connection: Socket }) => void,
): void {
  const port = Number(options.port) || (options.secure ? 465 : 587);
  const socket = connect({ host: options.host || 'localhost', port, noDelay: true });
  sockets.add(socket);
  // nodemailer's connection timeout ends once it has the socket (it takes it as open): the
  // connect itself is bounded here, its failure an error of the socket like any other.
  const timer = setTimeout(
    () => socket.destroy(new Error('Connection timeout')),
    options.connectionTimeout ?? CONNECTION_TIMEOUT_MS,
  );
  socket.once('connect', () => clearTimeout(timer));
  socket.once('close', () => {
    clearTimeout(timer);
    sockets.delete(socket);
  });
  socket.setKeepAlive(true);
  callback(null, { connection: socket });
}

function poolFor(smtp: SmtpSettings): Pool {
  const key = `${smtp.connections} ${smtp.url}`;
  let pool = pools.get(key);
  if (!pool) {
    // A pool: messages reuse a few open connections instead of a connection (and a TLS
    // handshake) each. Made here rather than through createTransport({ url, ... }), which
    // keeps only what the URL says and drops the other options. nodemailer's own waits are
    // for one step each (an idle socket: minutes unless set); a message's whole time is
    // bounded by SMTP_TIMEOUT_MS in sendSmtp.
    const Pool = loadSmtpPool();
    const sockets = new Set<Socket>();
    const options: SMTPPool.Options & { maxRequeues: number } = {
      url: smtp.url,
      pool: true,
      maxConnections: smtp.connections,
      maxMessages: 100,
      connectionTimeout: CONNECTION_TIMEOUT_MS,
      greetingTimeout: GREETING_TIMEOUT_MS,
      socketTimeout: SOCKET_TIMEOUT_MS,
      // A message whose connection closes under it fails, to be retried by its job (with its
      // lease and backoff), rather than being sent again by the pool without end (nodemailer's
      // default): in a cut pool, such a message would wait forever for a connection.
      maxRequeues: 0,
      getSocket: (options: SocketOptions, callback: Parameters<typeof openSocket>[2]) =>
        openSocket(sockets, options, callback),
    };
    const transport = loadNodemailer().createTransport(new Pool(options));
    pool = { key, transport, sockets };
    pools.set(key, pool);
  }
  return pool;
}

/**
 * Ends a pool at once: its sockets destroyed (nothing more is written on them, not even the
 * rest of a message), every message in it failed, and the next message opens a new pool.
 */
function cut(pool: Pool, because: string): void {
  if (pool.cutBecause !== undefined) return;
  pool.cutBecause = because;
  if (pools.get(pool.key) === pool) pools.delete(pool.key);
  pool.transport.close();
  for (const socket of pool.sockets) socket.destroy();
}

/** The user name and password of the URL, as they may appear in a message (raw and decoded). */
function secretsOf(url: string): string[] {
  const parsed = new URL(url);
  const parts = [parsed.username, parsed.password].filter((s) => s !== '');
  return [...new Set([...parts, ...parts.map((s) => decodeURIComponent(s))])].filter((s) => s.length >= 3);
}

/** An error that says what the server answered and never the credentials. */
export function safeSmtpError(error: unknown, url: string): Error {
  let message = error instanceof Error ? error.message : String(error);
  for (const secret of secretsOf(url)) message = message.split(secret).join('[redacted]');
  return new Error(`SMTP: ${message}`);
}

/**
 * Sends one message through SMTP_URL, on at most SMTP_CONNECTIONS connections open at once.
 *
 * A message that has no answer within SMTP_TIMEOUT_MS, or whose job is stopped (signal: its
 * lease ran out, or its worker is stopping), fails, and its pool is cut: every connection of
 * the pool is destroyed, so that nothing more of the message reaches the server once its job
 * may be taken over and sent again. The pool's other messages, waiting or being sent, fail
 * with it and are retried by their jobs: a cut comes of a server that stalls or of a worker
 * that stops, where they would wait too. A server that had taken a whole message and whose
 * answer was cut off may have delivered it; its retry carries the same Message-ID.
 */
export async function sendSmtp(smtp: SmtpSettings, mail: OutgoingMail, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  let pool: Pool | undefined;
  let stop: (reason: string) => void = () => undefined;
  const stopped = new Promise<never>((_, reject) => {
    stop = (reason) => {
      if (pool) cut(pool, reason);
      reject(new Error(reason));
    };
  });
  const timer = setTimeout(() => stop(`no answer within ${smtp.timeoutMs} ms (SMTP_TIMEOUT_MS)`), smtp.timeoutMs);
  const aborted = () => stop('the send was stopped with its job');
  signal.addEventListener('abort', aborted, { once: true });
  try {
    pool = poolFor(smtp);
    const sent = pool.transport.sendMail({
      from: mail.from,
      // As objects: a string is parsed again as an address list, its comments and groups read.
      to: mail.to.map((address) => ({ name: '', address })),
      replyTo: mail.replyTo === undefined ? undefined : { name: '', address: mail.replyTo },
      subject: mail.subject,
      text: mail.text,
      html: mail.html,
      attachments: mail.attachments,
      messageId: mail.messageId,
    });
    // Once stopped, the send's own failure has no one waiting for it.
    sent.catch(() => undefined);
    await Promise.race([sent, stopped]);
  } catch (error) {
    const cutBy = pool?.cutBecause;
    // Failed because another message's send cut the pool: say so, not only nodemailer's words.
    const why =
      cutBy !== undefined && error instanceof Error && error.message !== cutBy
        ? new Error(`${error.message} (the pool was cut for another message: ${cutBy})`)
        : error;
    throw safeSmtpError(why, smtp.url);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', aborted);
  }
}
