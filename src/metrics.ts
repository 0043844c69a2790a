import { createHash, timingSafeEqual } from 'node:crypto';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Kysely } from 'kysely';
import type { Clock } from './clock.js';
import type { Database } from './db/schema.js';
import { sharedStatementCounts, type SharedCounts } from './db/coalescer.js';
import { outboxStats, type OutboxKindStats } from './jobs/repository.js';

/** Connections of the PostgreSQL pool (pg.Pool's counts); SQLite has one connection and no pool. */
export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
  max: number;
}

/**
 * The Prometheus metrics of one process (GET /metrics, docs/operations.md#metrics). Each
 * process has its own registry: the HTTP and worker counters are its own, the outbox gauges
 * read the shared jobs table at each scrape (so every process reports the same outbox: take
 * max(), not sum(), across processes).
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly latency: Histogram<'method' | 'route' | 'status'>;
  private readonly runs: Counter<'kind' | 'outcome'>;
  private readonly runSeconds: Histogram<'kind'>;
  private readonly routeSeries = new Map<
    string,
    {
      count: ReturnType<Counter<'method' | 'route' | 'status'>['labels']>;
      time: ReturnType<Histogram<'method' | 'route' | 'status'>['labels']>;
    }
  >();

  constructor(options: {
    db: Kysely<Database>;
    clock: Clock;
    /** Which process this is: serve or worker. */
    role: string;
    pool?: () => PoolStats;
    onCollectError?: (error: unknown) => void;
  }) {
    const { registry } = this;
    registry.setDefaultLabels({ role: options.role });
    processRegistry(options.role);
    this.requests = new Counter({
      name: 'formwork_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status code',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    });
    this.latency = new Histogram({
      name: 'formwork_http_request_duration_seconds',
      help: 'Time from a request to the end of its answer, by method, route pattern and status code',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    this.runs = new Counter({
      name: 'formwork_job_runs_total',
      help: 'Job runs of this process, by kind and outcome (failed: an attempt that failed, a webhook or email delivery among them)',
      labelNames: ['kind', 'outcome'],
      registers: [registry],
    });
    this.runSeconds = new Histogram({
      name: 'formwork_job_run_duration_seconds',
      help: 'How long job handlers ran, by kind',
      labelNames: ['kind'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60],
      registers: [registry],
    });
    const pool = options.pool;
    if (pool) {
      new Gauge({
        name: 'formwork_db_pool_connections',
        help: 'PostgreSQL pool of this process: open (total), idle, and queries waiting for a connection (waiting); max is DATABASE_POOL_SIZE',
        labelNames: ['state'],
        registers: [registry],
        collect() {
          const s = pool();
          this.set({ state: 'total' }, s.total);
          this.set({ state: 'idle' }, s.idle);
          this.set({ state: 'in_use' }, s.total - s.idle);
          this.set({ state: 'waiting' }, s.waiting);
          this.set({ state: 'max' }, s.max);
        },
      });
    }
    const { db, clock, onCollectError } = options;
    // Both outbox gauges come from one read: prom-client collects the gauges of a scrape side
    // by side, so the second finds the first's read still pending and shares it.
    let pending: Promise<{ now: number; stats: OutboxKindStats[] } | undefined> | undefined;
    const outbox = () => {
      if (pending) return pending;
      const now = clock.now();
      pending = outboxStats(db, now)
        .then(
          (stats) => ({ now, stats }),
          (error: unknown) => {
            onCollectError?.(error);
            return undefined;
          },
        )
        .finally(() => (pending = undefined));
      return pending;
    };
    new Gauge({
      name: 'formwork_outbox_jobs',
      help: 'Jobs in the outbox by kind and state: due (queued, due now), scheduled (queued for later), running',
      labelNames: ['kind', 'state'],
      registers: [registry],
      async collect() {
        const got = await outbox();
        if (!got) return;
        this.reset();
        for (const s of got.stats) {
          this.set({ kind: s.kind, state: 'due' }, s.due);
          this.set({ kind: s.kind, state: 'scheduled' }, s.scheduled);
          this.set({ kind: s.kind, state: 'running' }, s.running);
        }
      },
    });
    new Gauge({
      name: 'formwork_outbox_oldest_due_age_seconds',
      help: 'Age of the oldest due job that no worker has claimed yet, by kind (0 when none is waiting)',
      labelNames: ['kind'],
      registers: [registry],
      async collect() {
        const got = await outbox();
        if (!got) return;
        this.reset();
        for (const s of got.stats)
          this.set({ kind: s.kind }, s.oldestDueAt === null ? 0 : Math.max(0, (got.now - s.oldestDueAt) / 1000));
      },
    });
  }

  /** One answered request; route is the pattern (/api/v2025/forms/:id), never the raw URL. */
  request(method: string, route: string, status: number, seconds: number): void {
    // prom-client hashes a labels object on every call; the series of a route and status are
    // bound once and kept (routes are patterns, so there are a few hundred at most).
    const key = `${method} ${status} ${route}`;
    let series = this.routeSeries.get(key);
    if (series === undefined) {
      const labels = { method, route, status: String(status) };
      series = { count: this.requests.labels(labels), time: this.latency.labels(labels) };
      this.routeSeries.set(key, series);
    }
    series.count.inc();
    series.time.observe(seconds);
  }

  /** One job run's end (the worker's onRun). */
  jobRun(kind: string, outcome: string, seconds: number): void {
    this.runs.inc({ kind, outcome });
    this.runSeconds.observe({ kind }, seconds);
  }

  /** The text a scrape gets: this context's series, then the process's. */
  async text(): Promise<{ contentType: string; body: string }> {
    const own = await this.registry.metrics();
    return { contentType: this.registry.contentType, body: `${own}\n${await processRegistry().metrics()}` };
  }
}

let processWide: Registry | undefined;

/**
 * prom-client's default series (CPU, memory, event loop, GC) belong to the process, not to one
 * context: collected once per process (tests start many contexts in one), with the role of
 * the first.
 */
function processRegistry(role = 'serve'): Registry {
  if (!processWide) {
    processWide = new Registry();
    processWide.setDefaultLabels({ role });
    collectDefaultMetrics({ register: processWide, prefix: 'formwork_' });
    // The coalescers are the process's (one per database it opened), so their counts are too.
    const shared = (name: string, help: string, of: (c: SharedCounts) => number) =>
      new Counter({
        name,
        help,
        labelNames: ['kind'],
        registers: [processWide!],
        collect() {
          this.reset();
          for (const [kind, counts] of sharedStatementCounts) this.inc({ kind }, of(counts));
        },
      });
    shared(
      'formwork_db_shared_statements_total',
      'PostgreSQL statements that carried calls arriving together (src/db/coalescer.ts), by kind: submission_create, token_look_up',
      (c) => c.statements,
    );
    shared('formwork_db_shared_calls_total', 'Calls those statements carried, by kind', (c) => c.calls);
    shared(
      'formwork_db_shared_calls_made_again_total',
      'Calls whose shared statement failed for one of them (a form changed, a value taken, a token no longer live) and that were made again alone, by kind',
      (c) => c.madeAgain,
    );
  }
  return processWide;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

/**
 * Whether a scrape may read /metrics: with METRICS_TOKEN set, when it sends that bearer token
 * (compared in constant time); without it, only from loopback and through no proxy (a balancer
 * on the same machine adds X-Forwarded-For, so public requests it passes on are refused).
 */
export function metricsAllowed(
  token: string | undefined,
  headers: Record<string, string | string[] | undefined>,
  remoteAddress: string | undefined,
): boolean {
  if (token !== undefined) {
    const given = headers.authorization;
    if (typeof given !== 'string' || !given.startsWith('Bearer ')) return false;
    const a = createHash('sha256').update(given.slice(7)).digest();
    const b = createHash('sha256').update(token).digest();
    return timingSafeEqual(a, b);
  }
  if (headers['x-forwarded-for'] !== undefined || headers.forwarded !== undefined) return false;
  return remoteAddress !== undefined && LOOPBACK.test(remoteAddress);
}
