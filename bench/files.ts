/**
 * The file section of npm run bench (alone: npm run bench -- files): upload and download
 * throughput of one large file on each storage driver, with the service's peak memory.
 *
 * Each row runs on a fresh service child (SQLite), so that its peak RSS (VmHWM) belongs to
 * that row alone: a file field, an upload URL per round, a PUT of the file to it, a
 * submission claiming it, then GET /submissions/{id}/upload read to the end. Rows:
 * - local: PUT to the service's own signed URL, which streams it to disk;
 * - s3, presigned: PUT straight to the bucket (s3rver in this process), download through the service;
 * - s3, through the service: the same upload switched to the service URL (as encrypted forms
 *   will be), which streams it to the bucket as a multipart upload.
 * A second, larger file on each service path shows that peak memory does not follow file size.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { signedUploadPath } from '../src/modules/uploads/signing.js';
import { startS3, type TestS3 } from '../test/support/s3.js';
import { API } from './seed.js';

const MB = 1024 * 1024;
const ROUNDS = 3;
const SECRET_KEY = randomBytes(32).toString('hex');

export interface FileService {
  url: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

export interface FileBenchDeps {
  log(message: string): void;
  /** A fresh service child on DATA_DIR's SQLite file with these settings, and a token of its bench account. */
  startService(
    name: string,
    env: Record<string, string>,
  ): Promise<{ service: FileService; token: string; dataDir: string }>;
}

export interface FileRow {
  name: string;
  bytes: number;
  uploadMBs: number;
  downloadMBs: number;
  /** VmHWM after start-up and one small upload and download. */
  baselineMiB: number;
  /** VmHWM at the end of the row. */
  peakMiB: number;
}

function hwmMiB(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const kb = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return kb ? Number(kb) / 1024 : Number.NaN;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Run {
  name: string;
  sizeMB: number;
  s3: boolean;
  /** Switch each upload to the service URL (S3 driver). */
  throughService: boolean;
  /** An encrypted form: files are sealed on the way in and opened on the way out. */
  encrypted?: boolean;
}

const PASSWORD = 'bench encryption password';

async function must<T>(res: Response, what: string): Promise<T> {
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${what}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

async function runOne(deps: FileBenchDeps, run: Run, s3: TestS3 | undefined): Promise<FileRow> {
  const env: Record<string, string> = { SECRET_KEY, ...(run.s3 ? s3!.env : {}) };
  const { service, token, dataDir } = await deps.startService(`service (${run.name}, ${run.sizeMB} MB)`, env);
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  try {
    const form = await must<{ id: number; fields: { id: number }[] }>(
      await fetch(`${service.url}${API}/forms`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({
          name: 'Bench files',
          ...(run.encrypted && { isEncrypted: true, encryptionPassword: PASSWORD }),
          fields: [{ type: 'file', label: 'File', attributes: { maxFileSize: 200 * MB } }],
        }),
      }),
      'create form',
    );
    const fieldId = form.fields[0]!.id;
    const db = new Database(join(dataDir, 'formwork.db'));

    /** Uploads one file and claims it with a submission; returns the seconds the PUT took and the submission id. */
    const roundTrip = async (bytes: Buffer, i: number): Promise<{ seconds: number; submissionId: number }> => {
      const { uploads } = await must<{ uploads: { fileKey: string; uploadUrl: string }[] }>(
        await fetch(`${service.url}${API}/forms/${form.id}/fields/${fieldId}/upload-urls`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ filenames: [`file-${i}.bin`] }),
        }),
        'upload-urls',
      );
      const { fileKey } = uploads[0]!;
      let url = uploads[0]!.uploadUrl;
      if (!run.s3 || run.throughService || run.encrypted) {
        // The service's URL names PUBLIC_URL; the child listens on its own port.
        if (run.throughService && !run.encrypted) {
          db.prepare("update uploads set via = 'service' where file_key = ?").run(fileKey);
          const { expires_at } = db.prepare('select expires_at from uploads where file_key = ?').get(fileKey) as {
            expires_at: number;
          };
          url = `${service.url}${signedUploadPath(SECRET_KEY, fileKey, Math.floor(expires_at / 1000))}`;
        } else {
          url = `${service.url}${new URL(url).pathname}${new URL(url).search}`;
        }
      }
      const start = performance.now();
      const put = await fetch(url, { method: 'PUT', body: bytes });
      await put.arrayBuffer();
      const seconds = (performance.now() - start) / 1000;
      if (put.status !== 200) throw new Error(`PUT ${run.name}: ${put.status}`);
      const created = await must<{ id: number }>(
        await fetch(`${service.url}${API}/forms/${form.id}/submissions`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ fields: [{ id: fieldId, value: { subvalues: [{ subvalue: fileKey }] } }] }),
        }),
        'submit',
      );
      return { seconds, submissionId: created.id };
    };

    const downloadSeconds = async (submissionId: number, expected: number): Promise<number> => {
      const start = performance.now();
      const headers: Record<string, string> = {
        authorization: auth.authorization,
        ...(run.encrypted && { 'x-formwork-encryption-password': PASSWORD }),
      };
      const res = await fetch(`${service.url}${API}/submissions/${submissionId}/upload?fieldId=${fieldId}`, {
        headers,
      });
      if (res.status !== 200 || !res.body) throw new Error(`download ${run.name}: ${res.status}`);
      let got = 0;
      for await (const chunk of res.body) got += (chunk as Uint8Array).byteLength;
      if (got !== expected) throw new Error(`download ${run.name}: ${got} bytes, expected ${expected}`);
      return (performance.now() - start) / 1000;
    };

    // Warm-up: one small file both ways; the peak after it is the service's own baseline.
    const small = await roundTrip(randomBytes(64 * 1024), 0);
    await downloadSeconds(small.submissionId, 64 * 1024);
    const baselineMiB = hwmMiB(service.pid);

    const file = randomBytes(run.sizeMB * MB);
    const ups: number[] = [];
    const downs: number[] = [];
    for (let i = 1; i <= ROUNDS; i++) {
      const { seconds, submissionId } = await roundTrip(file, i);
      ups.push(seconds);
      downs.push(await downloadSeconds(submissionId, file.length));
    }
    db.close();
    const row = {
      name: run.name,
      bytes: file.length,
      uploadMBs: file.length / MB / median(ups),
      downloadMBs: file.length / MB / median(downs),
      baselineMiB,
      peakMiB: hwmMiB(service.pid),
    };
    deps.log(
      `${run.name}, ${run.sizeMB} MB: upload ${row.uploadMBs.toFixed(0)} MB/s, download ${row.downloadMBs.toFixed(0)} MB/s, peak RSS ${row.peakMiB.toFixed(0)} MiB`,
    );
    return row;
  } finally {
    await service.stop();
  }
}

