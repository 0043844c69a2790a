/**
 * The document-merge section (`npm run bench -- docmerge`): documents generated per second by
 * one `formwork worker` process, for a one-page DOCX and a one-page fillable PDF, with the
 * worker's peak RSS.
 *
 * For each template: a service child without a worker (`serve --no-worker`) takes
 * BENCH_DOCMERGE_COUNT submissions of a 5-field form whose integration uses the template, so
 * that their generation jobs wait in the outbox; then a worker process is started on the same
 * database and timed until every document exists. The rate is counted between the first and
 * the last document made (the worker's start-up is left out; the wall time includes it). One
 * document of each run is downloaded and opened to check that the values were merged.
 */
import Database from 'better-sqlite3';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import PizZip from 'pizzip';
import { makeDocx } from '../test/support/docmerge-templates.js';

export interface DocmergeRow {
  template: string;
  documents: number;
  perSecond: number;
  wallSeconds: number;
  averageBytes: number;
  workerPeak: string;
}

export interface DocmergeHooks {
  log: (line: string) => void;
  /** A service child without a worker on a fresh data directory: its URL, a token and the directory. */
  startService(name: string): Promise<{ url: string; token: string; dataDir: string }>;
  /** A `formwork worker` child on that data directory; stop() returns its peak RSS (VmHWM). */
  startWorker(name: string, dataDir: string): Promise<{ stop(): Promise<string> }>;
}

const API = '/api/v2025';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call<T = unknown>(url: string, token: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${url}${API}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: HTTP ${res.status}: ${text.slice(0, 500)}`);
  return (text === '' ? undefined : JSON.parse(text)) as T;
}

/** A page of a letter: a heading, paragraphs of text with tags, a loop over the checked options. */
function docxTemplate(): Buffer {
  const lines = [
    'Order confirmation {submission_id}',
    'Dear {Full name},',
    'Thank you for your order of {date}. We will write to you at {Email} when it ships.',
    'You chose:',
    '{#Toppings}- {value}{/Toppings}',
    'Your note: {Note}',
  ];
  for (let i = 0; i < 20; i++)
    lines.push(
      `Clause ${i + 1}. The parties agree that this order, placed by {Full name}, is governed by the terms in force on {date}.`,
    );
  lines.push('Signed for {form_name}.');
  return makeDocx(lines);
}

async function pdfTemplate(): Promise<Buffer> {
  const pdf = await PDFDocument.create();
  const page = pdf.addPage([595, 842]);
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  page.drawText('Certificate of attendance', { x: 50, y: 780, size: 24, font });
  for (let i = 0; i < 20; i++)
    page.drawText(`Line ${i + 1} of the terms of this certificate, printed on every copy.`, {
      x: 50,
      y: 700 - i * 18,
      size: 10,
      font,
    });
  const form = pdf.getForm();
  const fields = ['Full name', 'Email', 'Toppings', 'Note', 'submission_id'];
  fields.forEach((name, i) =>
    form.createTextField(name).addToPage(page, { x: 50, y: 300 - i * 36, width: 400, height: 24, font }),
  );
  form.createCheckBox('Agreed').addToPage(page, { x: 50, y: 100, width: 16, height: 16 });
  return Buffer.from(await pdf.save());
}

const FORM = {
  name: 'Docmerge bench',
  fields: [
    { type: 'text', label: 'Full name' },
    { type: 'email', label: 'Email' },
    {
      type: 'checkbox',
      label: 'Toppings',
      options: [
        { label: 'Ham & eggs', value: 'ham' },
        { label: 'Cheese', value: 'cheese' },
        { label: 'Olives', value: 'olives' },
      ],
    },
    { type: 'textarea', label: 'Note' },
    { type: 'text', label: 'Agreed' },
  ],
};

async function postSubmissions(
  url: string,
  token: string,
  formId: number,
  ids: number[],
  count: number,
): Promise<void> {
  let next = 0;
  const one = async () => {
    for (let n = next++; n < count; n = next++) {
      await call(url, token, 'POST', `/forms/${formId}/submissions`, {
        fields: [
          { id: ids[0], value: `Person ${n} <O'Neil & Sons>` },
          { id: ids[1], value: `person${n}@example.com` },
          { id: ids[2], value: n % 2 === 0 ? ['ham', 'olives'] : ['cheese'] },
          { id: ids[3], value: `Note number ${n}: please deliver after 5 pm.` },
          { id: ids[4], value: 'yes' },
        ],
      });
    }
  };
  await Promise.all(Array.from({ length: 8 }, one));
}

