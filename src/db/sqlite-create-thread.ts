import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Kysely } from 'kysely';
import { sharedCountsOf, type SharedCounts } from './coalescer.js';
import type { Database } from './schema.js';
import type { WriteTurn } from './sqlite-write-turn.js';

/** A statement the thread runs: its SQL (compiled by Kysely) and the argument each parameter takes. */
export interface ThreadStatement {
  sql: string;
  slots: number[];
}

/**
 * The statements of a plain create on SQLite, each built by the repository that owns it:
 * row (no RETURNING; its arguments are ThreadCreate.row), unique (submission id, form id,
 * field id, value; no RETURNING), held (form id, field id, value: the holder of a unique
 * value, if any), revision (form id, account id), count (form id, n, version), hour (form id,
 * hour, n, first id, last id), fullText (submission id, text).
 */
export interface CreateStatements {
  row: ThreadStatement;
  unique: ThreadStatement;
  held: ThreadStatement;
  revision: ThreadStatement;
  count: ThreadStatement;
  hour: ThreadStatement;
  fullText: ThreadStatement;
  /** An outbox job's row (kind, payload, run at, max attempts, request id). */
  job: ThreadStatement;
}

/** One plain create, as plain data: what the thread writes for it. */
export interface ThreadCreate {
  accountId: number;
  formId: number;
  /** The row statement's arguments. */
  row: unknown[];
  /** The revision the create's values were checked against. */
  revision: number;
  hour: number;
  /** Field id and normalized value of each unique field. */
  unique: [number, string][];
  fullText: string;
  /** Whether the create's jobs (its events') go in with it: asked for once its id is known. */
  events: boolean;
}

/** The arguments of the outbox rows of a create that has events, given its new id. */
export type JobsFor = (id: number) => unknown[][];

/**
 * The thread, plain JavaScript run as a CommonJS worker (the same from source and from dist,
 * as the checkpointer's). It writes each batch it is sent in one transaction, which holds
 * SQLite's write lock from its start (BEGIN IMMEDIATE), so nothing it reads changes under it:
 * per create, the form's revision (read once per form in a batch; anything but the expected
 * one, or no form, and nothing of the create is written), whether each unique value is held
 * already (by an earlier create of the batch too; if so nothing of the create is written),
 * the row and its unique values; per batch, the count and the hours of each form, and the
 * full-text rows, at its end.
 * It answers each create's id, or 0 for one it did not write. When a create it wrote has
 * events, their outbox rows hold its id and record, known only now: it answers the ids with
 * needJobs, keeps the transaction open, and takes the rows the main thread sends back
 * ({ jobs }) before it commits ({ abort } rolls the batch back). Anything that fails otherwise
 * rolls the whole batch back and is answered as an error: nothing of it was written.
 */
const SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const SQLite = require(workerData.driver);
const db = new SQLite(workerData.file);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = NORMAL');
db.pragma('foreign_keys = ON');
db.pragma('cache_size = -65536');
db.pragma('wal_autocheckpoint = ' + workerData.autocheckpointPages);
const statement = (s) => {
  const prepared = db.prepare(s.sql);
  return { run: (args) => prepared.run(s.slots.map((i) => args[i])), get: (args) => prepared.get(s.slots.map((i) => args[i])) };
};
const S = workerData.statements;
const row = statement(S.row);
const unique = statement(S.unique);
const held = statement(S.held);
const revision = statement(S.revision);
const count = statement(S.count);
const hour = statement(S.hour);
const fullText = statement(S.fullText);
const job = statement(S.job);
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');
const rollback = db.prepare('ROLLBACK');
// The batch whose transaction waits for its creates' jobs.
let waiting;
function write(creates) {
  const ids = new Array(creates.length).fill(0);
  const texts = [];
  let needJobs = false;
  begin.run();
  // Per form: its revision (null for none of the account's), and how many it gets, in all and by hour (with the hour's ids' bounds).
  const forms = new Map();
  for (let i = 0; i < creates.length; i++) {
    const c = creates[i];
    const key = c.formId + ':' + c.accountId;
    let form = forms.get(key);
    if (!form) {
      const found = revision.get([c.formId, c.accountId]);
      form = { id: c.formId, revision: found ? found.revision : null, n: 0, hours: new Map() };
      forms.set(key, form);
    }
    if (form.revision !== c.revision) continue;
    if (c.unique.some(([fieldId, norm]) => held.get([c.formId, fieldId, norm]) !== undefined)) continue;
    const id = Number(row.run(c.row).lastInsertRowid);
    for (const [fieldId, norm] of c.unique) {
      // Not held a moment ago, under this transaction's write lock: a conflict now is a fault.
      if (unique.run([id, c.formId, fieldId, norm]).changes === 0) throw new Error('a unique value was taken meanwhile');
    }
    form.n++;
    // Ids rise within the batch: the hour's first is the first seen, its last the latest.
    const inHour = form.hours.get(c.hour);
    if (inHour) {
      inHour.n++;
      inHour.last = id;
    } else form.hours.set(c.hour, { n: 1, first: id, last: id });
    ids[i] = id;
    texts.push([id, c.fullText]);
    if (c.events) needJobs = true;
  }
  // In the order of their keys, as every writer of these rows adds to them.
  const written = [...forms.values()].filter((f) => f.n > 0).sort((a, b) => a.id - b.id);
  for (const f of written) {
    count.run([f.id, f.n, f.n]);
    for (const [h, { n, first, last }] of [...f.hours].sort((a, b) => a[0] - b[0])) hour.run([f.id, h, n, first, last]);
  }
  return { ids, texts, needJobs };
}
function finish({ ids, texts }) {
  for (const [id, text] of texts) fullText.run([id, text]);
  commit.run();
  return ids;
}
parentPort.on('message', (message) => {
  if (message === 'stop') {
    db.close();
    parentPort.close();
    return;
  }
  try {
    if (message.abort) throw new Error('the batch was abandoned');
    if (message.jobs) {
      const batch = waiting;
      waiting = undefined;
      for (const args of message.jobs) job.run(args);
      parentPort.postMessage({ ids: finish(batch) });
      return;
    }
    const batch = write(message);
    if (batch.needJobs) {
      waiting = batch;
      parentPort.postMessage({ ids: batch.ids, needJobs: true });
      return;
    }
    parentPort.postMessage({ ids: finish(batch) });
  } catch (error) {
    waiting = undefined;
    try {
      if (db.inTransaction) rollback.run();
    } catch {}
    parentPort.postMessage({ error: String((error && error.message) || error) });
  }
});
`;

/** How many creates one batch takes at most: its transaction holds the write lock meanwhile. */
const MAX_BATCH = 64;

/** What the thread answers a message with: ids (0: not written), needJobs (the transaction waits for them), or error. */
interface ThreadAnswer {
  ids?: number[];
  error?: string;
  needJobs?: boolean;
}

interface Pending {
  create: ThreadCreate;
  jobsFor?: JobsFor;
  resolve: (id: number) => void;
  reject: (error: unknown) => void;
}

/**
 * Plain creates on SQLite, written by a thread with a connection of its own, so that their
 * statements and commits run beside the event loop rather than on it (docs/performance.md,
 * "Sixteenth pass"). Creates that arrive while a batch is out wait and go in the next one,
 * all together (group commit, as WriteBatcher's on the main connection). A batch is sent
 * only in the thread's write turn (sqlite-write-turn.ts).
 *
 * write answers the new row's id, or 0 when the thread wrote nothing for it (the form not at
 * the revision, a unique value taken, the batch failed and was rolled back, the thread
 * stopped before it was sent): the caller then makes the create on the main connection, in a
 * transaction, which gives its answer. A batch out when the thread dies may or may not have
 * committed, so its creates fail rather than being made again.
 */
export class CreateThread {
  private readonly worker: Worker;
  private queue: Pending[] = [];
  private out: Pending[] | undefined;
  /** Whether the batch out was posted to the thread (else it waits for the turn). */
  private posted = false;
  private scheduled = false;
  private stopped = false;
  private failure: Error | undefined;
  /** Called once nothing is queued or out (stop waits for it). */
  private drained: (() => void) | undefined;
  private readonly counts: SharedCounts = sharedCountsOf('submission_create');
  private readonly exited: Promise<void>;

  constructor(
    file: string,
    statements: CreateStatements,
    autocheckpointPages: number,
    private readonly turn: WriteTurn,
    /** Called when a batch committed rows: the main connection's change epoch moves. */
    private readonly onWritten: () => void,
  ) {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(SOURCE, { eval: true, workerData: { file, driver, statements, autocheckpointPages } });
    this.worker.unref();
    this.worker.on('message', (m: ThreadAnswer) => this.answered(m));
    this.worker.on('error', (error) => this.died(error));
    this.exited = new Promise<void>((resolve) =>
      this.worker.once('exit', () => {
        this.died(new Error('the SQLite create thread exited'));
        resolve();
      }),
    );
  }

  /** Whether creates may be sent: false once the thread stopped or died. */
  get open(): boolean {
    return !this.stopped && this.failure === undefined;
  }

  /** jobsFor: the create's outbox rows, asked for once it is written (create.events). */
  write(create: ThreadCreate, jobsFor?: JobsFor): Promise<number> {
    if (!this.open) return Promise.resolve(0);
    return new Promise<number>((resolve, reject) => {
      this.queue.push({ create, jobsFor, resolve, reject });
      if (this.out === undefined && !this.scheduled) {
        // Creates read in the same turn of the event loop go together.
        this.scheduled = true;
        setImmediate(() => void this.send());
      }
    });
  }

  private async send(): Promise<void> {
    this.scheduled = false;
    if (this.out !== undefined || this.queue.length === 0) return;
    const batch = this.queue.splice(0, MAX_BATCH);
    this.out = batch;
    await this.turn.enterThread();
    if (!this.open) {
      this.turn.leaveThread();
      this.out = undefined;
      for (const p of batch) p.resolve(0);
      return;
    }
    this.counts.statements++;
    this.counts.calls += batch.length;
    this.worker.ref();
    this.posted = true;
    this.worker.postMessage(batch.map((p) => p.create));
  }

  private answered(m: ThreadAnswer): void {
    const batch = this.out;
    if (!batch || !this.posted) return;
    if (m.needJobs) {
      // The batch's transaction is open in the thread until it has its creates' jobs.
      try {
        const ids = m.ids!;
        const jobs = batch.flatMap((p, i) => (ids[i] !== 0 && p.jobsFor ? p.jobsFor(ids[i]!) : []));
        this.worker.postMessage({ jobs });
      } catch {
        this.worker.postMessage({ abort: true });
      }
      return;
    }
    this.out = undefined;
    this.posted = false;
    this.worker.unref();
    this.turn.leaveThread();
    const ids = m.ids ?? batch.map(() => 0);
    if (ids.some((id) => id !== 0)) this.onWritten();
    const again = ids.filter((id) => id === 0).length;
    if (again > 0) this.counts.madeAgain += again;
    batch.forEach((p, i) => p.resolve(ids[i]!));
    if (this.queue.length > 0) void this.send();
    else this.drained?.();
  }

  private died(error: Error): void {
    if (this.failure || this.stopped) return;
    this.failure = error;
    // A batch still waiting for the turn is answered by send, once the turn comes.
    if (this.out && this.posted) {
      const out = this.out;
      this.out = undefined;
      this.posted = false;
      this.turn.leaveThread();
      for (const p of out) p.reject(error);
    }
    for (const p of this.queue.splice(0)) p.resolve(0);
    this.drained?.();
  }

  /** Waits for the batches queued and out, then stops the thread; creates after this are made on the main connection. */
  async stop(): Promise<void> {
    if (this.open && (this.out !== undefined || this.queue.length > 0))
      await new Promise<void>((resolve) => (this.drained = resolve));
    this.stopped = true;
    this.worker.ref();
    this.worker.postMessage('stop');
    await this.exited;
  }
}

interface ThreadSource {
  file: string;
  turn: WriteTurn;
  autocheckpointPages: number;
  onWritten: () => void;
  thread?: CreateThread;
}

const sources = new WeakMap<object, ThreadSource>();

/** Lets the database's plain creates go through a create thread (SQLite on a file). */
export function attachCreateThread(db: Kysely<Database>, source: Omit<ThreadSource, 'thread'>): void {
  sources.set(db.getExecutor().adapter, source);
}

/**
 * The create thread of db, started on its first use with statements() (compiled by the
 * repository that owns them); undefined where there is none (PostgreSQL, SQLite in memory,
 * a thread that stopped).
 */
export function createThreadOf(db: Kysely<Database>, statements: () => CreateStatements): CreateThread | undefined {
  const source = sources.get(db.getExecutor().adapter);
  if (!source) return undefined;
  source.thread ??= new CreateThread(
    source.file,
    statements(),
    source.autocheckpointPages,
    source.turn,
    source.onWritten,
  );
  return source.thread.open ? source.thread : undefined;
}

/** Stops db's create thread, if it started. */
export async function stopCreateThread(db: Kysely<Database>): Promise<void> {
  await sources.get(db.getExecutor().adapter)?.thread?.stop();
}
