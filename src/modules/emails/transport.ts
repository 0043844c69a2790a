import { connect, type Socket } from 'node:net';
import type * as Nodemailer from 'nodemailer';
import type { Transporter } from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';
import { lazyRequire } from '../../lazy-require.js';

// Loaded with the first message: most processes send none.
const loadNodemailer = lazyRequire<typeof Nodemailer>('nodemailer');
const loadSmtpPool = lazyRequire<typeof SMTPPool>('nodemailer/lib/smtp-pool/index.js');

const CONNECTION_TIMEOUT_MS = 30_000;

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

const transports = new Map<string, Transporter>();

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
 */
function openSocket(
  options: SocketOptions,
  callback: (error: Error | null, socket?: { connection: Socket }) => void,
): void {
  const port = Number(options.port) || (options.secure ? 465 : 587);
  const socket = connect({ host: options.host || 'localhost', port, noDelay: true });
  const timer = setTimeout(
    () => socket.destroy(new Error('Connection timeout')),
    options.connectionTimeout ?? CONNECTION_TIMEOUT_MS,
  );
  const failed = (error: Error) => {
    clearTimeout(timer);
    callback(error);
  };
  socket.once('error', failed);
  socket.once('connect', () => {
    clearTimeout(timer);
    socket.removeListener('error', failed);
    socket.setKeepAlive(true);
    callback(null, { connection: socket });
  });
}

function transportFor(url: string, connections: number): Transporter {
  const key = `${connections} ${url}`;
  let transport = transports.get(key);
  if (!transport) {
    // A pool: messages reuse a few open connections instead of a connection (and a TLS
    // handshake) each. Made here rather than through createTransport({ url, ... }), which
    // keeps only what the URL says and drops the other options. Shorter waits than
    // nodemailer's (minutes): a job holds its lease while it waits.
    const Pool = loadSmtpPool();
    transport = loadNodemailer().createTransport(
      new Pool({
        url,
        pool: true,
        maxConnections: connections,
        maxMessages: 100,
        connectionTimeout: CONNECTION_TIMEOUT_MS,
        greetingTimeout: 30_000,
        socketTimeout: 60_000,
        getSocket: openSocket,
      }),
    );
    transports.set(key, transport);
  }
  return transport;
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

/** Sends one message through SMTP_URL, on at most `connections` connections open at once (SMTP_CONNECTIONS). */
export async function sendSmtp(url: string, connections: number, mail: OutgoingMail): Promise<void> {
  try {
    await transportFor(url, connections).sendMail({
      from: mail.from,
      to: mail.to,
      replyTo: mail.replyTo,
      subject: mail.subject,
      text: mail.text,
      html: mail.html,
      attachments: mail.attachments,
      messageId: mail.messageId,
    });
  } catch (error) {
    throw safeSmtpError(error, url);
  }
}
