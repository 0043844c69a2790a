/**
 * The events section of npm run bench (alone: npm run bench -- events): what webhooks and
 * emails cost the submission write path, and how soon a delivery follows a submission.
 *
 * One service child (the single-machine shape: API and worker in one process) with a webhook
 * receiver and an SMTP sink in this process. Two forms of the same ten fields: one with
 * nothing configured, one with a webhook and a notification email.
 * 1. Throughput: the POST scenario of the main benchmark on the plain form, then on the form
 *    with events, then (once the events of that run are delivered) on the plain form again;
 *    the evented run's rate as a share of the mean of the two plain runs (target >= 80%). The
 *    plain runs on either side cancel what the order alone would do (a database that grows
 *    run by run, a machine that gets busier or quieter). The worker delivers while the
 *    evented run loads the service, as it would in production.
 *    Beside the rates, the service's own CPU time per answered request (from /proc, every
 *    thread): on two shared cores the rate measures the load generator, the receiver and the
 *    SMTP sink (all in this process) as much as the service, its CPU time only the service.
 *    Counted for the evented run twice: during the run, and until its backlog was delivered
 *    (what each submission's webhook and email cost in all).
 * 2. Delay: submissions at a fixed rate (BENCH_EVENT_RATE, default 100/s) for BENCH_DURATION
 *    seconds; for each, the time from its 200 to the first delivery attempt of its
 *    submission.created event at the receiver, p50 and p99 (target p99 < 1 s). Every event
 *    must arrive, and every notification at the SMTP sink.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { SMTPServer } from 'smtp-server';
import { API } from './seed.js';
import { postSubmission, type FieldIds } from './submission-data.js';

export interface EventService {
  url: string;
  token: string;
  /** CPU time the service process has used so far (all its threads), in ms; NaN where /proc cannot tell. */
  cpuMs(): number;
}

/** A throughput measurement, made by the main benchmark's own POST scenario. */
export interface PostRate {
  rps: number;
  p99: number;
  /** 2xx answers during the measured and warm-up runs: the events the receiver must see. */
  ok: number;
  problems: string[];
}

export interface EventBenchDeps {
  log(message: string): void;
  /** A fresh service child (API and worker) on SQLite with these settings, and its bench account's token. */
  startService(name: string, env: Record<string, string>): Promise<EventService>;
  /** Creates the bench's ten-field submission form; its id and field ids. */
  createForm(service: EventService, name: string): Promise<{ id: number; ids: FieldIds }>;
  /** Loads POST /forms/{id}/submissions as the main benchmark does. */
  measurePosts(name: string, service: EventService, formId: number, ids: FieldIds): Promise<PostRate>;
  /** The number for the next submission body: each body is different. */
  nextBody(): number;
  durationS: number;
}

export interface EventResult {
  without: PostRate;
  withEvents: PostRate;
  /** The plain form again, after the evented run's backlog is delivered. */
  withoutAfter: PostRate;
  rate: number;
  sent: number;
  delay: { p50: number; p99: number; max: number };
  /** Seconds from the end of the loaded run until its last event and email arrived. */
  drainS: number;
  /**
   * The service's CPU time per answered request (warm-up and measured run): plain before,
   * with events during the run, with events until its backlog was delivered, plain after.
   */
  cpuUs: { without: number; withEvents: number; withEventsDelivered: number; withoutAfter: number };
  deliveries: number;
  mails: number;
  problems: string[];
}