function documentTimes(
  dbFile: string,
  integrationId: number,
): { count: number; first: number; last: number; bytes: number } {
  const db = new Database(dbFile, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const row = db
      .prepare(
        'SELECT COUNT(*) AS n, MIN(created_at) AS first, MAX(created_at) AS last, SUM(size) AS bytes FROM docmerge_documents WHERE integration_id = ?',
      )
      .get(integrationId) as { n: number; first: number | null; last: number | null; bytes: number | null };
    return { count: row.n, first: Number(row.first ?? 0), last: Number(row.last ?? 0), bytes: Number(row.bytes ?? 0) };
  } finally {
    db.close();
  }
}

async function checkDocument(url: string, token: string, submissionId: number, kind: 'docx' | 'pdf'): Promise<void> {
  const record = await call<{ documents?: { id: number }[] }>(url, token, 'GET', `/submissions/${submissionId}`);
  const document = record.documents?.[0];
  if (!document) throw new Error(`submission ${submissionId} has no document`);
  const res = await fetch(`${url}${API}/submissions/${submissionId}/documents/${document.id}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  if (kind === 'docx') {
    const xml = new PizZip(bytes).file('word/document.xml')!.asText();
    if (!xml.includes('&lt;O&apos;Neil &amp; Sons&gt;') && !xml.includes("&lt;O'Neil &amp; Sons&gt;"))
      throw new Error(`the DOCX of submission ${submissionId} does not hold its escaped name`);
  } else {
    const pdf = await PDFDocument.load(bytes);
    if (pdf.getForm().getFields().length !== 0) throw new Error('the PDF was not flattened');
  }
}

export async function runDocmergeBench(hooks: DocmergeHooks, count: number): Promise<DocmergeRow[]> {
  const rows: DocmergeRow[] = [];
  const templates = [
    { kind: 'docx' as const, name: 'one-page DOCX (27 paragraphs, a loop)', bytes: docxTemplate() },
    { kind: 'pdf' as const, name: 'one-page PDF (6 fields, flattened)', bytes: await pdfTemplate() },
  ];
  for (const template of templates) {
    const service = await hooks.startService(`docmerge-${template.kind}`);
    const form = await call<{ id: number; fields: { id: number }[] }>(
      service.url,
      service.token,
      'POST',
      '/forms',
      FORM,
    );
    const ids = form.fields.map((f) => f.id);
    const integration = await call<{ id: number }>(
      service.url,
      service.token,
      'POST',
      `/forms/${form.id}/integrations/docmerge`,
      {
        template: { filename: `bench.${template.kind}`, content: template.bytes.toString('base64') },
        fileName: 'Order {submission_id}',
      },
    );
    hooks.log(`docmerge ${template.kind}: posting ${count} submissions with no worker running`);
    await postSubmissions(service.url, service.token, form.id, ids, count);
    const dbFile = `${service.dataDir}/formwork.db`;
    if (documentTimes(dbFile, integration.id).count !== 0) throw new Error('documents were made without a worker');

    hooks.log(`docmerge ${template.kind}: starting the worker`);
    const started = performance.now();
    const worker = await hooks.startWorker(`docmerge-${template.kind}-worker`, service.dataDir);
    let seen = documentTimes(dbFile, integration.id);
    const deadline = started + 10 * 60_000;
    while (seen.count < count) {
      if (performance.now() > deadline) throw new Error(`only ${seen.count} of ${count} documents in 10 minutes`);
      await sleep(100);
      seen = documentTimes(dbFile, integration.id);
    }
    const wallSeconds = (performance.now() - started) / 1000;
    const peak = await worker.stop();
    await checkDocument(service.url, service.token, 1, template.kind);
    await checkDocument(service.url, service.token, count, template.kind);
    const span = (seen.last - seen.first) / 1000;
    rows.push({
      template: template.name,
      documents: seen.count,
      perSecond: span > 0 ? (seen.count - 1) / span : Number.NaN,
      wallSeconds,
      averageBytes: seen.bytes / seen.count,
      workerPeak: peak,
    });
  }
  return rows;
}

export function docmergeTable(rows: DocmergeRow[]): string {
  const header = ['template', 'documents', 'documents/s', 'wall s (with start-up)', 'avg size', 'worker peak RSS'];
  const lines = rows.map((r) => [
    r.template,
    String(r.documents),
    r.perSecond.toFixed(1),
    r.wallSeconds.toFixed(1),
    `${(r.averageBytes / 1024).toFixed(1)} KiB`,
    r.workerPeak,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const fmt = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [fmt(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(fmt)].join('\n');
}
