import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker } from '../src/jobs/worker.js';
import { sweepExpiredUploads } from '../src/modules/uploads/cleanup.js';
import { uploadUrlFor } from '../src/modules/uploads/service.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { filesUnder } from './support/disk.js';
import { startS3, type TestS3 } from './support/s3.js';

const HOUR = 60 * 60 * 1000;
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(200)]);

const FIELDS = [
  { type: 'file', label: 'Files', attributes: { maxFiles: 2, maxFileSize: 1000, allowedTypes: ['txt', 'bin', 'png'] } },
  { type: 'file', label: 'Docs' },
  { type: 'signature', label: 'Sign', attributes: { maxFileSize: 1000 } },
  { type: 'text', label: 'Note', attributes: { maxLength: 5 } },
];

const json = (res: Response): Promise<any> => res.json();

async function ok(res: Promise<Reply> | Reply, what: string): Promise<any> {
  const r = await res;
  assert.equal(r.status, 200, `${what}: ${r.status} ${r.text.slice(0, 500)}`);
  return r.body;
}

/** A 400 of a submission whose details name the field's value and say what is wrong. */
function assertRefused(res: Reply, index: number, label: string, pattern: RegExp): void {
  assert.equal(res.status, 400, `${label}: ${res.status} ${res.text.slice(0, 300)}`);
  assert.equal(res.body.status, 'error');
  assert.equal(res.body.code, 'invalid_submission');
  const detail = res.body.details.find((d: any) => d.property === `body.fields[${index}].value`);
  assert.ok(detail, `details should name body.fields[${index}].value: ${JSON.stringify(res.body.details)}`);
  assert.match(detail.message, new RegExp(`^${label} \\(\\d+\\): `));
  assert.match(detail.message, pattern);
}

/** A PUT with a chunked body (no Content-Length), as a client streaming a file of unknown size sends it. */
function putChunked(url: string, body: Buffer): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: 'PUT', headers: { 'transfer-encoding': 'chunked', 'content-type': 'application/octet-stream' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }),
        );
        res.on('error', reject);
      },
    );
    // The server may answer and close before it has read everything: the answer is what counts.
    req.on('error', () => undefined);
    for (let i = 0; i < body.length; i += 1024) req.write(body.subarray(i, i + 1024));
    req.end();
  });
}