const percentile = (sorted: number[], q: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

/** Collects webhook deliveries: the first arrival of each submission's created event. */
export class Receiver {
  readonly firstArrival = new Map<number, number>();
  deliveries = 0;
  private readonly server = createServer((req, res) => this.take(req, res));

  async listen(): Promise<string> {
    // A connection reset by its client (a service stopped with its SMTP pool open) is no failure of the sink.
    this.server.on('error', () => undefined);
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  private take(req: IncomingMessage, res: ServerResponse): void {
    const at = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.deliveries++;
      res.writeHead(200).end();
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { type?: string; submissionId?: number };
      if (
        body.type === 'submission.created' &&
        typeof body.submissionId === 'number' &&
        !this.firstArrival.has(body.submissionId)
      )
        this.firstArrival.set(body.submissionId, at);
    });
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** An SMTP server that accepts every message and counts them. */
export class MailSink {
  messages = 0;
  private readonly server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData: (stream, _session, done) => {
      stream.on('end', () => {
        this.messages++;
        done();
      });
      stream.resume();
    },
  });

  async listen(): Promise<string> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server.server, 'listening');
    return `smtp://127.0.0.1:${(this.server.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

export async function call(
  service: Pick<EventService, 'url' | 'token'>,
  method: string,
  path: string,
  body: unknown,
): Promise<unknown> {
  const res = await fetch(`${service.url}${API}${path}`, {
    method,
    headers: { authorization: `Bearer ${service.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: HTTP ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

/**
 * The events of the bench's forms: a webhook to hookUrl and a notification email with every
 * field, or only one of the two.
 */
export async function addEvents(
  service: Pick<EventService, 'url' | 'token'>,
  formId: number,
  hookUrl: string,
  which: 'webhook' | 'email' | 'both' = 'both',
): Promise<void> {
  if (which !== 'email') await call(service, 'POST', `/form/${formId}/webhook`, { url: hookUrl });
  if (which !== 'webhook') {
    await call(service, 'POST', `/forms/${formId}/notifications`, {
      name: 'New submission',
      recipients: ['team@example.com'],
      subject: 'New submission to {{ form_name }}',
      message: '<p>Submission {{ submission_id }}</p>{{ all_fields }}',
    });
  }
}

async function waitUntil(done: () => boolean, limitMs: number): Promise<boolean> {
  const deadline = performance.now() + limitMs;
  while (!done()) {
    if (performance.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

/** POSTs at a fixed rate for seconds; the time each 200 arrived, by submission id. */
async function fixedRate(
  service: EventService,
  formId: number,
  ids: FieldIds,
  perSecond: number,
  seconds: number,
  nextBody: () => number,
): Promise<{ answered: Map<number, number>; failures: string[] }> {
  const answered = new Map<number, number>();
  const failures: string[] = [];
  const inFlight: Promise<void>[] = [];
  const start = performance.now();
  const total = perSecond * seconds;
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / perSecond - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const n = nextBody();
    inFlight.push(
      (async () => {
        const { status, text } = await postSubmission(service.url, service.token, formId, ids, n);
        const at = performance.now();
        if (status !== 200) failures.push(`HTTP ${status}: ${text.slice(0, 200)}`);
        else answered.set((JSON.parse(text) as { id: number }).id, at);
      })().catch((error: unknown) => void failures.push(String(error))),
    );
  }
  await Promise.all(inFlight);
  return { answered, failures };
}

export async function runEventBench(deps: EventBenchDeps, perSecond: number): Promise<EventResult> {
  const receiver = new Receiver();
  const sink = new MailSink();
  const hookUrl = await receiver.listen();
  const smtpUrl = await sink.listen();
  const problems: string[] = [];
  try {
    const service = await deps.startService('service (SQLite, events)', {
      WEBHOOK_ALLOW_PRIVATE: 'true',
      SMTP_URL: smtpUrl,
      MAIL_FROM: 'bench@example.com',
    });
    const plain = await deps.createForm(service, 'Bench submissions (no events)');
    const evented = await deps.createForm(service, 'Bench submissions (webhook and email)');
    await addEvents(service, evented.id, hookUrl);

    const cpuPer = (startMs: number, requests: number) => ((service.cpuMs() - startMs) * 1000) / requests;
    // A first load, not reported, so that the service's start-up (compiling, JIT) is not
    // counted in the CPU time of the first plain run.
    await deps.measurePosts('POST /forms/{id}/submissions, priming (not reported)', service, plain.id, plain.ids);
    let cpuStart = service.cpuMs();
    const without = await deps.measurePosts('POST /forms/{id}/submissions, no events', service, plain.id, plain.ids);
    const cpuWithout = cpuPer(cpuStart, without.ok);
    const deliveredBefore = receiver.deliveries;
    const mailsBefore = sink.messages;
    cpuStart = service.cpuMs();
    const withEvents = await deps.measurePosts(
      'POST /forms/{id}/submissions, a webhook and an email',
      service,
      evented.id,
      evented.ids,
    );
    const cpuWithEvents = cpuPer(cpuStart, withEvents.ok);
    problems.push(...without.problems, ...withEvents.problems);
    deps.log(`waiting for the ${withEvents.ok} events of the loaded run to be delivered`);
    const drainStart = performance.now();
    const drained =
      (await waitUntil(() => receiver.deliveries - deliveredBefore >= withEvents.ok, 300_000)) &&
      (await waitUntil(() => sink.messages - mailsBefore >= withEvents.ok, 300_000));
    const drainS = (performance.now() - drainStart) / 1000;
    const cpuDelivered = cpuPer(cpuStart, withEvents.ok);
    deps.log(`backlog delivered in ${drainS.toFixed(1)} s`);
    if (!drained)
      problems.push(
        `after 5 minutes, ${receiver.deliveries - deliveredBefore} webhook deliveries and ` +
          `${sink.messages - mailsBefore} mails of ${withEvents.ok} submissions`,
      );

    cpuStart = service.cpuMs();
    const withoutAfter = await deps.measurePosts(
      'POST /forms/{id}/submissions, no events, again',
      service,
      plain.id,
      plain.ids,
    );
    const cpuWithoutAfter = cpuPer(cpuStart, withoutAfter.ok);
    problems.push(...withoutAfter.problems);

    deps.log(`delay: ${perSecond} submissions/s for ${deps.durationS} s`);
    const mailsBeforeDelay = sink.messages;
    const { answered, failures } = await fixedRate(
      service,
      evented.id,
      evented.ids,
      perSecond,
      deps.durationS,
      deps.nextBody,
    );
    problems.push(...failures.slice(0, 5));
    const arrived = () => [...answered.keys()].every((id) => receiver.firstArrival.has(id));
    if (!(await waitUntil(arrived, 60_000)))
      problems.push(
        `${[...answered.keys()].filter((id) => !receiver.firstArrival.has(id)).length} of ${answered.size} ` +
          'events not delivered within 60 s',
      );
    if (!(await waitUntil(() => sink.messages - mailsBeforeDelay >= answered.size, 60_000)))
      problems.push(`${sink.messages - mailsBeforeDelay} of ${answered.size} notification emails arrived within 60 s`);
    const delays = [...answered]
      .filter(([id]) => receiver.firstArrival.has(id))
      .map(([id, at]) => receiver.firstArrival.get(id)! - at)
      .sort((a, b) => a - b);
    return {
      without,
      withEvents,
      withoutAfter,
      rate: perSecond,
      sent: answered.size,
      delay: { p50: percentile(delays, 0.5), p99: percentile(delays, 0.99), max: delays.at(-1) ?? Number.NaN },
      drainS,
      cpuUs: {
        without: cpuWithout,
        withEvents: cpuWithEvents,
        withEventsDelivered: cpuDelivered,
        withoutAfter: cpuWithoutAfter,
      },
      deliveries: receiver.deliveries,
      mails: sink.messages,
      problems,
    };
  } finally {
    await receiver.close();
    await sink.close();
  }
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** The evented run's rate as a share (%) of the mean of the plain runs before and after it. */
export const eventShare = (r: EventResult): number =>
  (100 * r.withEvents.rps) / ((r.without.rps + r.withoutAfter.rps) / 2);

/** The plain runs' mean CPU time per request as a share (%) of an evented figure: the rate the service's CPU would allow, relative. */
const cpuShare = (r: EventResult, evented: number): number =>
  (100 * (r.cpuUs.without + r.cpuUs.withoutAfter)) / 2 / evented;

export function eventReport(r: EventResult): string {
  const share = eventShare(r);
  const plain = (r.without.rps + r.withoutAfter.rps) / 2;
  return [
    '',
    'Events: submission create on one service child (SQLite; API and worker in one process), webhook receiver and SMTP sink in the benchmark process:',
    '',
    "| scenario | req/s (mean) | p99 ms | share of the plain runs' mean |",
    '|---|---:|---:|---:|',
    `| POST submissions, nothing configured | ${fmt(r.without.rps)} | ${fmt(r.without.p99, 1)} | ${fmt((100 * r.without.rps) / plain, 1)}% |`,
    `| POST submissions, a webhook and a notification email | ${fmt(r.withEvents.rps)} | ${fmt(r.withEvents.p99, 1)} | ${fmt(share, 1)}% |`,
    `| POST submissions, nothing configured, after the backlog was delivered | ${fmt(r.withoutAfter.rps)} | ${fmt(r.withoutAfter.p99, 1)} | ${fmt((100 * r.withoutAfter.rps) / plain, 1)}% |`,
    '',
    `| delay from the 200 to the first delivery attempt (${r.rate}/s, ${fmt(r.sent)} submissions) | p50 ms | p99 ms | max ms |`,
    '|---|---:|---:|---:|',
    `| webhook, submission.created | ${fmt(r.delay.p50, 1)} | ${fmt(r.delay.p99, 1)} | ${fmt(r.delay.max, 1)} |`,
    '',
    `targets: ${share >= 80 ? 'met   ' : 'MISSED'} creation with events keeps ${fmt(share, 1)}% of its rate (>= 80%); ` +
      `${r.delay.p99 < 1000 ? 'met   ' : 'MISSED'} p99 delay ${fmt(r.delay.p99, 1)} ms (< 1,000 ms)`,
    `the loaded run's backlog (${fmt(r.withEvents.ok)} events and emails) was delivered ${fmt(r.drainS, 1)} s after it ended; ` +
      `in all ${fmt(r.deliveries)} webhook deliveries and ${fmt(r.mails)} emails were received`,
    '',
    // Requests per second on two shared cores measure the load generator, the receiver and the
    // SMTP sink (all in this process) as much as the service: the service's own CPU time per
    // request says what the events cost it, whatever else the machine is doing.
    "| the service's CPU time per answered request (all its threads) | µs | plain runs' mean as a share of it |",
    '|---|---:|---:|',
    `| nothing configured | ${fmt(r.cpuUs.without)} | |`,
    `| a webhook and an email, during the loaded run | ${fmt(r.cpuUs.withEvents)} | ${fmt(cpuShare(r, r.cpuUs.withEvents), 1)}% |`,
    `| a webhook and an email, until every event and email was delivered | ${fmt(r.cpuUs.withEventsDelivered)} | ${fmt(cpuShare(r, r.cpuUs.withEventsDelivered), 1)}% |`,
    `| nothing configured, after the backlog was delivered | ${fmt(r.cpuUs.withoutAfter)} | |`,
    '',
  ].join('\n');
}
