/**
 * A client that goes away in the middle of its request body (a dropped connection, a closed
 * tab during an upload) is the client's doing: the service logs it below error level, as it
 * does other refused requests, and keeps nothing of it. Real server processes, their whole
 * output read back.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { dialectName } from './support/helpers.js';
import { ProcessSet } from './support/processes.js';

/** Sends the head and the first part of a body longer than it, then drops the connection. */
function breakOff(url: string, method: string, headers: Record<string, string>, first: Buffer, length: number) {
  const u = new URL(url);
  return new Promise<void>((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname, () => {
      const head =
        `${method} ${u.pathname}${u.search} HTTP/1.1\r\nhost: ${u.host}\r\ncontent-length: ${length}\r\n` +
        Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join('') +
        '\r\n';
      socket.write(head);
      socket.write(first, () => setTimeout(() => socket.destroy(), 150));
    });
    socket.on('data', () => undefined);
    socket.on('close', () => resolve());
    socket.on('error', reject);
  });
}

describe(`requests broken off by their client (${dialectName})`, () => {
  // With S3 storage, upload URLs are presigned to the store itself: the service sees no upload.
  const processes = new ProcessSet('interrupted');
  before(() => processes.open());
  after(() => processes.close('SIGTERM'));

  it('are logged below error level, on upload URLs, image uploads and JSON bodies', async () => {
    const token = await processes.createAccount('Cut', 'cut@example.com');
    const server = await processes.serve({ LOG_LEVEL: 'debug' }, ['--no-worker']);
    const auth = { authorization: `Bearer ${token}` };
    const json = async (method: string, path: string, body: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      return JSON.parse(text);
    };
    const form = await json('POST', '/api/v2025/forms', {
      name: 'Uploads',
      fields: [
        { type: 'text', label: 'Note' },
        { type: 'file', label: 'File' },
      ],
    });
    const [note, file] = form.fields;
    const { uploads } = await json('POST', `/api/v2025/forms/${form.id}/fields/${file.id}/upload-urls`, {
      filenames: ['big.bin'],
    });
    await breakOff(
      uploads[0].uploadUrl,
      'PUT',
      { 'content-type': 'application/octet-stream' },
      Buffer.alloc(64 * 1024, 1),
      1 << 20,
    );

    // A portal's avatar: the API's one kind of multipart body.
    const portal = await fetch(`${server.url}/api/v2025/portal`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Cut portal' }),
    });
    assert.equal(portal.status, 201);
    const { id: portalId } = (await portal.json()) as { id: number };
    const boundary = 'cutcutcut';
    const part =
      `--${boundary}\r\ncontent-disposition: form-data; name="image"; filename="a.png"\r\n` +
      'content-type: image/png\r\n\r\n';
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    await breakOff(
      `${server.url}/api/v2025/portal/${portalId}/avatar`,
      'POST',
      { ...auth, 'content-type': `multipart/form-data; boundary=${boundary}` },
      Buffer.concat([Buffer.from(part), png, Buffer.alloc(32 * 1024, 2)]),
      1 << 20,
    );
    await breakOff(
      `${server.url}/api/v2025/forms/${form.id}/submissions`,
      'POST',
      { ...auth, 'content-type': 'application/json' },
      Buffer.from(`{"fields":[{"id":${note.id},"value":"`),
      1 << 16,
    );

    // Nothing was kept, and the service still answers.
    const list = await fetch(`${server.url}/api/v2025/forms/${form.id}/submissions`, { headers: auth });
    assert.equal(((await list.json()) as { total: number }).total, 0);
    const again = await fetch(uploads[0].uploadUrl, { method: 'PUT', body: Buffer.alloc(1024, 3) });
    assert.equal(again.status, 200, `the upload URL works again: ${await again.text()}`);

    await processes.stopAll('SIGTERM');
    const lines = processes
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map(
        (l) =>
          JSON.parse(l) as {
            level: number;
            msg: string;
            requestId?: string;
            req?: { url: string };
            err?: { message?: string };
          },
      );
    assert.deepEqual(
      lines.filter((l) => l.level >= 50),
      [],
      'nothing at error level',
    );
    // Each was seen, and refused at debug level with what happened.
    const refusal = (path: string) => {
      const id = lines.find((l) => l.req?.url.startsWith(path))?.requestId;
      assert.ok(id, `${path} reached the service`);
      return lines.find((l) => l.requestId === id && l.level === 20 && l.err)?.err?.message;
    };
    assert.match(refusal('/uploads/') ?? '', /interrupted before its end: the client closed the connection/);
    assert.match(refusal(`/api/v2025/portal/${portalId}/avatar`) ?? '', /could not be read: Premature close/);
  });
});