export async function runFileBench(deps: FileBenchDeps, sizeMB: number, largeMB: number): Promise<FileRow[]> {
  const s3 = await startS3();
  try {
    const runs: Run[] = [
      { name: 'local disk (service URL)', sizeMB, s3: false, throughService: false },
      { name: 'local disk (service URL)', sizeMB: largeMB, s3: false, throughService: false },
      { name: 'S3 (presigned PUT to s3rver)', sizeMB, s3: true, throughService: false },
      { name: 'S3 (service URL, multipart)', sizeMB, s3: true, throughService: true },
      { name: 'S3 (service URL, multipart)', sizeMB: largeMB, s3: true, throughService: true },
      { name: 'local disk, encrypted form (sealed)', sizeMB, s3: false, throughService: false, encrypted: true },
      {
        name: 'local disk, encrypted form (sealed)',
        sizeMB: largeMB,
        s3: false,
        throughService: false,
        encrypted: true,
      },
      { name: 'S3, encrypted form (sealed, multipart)', sizeMB, s3: true, throughService: true, encrypted: true },
    ];
    const rows: FileRow[] = [];
    for (const run of runs) rows.push(await runOne(deps, run, s3));
    return rows;
  } finally {
    await s3.close();
  }
}

export function fileTable(rows: FileRow[]): string {
  const lines = [
    '| storage, upload path | file | upload MB/s | download MB/s | service peak RSS | of which start-up |',
    '|---|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.name} | ${(r.bytes / MB).toFixed(0)} MB | ${r.uploadMBs.toFixed(0)} | ${r.downloadMBs.toFixed(0)} | ${r.peakMiB.toFixed(0)} MiB | ${r.baselineMiB.toFixed(0)} MiB |`,
    );
  }
  return lines.join('\n');
}
