/**
 * What a delivery costs the worker: `npx tsx bench/worker-drain.ts`.
 *
 * A service (`formwork serve --no-worker`, SQLite) takes DRAIN_COUNT submissions (default
 * 3,000) of the bench's ten-field form, which has a webhook, a notification email or both
 * (DRAIN_KIND: webhook, email or both, the default); the service stops, and one `formwork
 * worker` process delivers the backlog to a webhook receiver and an SMTP sink in this process.
 * Prints the jobs a second and the worker's CPU time a job (from /proc), from the first job
 * done to the last; with DRAIN_PROFILE=1 the worker runs with --cpu-prof and its profile is summed up.
 * Not part of `npm run bench`: the events section measures deliveries beside the API, this one
 * the worker alone (docs/performance.md, thirtieth pass).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processCpuMicros } from './cpu-split.js';
import { addEvents, call, MailSink, Receiver } from './events.js';
import { summarizeProfile } from './profile.js';
import { createBenchAccount } from './seed.js';
import { fieldIdsOf, postSubmission, submissionForm } from './submission-data.js';

const COUNT = Number(process.env.DRAIN_COUNT ?? 3000);
const KINDS = ['webhook', 'email', 'both'] as const;
const KIND = KINDS.find((k) => k === (process.env.DRAIN_KIND ?? 'both'));
if (KIND === undefined) throw new Error(`DRAIN_KIND: webhook, email or both, not ${process.env.DRAIN_KIND}`);
const PROFILE = process.env.DRAIN_PROFILE === '1';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const exited = (child: ChildProcess) => new Promise((resolve) => child.once('exit', resolve));

const root = mkdtempSync(join(tmpdir(), 'formwork-drain-'));
const dataDir = join(root, 'data');
const profDir = join(root, 'profile');
const receiver = new Receiver();
const sink = new MailSink();
try {
  const token = await createBenchAccount(dataDir);
  const env = {
    ...process.env,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '1000000000',
    RATE_LIMIT_PER_DAY: '1000000000',
    PUBLIC_URL: '',
    HOST: '127.0.0.1',
    SECRET_KEY: randomBytes(32).toString('hex'),
    WEBHOOK_ALLOW_PRIVATE: 'true',
    SMTP_URL: await sink.listen(),
    MAIL_FROM: 'bench@example.com',
  };
  const hookUrl = await receiver.listen();
  const port = 20000 + Math.floor(Math.random() * 10000);
  const url = `http://127.0.0.1:${port}`;
  const serve = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve', '--no-worker'], {
    env: { ...env, PORT: String(port) },
    stdio: 'inherit',
  });
  for (;;) {
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await sleep(100);
  }
  const service = { url, token };
  const form = (await call(service, 'POST', '/forms', submissionForm('Drain'))) as {
    id: number;
    fields: { id: number; label: string }[];
  };
  const ids = fieldIdsOf(form.fields);
  await addEvents(service, form.id, hookUrl, KIND);
  let next = 1;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next <= COUNT) {
        const n = next++;
        const { status, text } = await postSubmission(url, token, form.id, ids, n);
        if (status !== 200) throw new Error(`POST submission: HTTP ${status}: ${text.slice(0, 300)}`);
      }
    }),
  );
  serve.kill('SIGTERM');
  await exited(serve);

  const hooks = KIND === 'email' ? 0 : COUNT;
  const mails = KIND === 'webhook' ? 0 : COUNT;
  const worker = spawn(
    process.execPath,
    [...(PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []), '--import', 'tsx', 'src/cli.ts', 'worker'],
    { env, stdio: 'inherit' },
  );
  // From the first job done to the last: the worker's start-up (tsx compiling the sources) left out.
  const done = () => receiver.deliveries + sink.messages;
  while (done() === 0) await sleep(5);
  const first = { at: Date.now(), cpu: processCpuMicros(worker.pid), jobs: done() };
  while (receiver.deliveries < hooks || sink.messages < mails) await sleep(20);
  const ms = Date.now() - first.at;
  const cpu = processCpuMicros(worker.pid) - first.cpu;
  const jobs = hooks + mails - first.jobs;
  worker.kill('SIGTERM');
  await exited(worker);
  process.stdout.write(
    `${COUNT} submissions (${KIND}): ${hooks} webhook deliveries and ${mails} emails; after the first, ` +
      `${jobs} jobs in ${(ms / 1000).toFixed(1)} s, ${Math.round((jobs * 1000) / ms)} jobs/s, ` +
      `the worker's CPU ${Math.round(cpu / jobs)} µs a job\n`,
  );
  if (PROFILE) {
    const [file] = readdirSync(profDir);
    if (file) process.stdout.write(`${summarizeProfile(join(profDir, file), process.cwd(), undefined, 30)}\n`);
  }
} finally {
  await receiver.close();
  await sink.close();
  rmSync(root, { recursive: true, force: true });
}