for (const driver of ['local', 's3'] as const) {
  describe(`file uploads (${driver} storage, ${dialectName})`, () => {
    let s3: TestS3 | undefined;
    let app: TestApp;
    let a: TestAccount;
    let b: TestAccount;
    let form: any;
    let other: any;
    let ids: Record<string, number>;

    before(async () => {
      if (driver === 's3') s3 = await startS3();
      app = await startTestApp(s3?.env ?? {});
      a = await app.account('A');
      b = await app.account('B');
      form = await ok(a.post('/forms', { name: 'With files', fields: FIELDS }), 'create form');
      ids = Object.fromEntries(form.fields.map((f: any) => [f.label, f.id]));
      other = await ok(a.post('/forms', { name: 'Other', fields: [FIELDS[0]] }), 'create other form');
    });
    after(async () => {
      await app?.close();
      await s3?.close();
    });

    /** What storage holds right now, temporary files included. */
    const stored = (): string[] => (s3 ? s3.objectKeys() : filesUnder(join(app.config.dataDir, 'files')));
    /** Upload URLs name PUBLIC_URL (http://forms.test); the test server listens elsewhere. */
    const reachable = (url: string) =>
      url.startsWith(app.config.publicUrl) ? app.url + url.slice(app.config.publicUrl.length) : url;

    async function issue(
      fieldId: number,
      filenames: string[],
      formId = form.id,
      acc = a,
    ): Promise<{ filename: string; fileKey: string; uploadUrl: string; expiresAt: string }[]> {
      const body = await ok(acc.post(`/forms/${formId}/fields/${fieldId}/upload-urls`, { filenames }), 'upload-urls');
      return body.uploads;
    }

    async function put(url: string, bytes: Buffer): Promise<Response> {
      return fetch(reachable(url), { method: 'PUT', body: bytes });
    }

    /** A URL of this service's own upload route, with either driver (on S3 the upload is switched to go through the service). */
    async function serviceUpload(fieldId: number, filename: string): Promise<{ fileKey: string; url: string }> {
      const [u] = await issue(fieldId, [filename]);
      if (driver === 'local') return { fileKey: u!.fileKey, url: reachable(u!.uploadUrl) };
      const db = app.server.db.kysely;
      await db.updateTable('uploads').set({ via: 'service' }).where('file_key', '=', u!.fileKey).execute();
      const row = await db
        .selectFrom('uploads')
        .selectAll()
        .where('file_key', '=', u!.fileKey)
        .executeTakeFirstOrThrow();
      return { fileKey: u!.fileKey, url: reachable(await uploadUrlFor(app.server.ctx, row)) };
    }

    async function uploaded(fieldId: number, name: string, bytes: Buffer, formId = form.id): Promise<string> {
      const [u] = await issue(fieldId, [name], formId);
      const res = await put(u!.uploadUrl, bytes);
      assert.equal(res.status, 200, `PUT: ${res.status} ${await res.text()}`);
      return u!.fileKey;
    }

    const submit = (fields: { id: number; value: unknown }[], acc = a, formId = form.id) =>
      acc.post(`/forms/${formId}/submissions`, { fields });
    const keys = (...fileKeys: string[]) => ({ subvalues: fileKeys.map((subvalue) => ({ subvalue })) });
    const download = (submissionId: number, fieldId: number, index?: number, acc = a) =>
      fetch(
        `${app.url}/api/v2025/submissions/${submissionId}/upload?fieldId=${fieldId}${index === undefined ? '' : `&index=${index}`}`,
        {
          headers: { authorization: `Bearer ${acc.token}` },
        },
      );

    it('takes files through upload-urls, PUT and fileKeys, and serves them back byte for byte', async () => {
      const before = stored().length;
      const one = randomBytes(700);
      const two = randomBytes(1000);
      const urls = await issue(ids.Files!, ['one.bin', 'two.txt']);
      assert.equal(urls.length, 2);
      for (const u of urls) {
        assert.match(u.fileKey, /^fk_[A-Za-z0-9_-]{32}$/);
        const lifetime = Date.parse(u.expiresAt) - app.server.ctx.clock.now();
        assert.ok(lifetime > 2 * HOUR - 60_000 && lifetime <= 2 * HOUR, `expires in 2 hours, got ${lifetime} ms`);
        if (driver === 'local')
          assert.match(u.uploadUrl, /^http:\/\/forms\.test\/uploads\/fk_[^?]+\?expires=\d+&signature=/);
        else assert.ok(u.uploadUrl.startsWith(s3!.env.S3_ENDPOINT!), u.uploadUrl);
      }
      assert.equal((await put(urls[0]!.uploadUrl, one)).status, 200);
      assert.equal((await put(urls[1]!.uploadUrl, two)).status, 200);

      const created = await ok(
        submit([
          { id: ids.Files!, value: keys(urls[0]!.fileKey, urls[1]!.fileKey) },
          { id: ids.Note!, value: 'hi' },
        ]),
        'submit',
      );
      const entry = created.data.find((d: any) => d.field === ids.Files);
      assert.equal(entry.displayValue, 'one.bin, two.txt');
      assert.deepEqual(
        entry.value.map((f: any) => [f.name, f.size, f.fileKey, f.url]),
        [
          [
            'one.bin',
            700,
            urls[0]!.fileKey,
            `/api/v2025/submissions/${created.id}/upload?fieldId=${ids.Files}&index=0`,
          ],
          [
            'two.txt',
            1000,
            urls[1]!.fileKey,
            `/api/v2025/submissions/${created.id}/upload?fieldId=${ids.Files}&index=1`,
          ],
        ],
      );
      assert.equal(entry.value[1].contentType, 'text/plain');
      const read = await ok(a.get(`/submissions/${created.id}`), 'read');
      assert.deepEqual(
        read.data.find((d: any) => d.field === ids.Files),
        entry,
      );

      for (const [index, bytes, name] of [
        [0, one, 'one.bin'],
        [1, two, 'two.txt'],
      ] as const) {
        const res = await download(created.id, ids.Files!, index);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), 'application/octet-stream');
        assert.equal(res.headers.get('content-length'), String(bytes.length));
        assert.equal(res.headers.get('content-disposition'), `attachment; filename="${name}"`);
        assert.ok(Buffer.from(await res.arrayBuffer()).equals(bytes), `bytes of ${name}`);
      }
      // index defaults to 0, and the v2 path serves the same
      assert.ok(Buffer.from(await (await download(created.id, ids.Files!)).arrayBuffer()).equals(one));
      const legacy = await fetch(
        `${app.url}/api/v2/submissions/${created.id}/upload.json?fieldId=${ids.Files}&index=1`,
        { headers: { authorization: `Bearer ${a.token}` } },
      );
      assert.ok(Buffer.from(await legacy.arrayBuffer()).equals(two));
      // On S3 the submission keeps copies of the presigned uploads, whose objects go by a job.
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      assert.equal(stored().length, before + 2);
    });

    it('takes inline base64 uploads ({filename, content} and "name;base64") and signatures as PNG', async () => {
      const bytes = randomBytes(300);
      const legacy = randomBytes(10);
      const created = await ok(
        submit([
          {
            id: ids.Files!,
            value: {
              subvalues: [
                { subvalue: { filename: 'inline.bin', content: bytes.toString('base64') } },
                { subvalue: `old.txt;${legacy.toString('base64')}` },
              ],
            },
          },
          { id: ids.Sign!, value: `signature.png;${PNG.toString('base64')}` },
          {
            id: ids.Docs!,
            value: {
              subvalues: [{ subvalue: { filename: 'Überweisung “Mai”.pdf', content: bytes.toString('base64') } }],
            },
          },
        ]),
        'submit inline',
      );
      assert.equal(created.data.find((d: any) => d.field === ids.Files).displayValue, 'inline.bin, old.txt');
      assert.ok(Buffer.from(await (await download(created.id, ids.Files!, 0)).arrayBuffer()).equals(bytes));
      assert.ok(Buffer.from(await (await download(created.id, ids.Files!, 1)).arrayBuffer()).equals(legacy));
      assert.ok(Buffer.from(await (await download(created.id, ids.Sign!)).arrayBuffer()).equals(PNG));
      const named = await download(created.id, ids.Docs!);
      assert.equal(
        named.headers.get('content-disposition'),
        `attachment; filename="_berweisung _Mai_.pdf"; filename*=UTF-8''%C3%9Cberweisung%20%E2%80%9CMai%E2%80%9D.pdf`,
      );
      await named.arrayBuffer();
    });

    it("refuses bad upload-urls requests with 400 and other accounts' forms with 404", async () => {
      const post = (fieldId: number, body: unknown, acc = a, formId = form.id) =>
        acc.post(`/forms/${formId}/fields/${fieldId}/upload-urls`, body);
      const missing = await post(ids.Files!, {});
      assert.equal(missing.status, 400);
      assert.equal(missing.body.code, 'validation_failed');
      assert.equal((await post(ids.Files!, { filenames: [] })).status, 400);
      const tooMany = await post(ids.Files!, { filenames: ['a.txt', 'b.txt', 'c.txt'] });
      assert.equal(tooMany.status, 400);
      assert.equal(tooMany.body.code, 'too_many_files');
      assert.equal(
        (await post(ids.Docs!, { filenames: ['a.txt', 'b.txt'] })).body.code,
        'too_many_files',
        'default maxFiles is 1',
      );
      assert.equal((await post(ids.Sign!, { filenames: ['a.png', 'b.png'] })).body.code, 'too_many_files');
      const notFile = await post(ids.Note!, { filenames: ['a.txt'] });
      assert.equal(notFile.status, 400);
      assert.equal(notFile.body.code, 'not_a_file_field');
      for (const name of ['', '   ', 'dir/a.txt', 'dir\\a.txt', `${'x'.repeat(300)}.txt`, 'evil.exe', 'noextension']) {
        const res = await post(ids.Files!, { filenames: ['fine.txt', name] });
        assert.equal(res.status, 400, JSON.stringify(name));
        assert.equal(res.body.code, 'invalid_filename');
        assert.equal(res.body.details[0].property, 'body.filenames[1]');
      }
      assert.equal((await post(ids.Files!, { filenames: ['a.txt'] }, b)).status, 404, "another account's form");
      assert.equal((await post(999_999, { filenames: ['a.txt'] })).status, 404);
      const bForm = await ok(b.post('/forms', { name: 'B', fields: [FIELDS[0]] }), 'B form');
      assert.equal(
        (await post(bForm.fields[0].id, { filenames: ['a.txt'] })).status,
        404,
        "another account's field on my form",
      );
      assert.equal((await post(bForm.fields[0].id, { filenames: ['a.txt'] }, a, bForm.id)).status, 404);
    });

    it('refuses every bad file value with a 400 naming the field, and a failed create leaves its uploads usable', async () => {
      const good = await uploaded(ids.Files!, 'good.txt', Buffer.from('hello'));
      const content = (n: number) => randomBytes(n).toString('base64');

      assertRefused(
        await submit([
          {
            id: ids.Files!,
            value: { subvalues: [{ subvalue: good }, { subvalue: { filename: 'x.txt', content: content(5) } }] },
          },
        ]),
        0,
        'Files',
        /mixes fileKeys with inline uploads/,
      );
      assertRefused(
        await submit([{ id: ids.Files!, value: keys(`fk_${'A'.repeat(32)}`) }]),
        0,
        'Files',
        /unknown fileKey/,
      );
      assertRefused(await submit([{ id: ids.Files!, value: keys('not-a-key') }]), 0, 'Files', /unknown fileKey/);
      const elsewhere = await uploaded(other.fields[0].id, 'o.txt', Buffer.from('x'), other.id);
      assertRefused(await submit([{ id: ids.Files!, value: keys(elsewhere) }]), 0, 'Files', /belongs to another form/);
      const docKey = await uploaded(ids.Docs!, 'd.txt', Buffer.from('x'));
      assertRefused(await submit([{ id: ids.Files!, value: keys(docKey) }]), 0, 'Files', /issued for another field/);
      const [pending] = await issue(ids.Files!, ['later.txt']);
      assertRefused(
        await submit([{ id: ids.Files!, value: keys(pending!.fileKey) }]),
        0,
        'Files',
        /not been uploaded yet/,
      );
      const [k1, k2, k3] = await Promise.all(
        ['1.txt', '2.txt', '3.txt'].map((n) => uploaded(ids.Files!, n, Buffer.from(n))),
      );
      assertRefused(await submit([{ id: ids.Files!, value: keys(k1!, k2!, k3!) }]), 0, 'Files', /at most 2 files/);
      assertRefused(await submit([{ id: ids.Files!, value: keys(k1!, k1!) }]), 0, 'Files', /given twice/);
      assertRefused(
        await submit([
          { id: ids.Files!, value: { subvalues: [{ subvalue: { filename: 'big.bin', content: content(1001) } }] } },
        ]),
        0,
        'Files',
        /larger than this field allows \(1000 bytes\)/,
      );
      assertRefused(
        await submit([
          { id: ids.Files!, value: { subvalues: [{ subvalue: { filename: 'a.bin', content: 'not base64!' } }] } },
        ]),
        0,
        'Files',
        /not valid base64/,
      );
      assertRefused(
        await submit([{ id: ids.Files!, value: 'a.exe;AAAA' }]),
        0,
        'Files',
        /not one of the allowed types/,
      );
      assertRefused(
        await submit([
          { id: ids.Files!, value: { subvalues: [{ subvalue: { filename: 'a/b.txt', content: 'AAAA' } }] } },
        ]),
        0,
        'Files',
        /must not contain/,
      );
      assertRefused(
        await submit([{ id: ids.Files!, value: { subvalues: [{ subvalue: 42 }] } }]),
        0,
        'Files',
        /each file must be/,
      );
      assertRefused(await submit([{ id: ids.Sign!, value: `s.png;${content(50)}` }]), 0, 'Sign', /must be a PNG image/);
      const notPng = await uploaded(ids.Sign!, 'sig.png', Buffer.from('GIF89a not a png'));
      assertRefused(
        await submit([
          { id: ids.Note!, value: 'ok' },
          { id: ids.Sign!, value: keys(notPng) },
        ]),
        1,
        'Sign',
        /must be a PNG image/,
      );
      // Problems in several fields are all named.
      const both = await submit([
        { id: ids.Files!, value: keys('nope') },
        { id: ids.Sign!, value: 'x.png;AAAA' },
      ]);
      assert.deepEqual(
        both.body.details.map((d: any) => d.property),
        ['body.fields[0].value', 'body.fields[1].value'],
      );

      // Bytes over the limit through the bucket itself (S3) are removed when claimed.
      if (driver === 's3') {
        const [big] = await issue(ids.Files!, ['big.bin']);
        assert.equal((await put(big!.uploadUrl, randomBytes(1500))).status, 200, 'the bucket takes it');
        const key = s3!.objectKeys().find((k) => k.endsWith(big!.fileKey));
        assert.ok(key, 'the object is in the bucket');
        assertRefused(
          await submit([{ id: ids.Files!, value: keys(big!.fileKey) }]),
          0,
          'Files',
          /larger than this field allows/,
        );
        assert.ok(!s3!.objectKeys().includes(key), 'and is removed');

        // Only against the form as it is now: a create that first meets the definition kept
        // from before the limit was raised leaves the object for the limit of now.
        const raised = await ok(
          a.post('/forms', {
            name: 'Raised',
            fields: [{ type: 'file', label: 'F', attributes: { maxFileSize: 1000 } }],
          }),
          'a form with a limit of 1000 bytes',
        );
        const f = raised.fields[0].id as number;
        await ok(submit([], a, raised.id), 'a create that keeps the definition');
        await ok(a.put(`/forms/${raised.id}/fields/${f}`, { attributes: { maxFileSize: 2000 } }), 'raised to 2000');
        const [mid] = await issue(f, ['mid.bin'], raised.id);
        assert.equal((await put(mid!.uploadUrl, randomBytes(1500))).status, 200);
        await ok(submit([{ id: f, value: keys(mid!.fileKey) }], a, raised.id), 'within the raised limit');
      }

      // A create that fails for another field claims nothing: the same fileKey works afterwards.
      const failed = await submit([
        { id: ids.Files!, value: keys(good) },
        { id: ids.Note!, value: 'far too long' },
      ]);
      assert.equal(failed.status, 400);
      const created = await ok(submit([{ id: ids.Files!, value: keys(good) }]), 'reuse after a failed create');
      assertRefused(await submit([{ id: ids.Files!, value: keys(good) }]), 0, 'Files', /already been used/);
      // Another account cannot name A's fileKey, nor see that it exists.
      const bForm = await ok(b.post('/forms', { name: 'B files', fields: [FIELDS[0]] }), 'B form');
      assertRefused(
        await submit([{ id: bForm.fields[0].id, value: keys(k1!) }], b, bForm.id),
        0,
        'Files',
        /unknown fileKey/,
      );
      assert.equal((await download(created.id, ids.Files!, 0, b)).status, 404);
    });

    it('takes a fileKey until its URL expires, by the service clock', async () => {
      const key = await uploaded(ids.Files!, 'late.txt', Buffer.from('late'));
      const [unused] = await issue(ids.Files!, ['never.txt']);
      app.server.ctx.clock.advance(2 * HOUR + 1000);
      assertRefused(await submit([{ id: ids.Files!, value: keys(key) }]), 0, 'Files', /has expired/);
      if (driver === 'local') {
        const res = await put(unused!.uploadUrl, Buffer.from('too late'));
        assert.equal(res.status, 410);
        assert.equal((await json(res)).code, 'upload_url_expired');
      }
    });

    it('service upload URL: used once, checked signature, size limit enforced while streaming with nothing kept', async () => {
      const before = stored();
      const big = await serviceUpload(ids.Files!, 'big.bin');
      // Too large with Content-Length: refused before reading.
      const declared = await fetch(big.url, { method: 'PUT', body: randomBytes(5000) });
      assert.equal(declared.status, 413);
      assert.equal((await json(declared)).code, 'file_too_large');
      // Too large without Content-Length: refused while streaming.
      const streamed = await putChunked(big.url, randomBytes(5000));
      assert.equal(streamed.status, 413);
      assert.equal(streamed.body.code, 'file_too_large');
      assert.deepEqual(stored(), before, 'nothing kept: no object, no temporary file');
      // A refused upload gives the URL back; a complete one uses it up.
      const exact = randomBytes(1000);
      const done = await putChunked(big.url, exact);
      assert.equal(done.status, 200, JSON.stringify(done.body));
      assert.deepEqual(done.body, { fileKey: big.fileKey, size: 1000 });
      const again = await fetch(big.url, { method: 'PUT', body: Buffer.from('again') });
      assert.equal(again.status, 409);
      assert.equal((await json(again)).code, 'upload_url_used');

      const created = await ok(submit([{ id: ids.Files!, value: keys(big.fileKey) }]), 'submit service upload');
      assert.ok(Buffer.from(await (await download(created.id, ids.Files!)).arrayBuffer()).equals(exact));

      const fresh = await serviceUpload(ids.Files!, 'x.txt');
      const url = new URL(fresh.url);
      const badSignature = new URL(url);
      badSignature.searchParams.set('signature', 'A'.repeat(43));
      const later = new URL(url);
      later.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 3600));
      const otherKey = new URL(url);
      otherKey.pathname = `/uploads/fk_${'B'.repeat(32)}`;
      for (const u of [badSignature, later, otherKey]) {
        const res = await fetch(u, { method: 'PUT', body: Buffer.from('x') });
        assert.equal(res.status, 403, u.toString());
        assert.deepEqual(Object.keys(await json(res)).sort(), ['code', 'error', 'status']);
      }
      const noQuery = await fetch(`${app.url}${url.pathname}`, { method: 'PUT', body: Buffer.from('x') });
      assert.equal(noQuery.status, 400);
      // The signed expiry follows the service clock too.
      app.server.ctx.clock.advance(2 * HOUR);
      const expired = await fetch(fresh.url, { method: 'PUT', body: Buffer.from('x') });
      assert.equal(expired.status, 410);
    });

    it('refuses names with bidirectional or C1 controls and counts the length limit in characters, on every path', async () => {
      const bad: [string, RegExp][] = [
        ['invoice\u202etxt.exe', /bidirectional controls/],
        ...[
          '\u202a',
          '\u202b',
          '\u202c',
          '\u202d',
          '\u2066',
          '\u2067',
          '\u2068',
          '\u2069',
          '\u200e',
          '\u200f',
          '\u061c',
        ].map((c): [string, RegExp] => [`a${c}b.txt`, /bidirectional controls/]),
        ['a\u0085b.txt', /control characters/],
        ['a\u0080b.txt', /control characters/],
        ['a\u009fb.txt', /control characters/],
        [`${'😀'.repeat(252)}.txt`, /longer than 255 characters/],
      ];
      for (const [name, problem] of bad) {
        const res = await a.post(`/forms/${form.id}/fields/${ids.Files!}/upload-urls`, {
          filenames: ['fine.txt', name],
        });
        assert.equal(res.status, 400, JSON.stringify(name));
        assert.equal(res.body.code, 'invalid_filename');
        assert.equal(res.body.details[0].property, 'body.filenames[1]');
        assert.match(res.body.details[0].message, problem, JSON.stringify(name));
        assertRefused(
          await submit([{ id: ids.Files!, value: { subvalues: [{ subvalue: { filename: name, content: 'AAAA' } }] } }]),
          0,
          'Files',
          problem,
        );
        assertRefused(await submit([{ id: ids.Files!, value: `${name};AAAA` }]), 0, 'Files', problem);
        const hosted = await fetch(`${app.url}/f/${form.viewKey}/uploads`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ fieldId: ids.Files!, filenames: [name] }),
        });
        assert.equal(hosted.status, 400, `hosted page: ${JSON.stringify(name)}`);
        // The hosted route's schema caps names at 255 characters (code points) before the rule sees them.
        assert.equal((await json(hosted)).code, name.length > 255 ? 'validation_failed' : 'invalid_filename');
      }
      // 255 characters are fine however many UTF-16 units (200 emoji: 400) or bytes (800) they take.
      const emoji = `${'😀'.repeat(251)}.txt`;
      assert.equal([...emoji].length, 255);
      const [u] = await issue(ids.Files!, [emoji]);
      assert.equal(u!.filename, emoji);
      assert.equal((await put(u!.uploadUrl, Buffer.from('hi'))).status, 200);
      const viaKey = await ok(submit([{ id: ids.Files!, value: keys(u!.fileKey) }]), 'a name of 255 emoji characters');
      const inline = await ok(
        submit([{ id: ids.Files!, value: { subvalues: [{ subvalue: { filename: emoji, content: 'AAAA' } }] } }]),
        'inline, the same name',
      );
      for (const created of [viaKey, inline]) {
        const res = await download(created.id, ids.Files!);
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-disposition')!, /filename\*=UTF-8''(%F0%9F%98%80){251}\.txt$/);
        await res.arrayBuffer();
      }
      // Other non-ASCII marks stay fine: a zero-width joiner, Arabic, and a name from right-to-left text.
      await ok(
        a.post(`/forms/${form.id}/fields/${ids.Docs!}/upload-urls`, { filenames: ['👩‍💻 فاتورة.pdf'] }),
        'ordinary non-ASCII name',
      );
    });

    it('refuses an empty file both ways: inline, and PUT to an upload URL (which keeps nothing and stays usable)', async () => {
      assertRefused(
        await submit([{ id: ids.Files!, value: { subvalues: [{ subvalue: { filename: 'a.txt', content: '' } }] } }]),
        0,
        'Files',
        /^Files \(\d+\): a\.txt is empty$/,
      );
      let before = stored();
      if (driver === 'local') {
        const [u] = await issue(ids.Files!, ['a.txt']);
        for (const attempt of [
          () => put(u!.uploadUrl, Buffer.alloc(0)).then(async (r) => ({ status: r.status, body: await json(r) })),
          () => putChunked(reachable(u!.uploadUrl), Buffer.alloc(0)),
        ]) {
          const res = await attempt();
          assert.equal(res.status, 400, JSON.stringify(res.body));
          assert.equal(res.body.code, 'invalid_request');
          assert.equal(res.body.error, 'a.txt is empty');
          assert.deepEqual(res.body.details, [{ property: 'body', message: 'a.txt is empty' }]);
          assert.deepEqual(stored(), before, 'nothing kept: no object, no temporary file');
          assertRefused(
            await submit([{ id: ids.Files!, value: keys(u!.fileKey) }]),
            0,
            'Files',
            /not been uploaded yet/,
          );
        }
        // A refused upload gives the URL back: the file can then be sent.
        const done = await put(u!.uploadUrl, Buffer.from('now'));
        assert.equal(done.status, 200);
        await ok(submit([{ id: ids.Files!, value: keys(u!.fileKey) }]), 'the same URL after the refusal');
        before = stored();
      }
      // Through the service route with either driver (on S3 too), and a signature.
      for (const [fieldId, name] of [
        [ids.Files!, 'b.txt'],
        [ids.Sign!, 'sig.png'],
      ] as const) {
        const svc = await serviceUpload(fieldId, name);
        const res = await putChunked(svc.url, Buffer.alloc(0));
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(res.body.error, `${name} is empty`);
        assert.deepEqual(stored(), before, 'nothing kept');
      }
      // An encrypted form's uploads are sealed as they come in: an empty one is refused before
      // sealing (and a signature's before its PNG check), and the URL stays usable.
      const sealed = await ok(
        a.post('/forms', {
          name: 'Sealed',
          isEncrypted: true,
          encryptionPassword: 'correct horse battery staple',
          fields: [
            { type: 'file', label: 'F' },
            { type: 'signature', label: 'S' },
          ],
        }),
        'encrypted form',
      );
      for (const [i, name] of ['e.txt', 'e.png'].entries()) {
        const [u] = await issue(sealed.fields[i].id, [name], sealed.id);
        const res = await putChunked(reachable(u!.uploadUrl), Buffer.alloc(0));
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(res.body.error, `${name} is empty`);
        assert.deepEqual(stored(), before, 'nothing kept');
        assert.equal(
          (await put(u!.uploadUrl, i === 0 ? Buffer.from('now') : PNG)).status,
          200,
          'the URL is still usable',
        );
        before = stored();
      }
      // A presigned PUT goes straight to the bucket, which takes an empty object: the claim refuses it.
      if (driver === 's3') {
        const [u] = await issue(ids.Files!, ['c.txt']);
        assert.equal((await put(u!.uploadUrl, Buffer.alloc(0))).status, 200, 'the bucket takes it');
        assertRefused(await submit([{ id: ids.Files!, value: keys(u!.fileKey) }]), 0, 'Files', /c\.txt is empty$/);
        // S3 has no single use: the same URL takes the file afterwards.
        assert.equal((await put(u!.uploadUrl, Buffer.from('now'))).status, 200);
        await ok(submit([{ id: ids.Files!, value: keys(u!.fileKey) }]), 'the same URL after the refusal');
      }
    });

    it('keeps nothing of an upload the client breaks off, and gives its URL back', async () => {
      const before = stored();
      const up = await serviceUpload(ids.Docs!, 'broken.bin');
      const db = app.server.db.kysely;
      const state = async () =>
        (await db.selectFrom('uploads').select('state').where('file_key', '=', up.fileKey).executeTakeFirstOrThrow())
          .state;
      let sawReceiving = false;
      await new Promise<void>((resolve) => {
        const req = httpRequest(up.url, { method: 'PUT', headers: { 'content-length': '200000' } });
        req.on('error', () => undefined);
        req.write(randomBytes(50_000), () => {
          // Wait until the service is receiving, then go away mid-body.
          void (async () => {
            for (let i = 0; i < 400 && !sawReceiving; i++) {
              sawReceiving = (await state()) === 'receiving';
              if (!sawReceiving) await new Promise((r) => setTimeout(r, 10));
            }
            req.destroy();
            resolve();
          })();
        });
      });
      assert.ok(sawReceiving, 'the service was taking the bytes when the client went away');
      // The service notices in its own time; wait (bounded) for the upload to be given back.
      for (let i = 0; i < 400 && (await state()) !== 'issued'; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(await state(), 'issued');
      assert.deepEqual(stored(), before, 'no object, no temporary file');
      const res = await fetch(up.url, { method: 'PUT', body: Buffer.from('whole') });
      assert.equal(res.status, 200);
    });

    it('sweeps unclaimed uploads once their URL expired, and leaves claimed ones', async () => {
      await sweepExpiredUploads(app.server.ctx); // what earlier tests left to expire
      const kept = await uploaded(ids.Files!, 'kept.txt', Buffer.from('kept'));
      const created = await ok(submit([{ id: ids.Files!, value: keys(kept) }]), 'submit');
      const orphan = await uploaded(ids.Files!, 'orphan.txt', Buffer.from('orphan'));
      const [never] = await issue(ids.Files!, ['never.txt']);
      const db = app.server.db.kysely;
      const objectOf = async (fileKey: string) =>
        (await db.selectFrom('uploads').select('storage_key').where('file_key', '=', fileKey).executeTakeFirstOrThrow())
          .storage_key;
      const orphanObject = await objectOf(orphan);
      assert.ok(stored().includes(orphanObject));
      assert.equal(await sweepExpiredUploads(app.server.ctx), 0, 'nothing has expired yet');
      assert.ok(stored().includes(orphanObject));

      app.server.ctx.clock.advance(2 * HOUR + 1);
      assert.ok((await sweepExpiredUploads(app.server.ctx)) >= 2);
      const left = await db
        .selectFrom('uploads')
        .select(['file_key', 'state'])
        .where('file_key', 'in', [kept, orphan, never!.fileKey])
        .execute();
      assert.deepEqual(left, [{ file_key: kept, state: 'claimed' }]);
      assert.ok(!stored().includes(orphanObject), 'the orphan object is gone');
      assert.ok(Buffer.from(await (await download(created.id, ids.Files!)).arrayBuffer()).equals(Buffer.from('kept')));
      assert.equal(await sweepExpiredUploads(app.server.ctx), 0, 'idempotent');
    });

    it('has the worker sweep expired uploads by itself, as a recurring chore', async () => {
      const [u] = await issue(ids.Files!, ['chore.txt']);
      assert.equal((await put(u!.uploadUrl, Buffer.from('chore'))).status, 200);
      const db = app.server.db.kysely;
      const row = await db
        .selectFrom('uploads')
        .select('storage_key')
        .where('file_key', '=', u!.fileKey)
        .executeTakeFirstOrThrow();
      app.server.ctx.clock.advance(2 * HOUR + 1);
      // A fresh worker schedules its chores (uploads.sweep among them) and runs what is due.
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      assert.equal(
        (await db.selectFrom('uploads').select('file_key').where('file_key', '=', u!.fileKey).execute()).length,
        0,
      );
      assert.ok(!stored().includes(row.storage_key), 'its object is gone');
      const sweeps = await db.selectFrom('jobs').select('state').where('kind', '=', 'uploads.sweep').execute();
      assert.ok(sweeps.length >= 1 && sweeps.every((j) => j.state === 'done'), JSON.stringify(sweeps));
    });

    it('edit replaces files (removing the old ones from storage), keeps those sent again, and delete removes them all', async () => {
      const db = app.server.db.kysely;
      const objectOf = async (fileKey: string) =>
        (await db.selectFrom('uploads').select('storage_key').where('file_key', '=', fileKey).executeTakeFirstOrThrow())
          .storage_key;
      const first = await uploaded(ids.Files!, 'first.txt', Buffer.from('first'));
      const second = await uploaded(ids.Files!, 'second.txt', Buffer.from('second'));
      const created = await ok(
        submit([
          { id: ids.Files!, value: keys(first, second) },
          {
            id: ids.Sign!,
            value: { subvalues: [{ subvalue: { filename: 's.png', content: PNG.toString('base64') } }] },
          },
        ]),
        'submit',
      );
      const [firstObject, secondObject] = [await objectOf(first), await objectOf(second)];
      const signKey = created.data.find((d: any) => d.field === ids.Sign).value[0].fileKey;
      const signObject = await objectOf(signKey);

      const third = await uploaded(ids.Files!, 'third.txt', Buffer.from('third'));
      const edited = await ok(
        a.put(`/submissions/${created.id}`, { fields: [{ id: ids.Files!, value: keys(second, third) }] }),
        'edit',
      );
      assert.equal(edited.data.find((d: any) => d.field === ids.Files).displayValue, 'second.txt, third.txt');
      // Objects are removed by a job enqueued with the change: run what is due, as a worker would.
      assert.ok(stored().includes(firstObject), 'kept until the job runs');
      assert.ok((await createWorker(app.server.ctx, { kinds: jobKinds }).runDue()) >= 1);
      assert.ok(!stored().includes(firstObject), 'the replaced file is removed');
      assert.ok(stored().includes(secondObject), 'the file sent again stays');
      assert.equal(Buffer.from(await (await download(created.id, ids.Files!, 1)).arrayBuffer()).toString(), 'third');
      // Another submission cannot take a file this one holds.
      assertRefused(await submit([{ id: ids.Files!, value: keys(second) }]), 0, 'Files', /already been used/);

      const thirdObject = await objectOf(third);
      await ok(a.delete(`/submissions/${created.id}`), 'delete');
      assert.ok((await createWorker(app.server.ctx, { kinds: jobKinds }).runDue()) >= 1);
      for (const key of [secondObject, thirdObject, signObject])
        assert.ok(!stored().includes(key), `${key} is removed`);
      assert.equal(
        (await db.selectFrom('uploads').select('file_key').where('submission_id', '=', created.id).execute()).length,
        0,
      );
      assert.equal((await download(created.id, ids.Files!)).status, 404);
    });

    it('removes what a presigned URL PUTs again after its file was let go (edit, delete), once the URL expires', async (t) => {
      if (driver !== 's3') return t.skip("presigned URLs are the S3 driver's");
      const db = app.server.db.kysely;
      const [first, second] = await issue(ids.Files!, ['first.txt', 'second.txt']);
      const [third] = await issue(ids.Files!, ['third.txt']);
      for (const u of [first, second, third])
        assert.equal((await put(u!.uploadUrl, Buffer.from(u!.filename))).status, 200);
      const objectOf = async (fileKey: string) =>
        (await db.selectFrom('uploads').select('storage_key').where('file_key', '=', fileKey).executeTakeFirstOrThrow())
          .storage_key;
      const objects = [await objectOf(first!.fileKey), await objectOf(second!.fileKey), await objectOf(third!.fileKey)];
      const created = await ok(submit([{ id: ids.Files!, value: keys(first!.fileKey, second!.fileKey) }]), 'submit');
      await ok(
        a.put(`/submissions/${created.id}`, {
          fields: [{ id: ids.Files!, value: keys(second!.fileKey, third!.fileKey) }],
        }),
        'edit',
      );
      await ok(a.delete(`/submissions/${created.id}`), 'delete');
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      for (const key of objects) assert.ok(!stored().includes(key), `${key} is removed with its row`);
      // The bucket still takes a PUT to each URL until it expires: no row names what it makes.
      for (const u of [first, second, third]) assert.equal((await put(u!.uploadUrl, Buffer.from('again'))).status, 200);
      for (const key of objects) assert.ok(stored().includes(key), `${key} is made again`);
      app.server.ctx.clock.advance(2 * HOUR + 15 * 60 * 1000 + 1000);
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      for (const key of objects) assert.ok(!stored().includes(key), `${key} is removed once its URL expired`);
    });

    it('serves the file checked at submit: a PUT to its presigned URL afterwards changes nothing served', async (t) => {
      if (driver !== 's3') return t.skip("presigned URLs are the S3 driver's");
      const db = app.server.db.kysely;
      const objectOf = async (fileKey: string) =>
        (await db.selectFrom('uploads').select('storage_key').where('file_key', '=', fileKey).executeTakeFirstOrThrow())
          .storage_key;
      const [file] = await issue(ids.Files!, ['kept.bin']);
      const [sign] = await issue(ids.Sign!, ['kept.png']);
      const bytes = randomBytes(600);
      assert.equal((await put(file!.uploadUrl, bytes)).status, 200);
      assert.equal((await put(sign!.uploadUrl, PNG)).status, 200);
      const urlKeys = [await objectOf(file!.fileKey), await objectOf(sign!.fileKey)];
      const created = await ok(
        submit([
          { id: ids.Files!, value: keys(file!.fileKey) },
          { id: ids.Sign!, value: keys(sign!.fileKey) },
        ]),
        'submit',
      );
      const servedAsChecked = async (when: string) => {
        const fileRes = await download(created.id, ids.Files!);
        assert.equal(fileRes.headers.get('content-length'), String(bytes.length), `the file's length ${when}`);
        assert.ok(Buffer.from(await fileRes.arrayBuffer()).equals(bytes), `the file's bytes ${when}`);
        const signRes = await download(created.id, ids.Sign!);
        assert.ok(Buffer.from(await signRes.arrayBuffer()).equals(PNG), `the signature's bytes ${when}`);
        const read = await ok(a.get(`/submissions/${created.id}`), 'read');
        assert.equal(read.data.find((d: any) => d.field === ids.Files).value[0].size, bytes.length);
      };
      await servedAsChecked('after the submit');

      // S3 cannot revoke a presigned URL: until it expires the bucket takes a PUT to it, over the
      // field's size limit or not a PNG.
      assert.equal((await put(file!.uploadUrl, randomBytes(5000))).status, 200);
      assert.equal((await put(sign!.uploadUrl, Buffer.from('not a png at all'))).status, 200);
      await servedAsChecked('after a PUT to the upload URL');
      const keptKeys = [await objectOf(file!.fileKey), await objectOf(sign!.fileKey)];
      for (const [i, key] of keptKeys.entries()) {
        assert.notEqual(key, urlKeys[i], 'the submission holds an object of its own');
        assert.ok(stored().includes(key), `${key} is stored`);
      }

      // The URL's object goes once the submission is in (a job), and what is PUT again goes once the URL expired.
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      for (const key of urlKeys) assert.ok(!stored().includes(key), `${key} is removed after the submit`);
      for (const u of [file, sign]) assert.equal((await put(u!.uploadUrl, Buffer.from('again'))).status, 200);
      for (const key of urlKeys) assert.ok(stored().includes(key), `${key} is made again`);
      await servedAsChecked('after a PUT once the upload was removed');
      app.server.ctx.clock.advance(2 * HOUR + 15 * 60 * 1000 + 1000);
      await createWorker(app.server.ctx, { kinds: jobKinds }).runDue();
      for (const key of urlKeys) assert.ok(!stored().includes(key), `${key} is removed once its URL expired`);
      for (const key of keptKeys) assert.ok(stored().includes(key), `${key} stays`);
      await servedAsChecked('once the URL expired');
    });

    it('checks the copy it keeps: a PUT to the URL between the check and the copy refuses the edit, keeping nothing', async (t) => {
      if (driver !== 's3') return t.skip("presigned URLs are the S3 driver's");
      const created = await ok(submit([{ id: ids.Note!, value: 'x' }]), 'submit');
      const [file] = await issue(ids.Files!, ['race.bin']);
      const [sign] = await issue(ids.Sign!, ['race.png']);
      const bytes = randomBytes(100);
      assert.equal((await put(file!.uploadUrl, bytes)).status, 200);
      assert.equal((await put(sign!.uploadUrl, PNG)).status, 200);
      // Between the submission's check of each object and its copy, the client PUTs other bytes:
      // a file of another size (within the limit), and a signature of the same size that is no PNG.
      const storage = app.server.ctx.storage;
      const copy = storage.copy.bind(storage);
      const swaps = new Map([
        [file!.fileKey, { url: file!.uploadUrl, bytes: randomBytes(900) }],
        [sign!.fileKey, { url: sign!.uploadUrl, bytes: Buffer.alloc(PNG.length, 'x') }],
      ]);
      storage.copy = async (from, to) => {
        const swap = swaps.get(from.split('/').pop()!);
        if (swap) assert.equal((await put(swap.url, swap.bytes)).status, 200);
        return copy(from, to);
      };
      let res: Reply;
      try {
        res = await a.put(`/submissions/${created.id}`, {
          fields: [
            { id: ids.Files!, value: keys(file!.fileKey) },
            { id: ids.Sign!, value: keys(sign!.fileKey) },
          ],
        });
      } finally {
        storage.copy = copy;
      }
      assertRefused(res, 0, 'Files', /race\.bin changed while the submission was checked; send it again$/);
      assertRefused(res, 1, 'Sign', /must be a PNG image/);
      for (const u of [file, sign])
        assert.ok(!stored().some((key) => key.includes(`${u!.fileKey}-`)), `no copy of ${u!.filename} is kept`);

      // The uploads stay usable: what their URLs hold when the edit is sent again is checked and kept.
      assert.equal((await put(sign!.uploadUrl, PNG)).status, 200);
      const edited = await ok(
        a.put(`/submissions/${created.id}`, {
          fields: [
            { id: ids.Files!, value: keys(file!.fileKey) },
            { id: ids.Sign!, value: keys(sign!.fileKey) },
          ],
        }),
        'edit',
      );
      assert.equal(edited.data.find((d: any) => d.field === ids.Files).value[0].size, 900);
      const served = Buffer.from(await (await download(created.id, ids.Files!)).arrayBuffer());
      assert.ok(served.equals(swaps.get(file!.fileKey)!.bytes), 'the bytes its URL held when the edit was sent again');
      assert.ok(Buffer.from(await (await download(created.id, ids.Sign!)).arrayBuffer()).equals(PNG));
    });

    it('answers 404 with the JSON error body for no such submission, field value or file', async () => {
      const key = await uploaded(ids.Files!, 'one.txt', Buffer.from('one'));
      const created = await ok(
        submit([
          { id: ids.Files!, value: keys(key) },
          { id: ids.Note!, value: 'x' },
        ]),
        'submit',
      );
      for (const [submissionId, fieldId, index] of [
        [created.id, ids.Files!, 1],
        [created.id, ids.Docs!, 0],
        [created.id, ids.Note!, 0],
        [created.id, 999_999, 0],
        [999_999, ids.Files!, 0],
      ] as const) {
        const res = await download(submissionId, fieldId, index);
        assert.equal(res.status, 404, `${submissionId} ${fieldId} ${index}`);
        const body = await json(res);
        assert.equal(body.status, 'error');
      }
      assert.equal((await download(created.id, ids.Files!, 0, b)).status, 404, "another account's submission");
      const badIndex = await download(created.id, ids.Files!, -1);
      assert.equal(badIndex.status, 400);
    });

    it("answers 404 for a deleted field's file, as every read hides the field's values", async () => {
      const other = await ok(
        a.post('/forms', { name: 'Deleted file field', fields: [{ type: 'file', label: 'Scan' }] }),
        'form',
      );
      const fieldId = other.fields[0].id as number;
      const key = await uploaded(fieldId, 'scan.txt', Buffer.from('kept out'), other.id);
      const created = await ok(submit([{ id: fieldId, value: keys(key) }], a, other.id), 'submit');
      assert.equal((await download(created.id, fieldId, 0)).status, 200);
      await ok(a.delete(`/forms/${other.id}/fields/${fieldId}`), 'delete the field');
      const res = await download(created.id, fieldId, 0);
      assert.equal(res.status, 404);
      assert.equal((await json(res)).code, 'file_not_found');
      const v2 = await app.request('GET', `/api/v2/download/${created.id}/${fieldId}`, { token: a.token });
      assert.equal(v2.status, 404, 'the v2 download too');
    });
  });
}

describe(`JSON body limit (${dialectName})`, () => {
  it('answers 413 with the JSON error body, also for a submission with an inline upload', async () => {
    const small = await startTestApp({ BODY_LIMIT: '2048' });
    try {
      const acc = await small.account();
      const f = await ok(acc.post('/forms', { name: 'Limits', fields: [FIELDS[1]] }), 'form');
      const res = await acc.post(`/forms/${f.id}/submissions`, {
        fields: [{ id: f.fields[0].id, value: `big.bin;${randomBytes(3000).toString('base64')}` }],
      });
      assert.equal(res.status, 413);
      assert.deepEqual(res.body, {
        status: 'error',
        error: 'The request body is larger than this service accepts',
        code: 'payload_too_large',
      });
      // The upload URL route takes far more than BODY_LIMIT.
      const urls = await ok(
        acc.post(`/forms/${f.id}/fields/${f.fields[0].id}/upload-urls`, { filenames: ['big.bin'] }),
        'urls',
      );
      const url = urls.uploads[0].uploadUrl.replace(small.config.publicUrl, small.url);
      const put = await fetch(url, { method: 'PUT', body: randomBytes(100_000) });
      assert.equal(put.status, 200);
    } finally {
      await small.close();
    }
  });
});
