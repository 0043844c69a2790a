import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker } from '../src/jobs/worker.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { bytesUnder } from './support/disk.js';
import { startS3, type TestS3 } from './support/s3.js';
import { ok } from './support/submission-fixtures.js';

const PASSWORD = 'files are sealed too';
const withPassword = { headers: { 'x-formwork-encryption-password': PASSWORD } };
const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.from('Signature-Ink-Bytes-5521')]);
/** Contents distinctive enough that finding one in storage means it was stored in the clear. */
const UPLOADED = Buffer.from('Uploaded-Contents-Narwhal-9130 '.repeat(40));
const INLINE = Buffer.from('Inline-Contents-Axolotl-2274 '.repeat(40));

for (const driver of ['local', 's3'] as const) {
  describe(`encrypted forms' files (${driver} storage, ${dialectName})`, () => {
    let app: TestApp;
    let s3: TestS3 | undefined;
    let a: TestAccount;
    let form: any;
    let ids: Record<string, number>;

    before(async () => {
      if (driver === 's3') s3 = await startS3();
      app = await startTestApp(s3?.env ?? {});
      a = await app.account();
      form = await ok(
        a.post('/forms', {
          name: 'Sealed files',
          isEncrypted: true,
          encryptionPassword: PASSWORD,
          fields: [
            { type: 'file', label: 'Docs', attributes: { maxFiles: 2 } },
            { type: 'signature', label: 'Sign' },
          ],
        }),
        'form',
      );
      ids = Object.fromEntries(form.fields.map((f: any) => [f.label, f.id]));
    });
    after(async () => {
      await app?.close();
      await s3?.close();
    });

    const reachable = (url: string) =>
      url.startsWith(app.config.publicUrl) ? app.url + url.slice(app.config.publicUrl.length) : url;
    const issue = async (fieldId: number, name: string) =>
      (await ok(a.post(`/forms/${form.id}/fields/${fieldId}/upload-urls`, { filenames: [name] }), 'upload-urls'))
        .uploads[0];
    const put = (url: string, bytes: Buffer) => fetch(reachable(url), { method: 'PUT', body: bytes });
    const storedBytes = () => bytesUnder(s3 ? s3.directory : join(app.config.dataDir, 'files'));

    it('sends uploads through the service, seals them on the way in, and opens them only with the password', async () => {
      const upload = await issue(ids.Docs!, 'scan.txt');
      // Even with the S3 driver: a presigned PUT would land the bytes in the bucket in the clear.
      assert.ok(upload.uploadUrl.startsWith(`${app.config.publicUrl}/uploads/`), upload.uploadUrl);
      assert.equal((await put(upload.uploadUrl, UPLOADED)).status, 200);

      const created = await ok(
        a.post(`/forms/${form.id}/submissions`, {
          fields: [
            { id: ids.Docs, value: { subvalues: [{ subvalue: upload.fileKey }] } },
            {
              id: ids.Sign,
              value: { subvalues: [{ subvalue: { filename: 'sign.png', content: PNG.toString('base64') } }] },
            },
          ],
        }),
        'submit',
      );
      const path = `/submissions/${created.id}/upload?fieldId=${ids.Docs}`;
      const refused = await a.get(path);
      assert.equal(refused.status, 401);
      assert.equal(refused.body.code, 'encryption_password_required');
      assert.equal(
        (await a.get(path, { headers: { 'x-formwork-encryption-password': 'not the password' } })).status,
        401,
      );
      const res = await fetch(`${app.url}/api/v2025${path}`, {
        headers: { authorization: `Bearer ${a.token}`, ...withPassword.headers },
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-length'), String(UPLOADED.length));
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), UPLOADED);
      const sign = await fetch(`${app.url}/api/v2025/submissions/${created.id}/upload?fieldId=${ids.Sign}`, {
        headers: { authorization: `Bearer ${a.token}`, ...withPassword.headers },
      });
      assert.deepEqual(Buffer.from(await sign.arrayBuffer()), PNG);
    });

    it('sends nothing of a sealed file that was altered in storage', async () => {
      const upload = await issue(ids.Docs!, 'altered.txt');
      assert.equal((await put(upload.uploadUrl, UPLOADED)).status, 200);
      const created = await ok(
        a.post(`/forms/${form.id}/submissions`, {
          fields: [{ id: ids.Docs, value: { subvalues: [{ subvalue: upload.fileKey }] } }],
        }),
        'submit',
      );
      const row = await app.server.db.kysely
        .selectFrom('uploads')
        .select('storage_key')
        .where('file_key', '=', upload.fileKey)
        .executeTakeFirstOrThrow();
      const path = s3
        ? join(s3.directory, s3.bucket, `${row.storage_key}._S3rver_object`)
        : join(app.config.dataDir, 'files', row.storage_key);
      const bytes = readFileSync(path);
      bytes[bytes.length - 100]! ^= 1; // one bit of the ciphertext, near the end
      writeFileSync(path, bytes);
      const res = await a.get(`/submissions/${created.id}/upload?fieldId=${ids.Docs}`, withPassword);
      assert.equal(res.status, 500);
      assert.equal(res.body.code, 'file_integrity_failed');
    });

    it('seals inline files, and stores no file content in the clear', async () => {
      await ok(
        a.post(`/forms/${form.id}/submissions`, {
          fields: [
            {
              id: ids.Docs,
              value: { subvalues: [{ subvalue: { filename: 'inline.txt', content: INLINE.toString('base64') } }] },
            },
          ],
        }),
        'inline submit',
      );
      const bytes = storedBytes();
      assert.ok(bytes.length > UPLOADED.length, 'read the stored objects');
      for (const secret of [UPLOADED, INLINE, PNG])
        assert.ok(
          !bytes.includes(secret.subarray(0, 24).toString('latin1')),
          `${secret.subarray(0, 24).toString()} is stored in the clear`,
        );
    });

    it('checks a sealed signature for PNG as it arrives', async () => {
      const upload = await issue(ids.Sign!, 'sign.png');
      const res = await put(upload.uploadUrl, Buffer.from('not a png at all, just text'));
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as { code: string }).code, 'not_png');
    });

    it('refuses, at claim, an upload made before the form was encrypted', async () => {
      const plain = await ok(
        a.post('/forms', { name: 'Later sealed', fields: [{ type: 'file', label: 'F' }] }),
        'plain form',
      );
      const fieldId = plain.fields[0].id;
      const early = (
        await ok(a.post(`/forms/${plain.id}/fields/${fieldId}/upload-urls`, { filenames: ['early.txt'] }), 'urls')
      ).uploads[0];
      assert.equal((await put(early.uploadUrl, Buffer.from('early'))).status, 200);
      await ok(a.put(`/forms/${plain.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'turn on');
      const res = await a.post(`/forms/${plain.id}/submissions`, {
        fields: [{ id: fieldId, value: { subvalues: [{ subvalue: early.fileKey }] } }],
      });
      assert.equal(res.status, 400);
      assert.match(res.body.details[0].message, /before this form's encryption changed/);
    });

    it('seals and opens the files of existing submissions when encryption is turned on and off', async () => {
      const plain = await ok(
        a.post('/forms', { name: 'Convert files', fields: [{ type: 'file', label: 'F' }] }),
        'plain form',
      );
      const fieldId = plain.fields[0].id;
      const content = Buffer.from('Convertible-Contents-Pangolin-6610 '.repeat(30));
      const created = await ok(
        a.post(`/forms/${plain.id}/submissions`, {
          fields: [
            {
              id: fieldId,
              value: { subvalues: [{ subvalue: { filename: 'c.txt', content: content.toString('base64') } }] },
            },
          ],
        }),
        'submit',
      );
      const needle = content.subarray(0, 30).toString('latin1');
      // s3rver answers a PUT once it has read the bytes, and writes them to its disk after: a CI
      // run on a busy machine read its directory in between. Waited for, within 10 s.
      for (let i = 0; i < 200 && !storedBytes().includes(needle); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(storedBytes().includes(needle), 'stored in the clear while the form is plain');
      const download = (headers: Record<string, string> = {}) =>
        fetch(`${app.url}/api/v2025/submissions/${created.id}/upload?fieldId=${fieldId}`, {
          headers: { authorization: `Bearer ${a.token}`, ...headers },
        });

      await ok(a.put(`/forms/${plain.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'turn on');
      // Run the conversion and the removal of the plain copies, as the worker would.
      while ((await createWorker(app.server.ctx, { kinds: jobKinds }).runDue()) > 0);
      assert.equal((await ok(a.get(`/forms/${plain.id}`))).encryptionState, null);
      assert.ok(!storedBytes().includes(needle), 'no plain copy is left');
      assert.equal((await download()).status, 401);
      assert.deepEqual(Buffer.from(await (await download(withPassword.headers)).arrayBuffer()), content);

      await ok(a.put(`/forms/${plain.id}`, { isEncrypted: false, encryptionPassword: PASSWORD }), 'turn off');
      while ((await createWorker(app.server.ctx, { kinds: jobKinds }).runDue()) > 0);
      const after = await ok(a.get(`/forms/${plain.id}`));
      assert.equal(after.isEncrypted, false);
      assert.deepEqual(Buffer.from(await (await download()).arrayBuffer()), content, 'plain again, no password needed');
    });

    it("seals a presigned upload's kept copy, which a PUT to its URL after the submit does not reach", async (t) => {
      if (driver !== 's3') return t.skip("presigned URLs are the S3 driver's");
      const plain = await ok(
        a.post('/forms', { name: 'Presigned, then sealed', fields: [{ type: 'file', label: 'F' }] }),
        'plain form',
      );
      const fieldId = plain.fields[0].id;
      const upload = (
        await ok(a.post(`/forms/${plain.id}/fields/${fieldId}/upload-urls`, { filenames: ['p.txt'] }), 'urls')
      ).uploads[0];
      assert.ok(upload.uploadUrl.startsWith(s3!.env.S3_ENDPOINT!), 'a presigned URL');
      assert.equal((await put(upload.uploadUrl, UPLOADED)).status, 200);
      const created = await ok(
        a.post(`/forms/${plain.id}/submissions`, {
          fields: [{ id: fieldId, value: { subvalues: [{ subvalue: upload.fileKey }] } }],
        }),
        'submit',
      );
      await ok(a.put(`/forms/${plain.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 'turn on');
      while ((await createWorker(app.server.ctx, { kinds: jobKinds }).runDue()) > 0);
      assert.equal((await ok(a.get(`/forms/${plain.id}`))).encryptionState, null);
      assert.equal((await put(upload.uploadUrl, Buffer.from('other bytes, PUT after the submit'))).status, 200);
      const res = await fetch(`${app.url}/api/v2025/submissions/${created.id}/upload?fieldId=${fieldId}`, {
        headers: { authorization: `Bearer ${a.token}`, ...withPassword.headers },
      });
      assert.equal(res.status, 200);
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), UPLOADED);
    });
  });
}
