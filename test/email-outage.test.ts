import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { SMTPServer } from 'smtp-server';
import { sendSmtp, type OutgoingMail, type SmtpSettings } from '../src/modules/emails/transport.js';

const never = () => new AbortController().signal;

function mail(i: number): OutgoingMail {
  return {
    from: { name: 'Desk', address: 'desk@forms.test' },
    to: [`to${i}@example.com`],
    replyTo: undefined,
    subject: 'outage',
    text: 'after the outage',
    html: undefined,
    attachments: [],
    messageId: `<outage${i}@forms.test>`,
  };
}

/** A loopback port that nothing listens on (taken and given back at once). */
async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((r) => probe.close(r));
  return port;
}

describe('an SMTP server that was away for a while', () => {
  it('is used again as soon as it is back, however many connects failed meanwhile', async () => {
    const port = await freePort();
    // SMTP_TIMEOUT_MS far above what a message to a local server takes: a send that waits for
    // it (a pool that can open no connection) fails with its words, not with a refusal.
    const smtp: SmtpSettings = { url: `smtp://127.0.0.1:${port}`, connections: 2, timeoutMs: 20_000 };
    // More failed connects than the pool has connections: each took a place in the pool for good.
    for (let i = 0; i < smtp.connections + 3; i++)
      await assert.rejects(sendSmtp(smtp, mail(i), never()), /^Error: SMTP: .*ECONNREFUSED/, `send ${i}`);

    const received: string[] = [];
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      closeTimeout: 200,
      onData(stream, session, callback) {
        stream.resume();
        stream.on('end', () => {
          received.push(session.envelope.rcptTo[0]!.address);
          callback();
        });
      },
    });
    server.listen(port, '127.0.0.1');
    await once(server.server, 'listening');
    try {
      await sendSmtp(smtp, mail(100), never());
      // More than the pool's connections, at once: none of its places is still held by a failure.
      await Promise.all([101, 102, 103].map((i) => sendSmtp(smtp, mail(i), never())));
      assert.deepEqual(received.sort(), [
        'to100@example.com',
        'to101@example.com',
        'to102@example.com',
        'to103@example.com',
      ]);
    } finally {
      await new Promise((r) => server.close(() => r(undefined)));
    }
  });
});
