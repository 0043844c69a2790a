import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** One message as the SMTP server received it. */
export interface ReceivedMail {
  from: string;
  to: string[];
  /** The whole message, as sent. */
  raw: string;
  /** The message with quoted-printable undone and base64 parts decoded, for looking into. */
  decoded: string;
}

export interface SmtpSink {
  url: string;
  port: number;
  user: string;
  password: string;
  messages: ReceivedMail[];
  close(): Promise<void>;
}

function decodeQuotedPrintable(text: string): string {
  return Buffer.from(
    text.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
    'latin1',
  ).toString('utf8');
}

/** Each part's body in readable form: quoted-printable and base64 parts decoded, in place. */
function decode(raw: string): string {
  return raw
    .split(/\r?\n(?=--)/)
    .map((part) => {
      const split = part.search(/\r?\n\r?\n/);
      if (split === -1) return part;
      const head = part.slice(0, split);
      const body = part.slice(split);
      if (/content-transfer-encoding:\s*quoted-printable/i.test(head)) return head + decodeQuotedPrintable(body);
      if (/content-transfer-encoding:\s*base64/i.test(head))
        return head + '\r\n\r\n' + Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
      return part;
    })
    .join('\r\n');
}

/**
 * A real SMTP server on a free loopback port that keeps what it receives. It asks for a user
 * name and password (plain text on loopback: STARTTLS is off, insecure auth allowed).
 */
export async function startSmtpSink(user = 'mailer', password = 'S3cret-smtp-pass'): Promise<SmtpSink> {
  const messages: ReceivedMail[] = [];
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authMethods: ['PLAIN', 'LOGIN'],
    logger: false,
    // The service's pooled connections stay open while idle; on close the sink would wait
    // 30 s (smtp-server's default) for them before answering 421 and closing them itself.
    closeTimeout: 200,
    onAuth(auth, _session, callback) {
      if (auth.username === user && auth.password === password) callback(null, { user });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          decoded: decode(raw),
        });
        callback();
      });
    },
  });
  // A connection that its client resets (a worker killed with its SMTP pool open) is reported
  // here: not the sink's failure, and without a listener it would be an uncaught exception.
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://${user}:${password}@127.0.0.1:${port}`,
    port,
    user,
    password,
    messages,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
