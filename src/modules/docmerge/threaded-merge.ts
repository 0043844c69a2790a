import { Worker } from 'node:worker_threads';
import type { MergeInput } from './merge-input.js';
import type { ThreadAnswer, ThreadTask } from './merge-thread.js';
import { TemplateError, type TemplateKind } from './template.js';

/**
 * Merging off the event loop. A DOCX within the limits (template.ts) is up to seconds of pure
 * CPU to merge (about 0.3–0.5 s per MiB of XML) and more to read its tags, and the process that
 * merges also serves the API: on the loop, every request of the process waited that long. So
 * merges and tag readings run in one worker thread per process (merge-thread.ts), started with
 * the first and sent one task at a time, in turn. One thread, not a pool: documents are made by
 * background jobs, and one thread keeps merging to one core of the process's, whatever the jobs'
 * concurrency, leaving the others to the API.
 */

/**
 * How long one task may run before the thread is stopped and the task failed. The heaviest
 * template within the limits (5 MiB of XML, all merge tags) took 5 s to merge and 9 s to read on
 * a slow shared machine (2026-12), an ordinary large one 2 s and 6 s: 60 s leaves room for a
 * loaded machine, fails only a task that would never end (a library caught in a loop), and holds
 * the tasks queued behind a stuck one a minute at most.
 */
export const MERGE_TIME_LIMIT_MS = 60_000;

/**
 * The thread's heap (V8's old generation). The heaviest template within the limits took about
 * 650 MB reading its tags and 450 MB merging (an ordinary large one 450 and 300): over this, V8
 * stops the thread, not the process, and the task fails (the process's own heap is larger).
 */
export const MERGE_HEAP_LIMIT_MB = 1024;

interface Task {
  message: ThreadTask;
  resolve(answer: ThreadAnswer): void;
  reject(error: Error): void;
  /** The thread running it, once sent. */
  worker?: Worker;
  timer?: NodeJS.Timeout;
}

/** How a stopped task's TemplateError begins. */
function couldNot(task: Task): string {
  return task.message.op === 'merge' ? 'could not be merged' : 'could not be read';
}

// The thread's module beside this one: .ts when run from the sources through tsx, .js compiled (dist/, the tests' copy).
const TYPESCRIPT = import.meta.url.endsWith('.ts');
const THREAD_URL = new URL(`./merge-thread${TYPESCRIPT ? '.ts' : '.js'}`, import.meta.url);

function startThread(heapLimitMb: number): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: heapLimitMb };
  if (!TYPESCRIPT) return new Worker(THREAD_URL, { resourceLimits });
  // From the sources: tsx's loader hooks are not inherited by a worker on Node 20, so the thread registers them first.
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const source = `import(${tsx}).then((tsx) => { tsx.register(); return import(${JSON.stringify(THREAD_URL.href)}); })`;
  return new Worker(source, { eval: true, resourceLimits });
}

export class MergeThread {
  private worker: Worker | undefined;
  /** A thread being terminated: the next is started once it has gone (one thread a process). */
  private ending: Promise<unknown> | undefined;
  private current: Task | undefined;
  private readonly queue: Task[] = [];
  private nextId = 1;
  /** Terminate the thread once it is idle (the app has closed). */
  private closing = false;

  constructor(
    /** Read as each task starts (tests shorten it). */
    public timeLimitMs = MERGE_TIME_LIMIT_MS,
    readonly heapLimitMb = MERGE_HEAP_LIMIT_MB,
  ) {}

  /** The template with the input's values merged in; throws TemplateError, as merging on the loop did. */
  async merge(input: MergeInput): Promise<Buffer> {
    const answer = await this.run({ id: this.nextId++, op: 'merge', input });
    return Buffer.from((answer as { bytes: ArrayBuffer }).bytes);
  }

  /** template.ts templateTags, in the thread. */
  async templateTags(kind: TemplateKind, template: Uint8Array): Promise<string[]> {
    return ((await this.run({ id: this.nextId++, op: 'tags', kind, template })) as { tags: string[] }).tags;
  }

  /** The thread's id (tests: a stopped thread is replaced), or undefined when there is none. */
  get threadId(): number | undefined {
    return this.worker?.threadId;
  }

  /**
   * Terminates the thread, now if it is idle, else once the tasks queued have run (each within
   * the time limit; a stopping service waits for its jobs anyway). A later task starts another.
   */
  async close(): Promise<void> {
    this.closing = true;
    if (this.current || this.queue.length > 0) return;
    const worker = this.worker;
    this.worker = undefined;
    this.closing = false;
    if (worker) await this.end(worker);
  }

  private run(message: ThreadTask): Promise<ThreadAnswer> {
    return new Promise((resolve, reject) => {
      this.queue.push({ message, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.current || this.ending) return;
    const task = this.queue.shift();
    if (!task) {
      this.worker?.unref();
      if (this.closing) void this.close();
      return;
    }
    this.current = task;
    let worker = this.worker;
    if (!worker) {
      worker = startThread(this.heapLimitMb);
      this.worker = worker;
      this.listen(worker);
    }
    // Busy, it keeps the process up (the job waits for it); idle, it never does.
    worker.ref();
    task.worker = worker;
    // From the task's sending: the first task's includes starting the thread (some 100 ms).
    task.timer = setTimeout(() => {
      const limit = `${this.timeLimitMs / 1000} s`;
      this.fail(worker, new TemplateError(`${couldNot(task)} within ${limit}, the limit of a merge: it was stopped`));
    }, this.timeLimitMs);
    task.timer.unref();
    try {
      worker.postMessage(task.message);
    } catch (error) {
      // Input that does not clone (a bug of the caller's): that task fails, the thread carries on.
      this.settle(task);
      task.reject(error as Error);
      this.next();
    }
  }

  private listen(worker: Worker): void {
    worker.on('message', (answer: ThreadAnswer) => {
      const task = this.current;
      if (!task || task.worker !== worker || task.message.id !== answer.id) return;
      this.settle(task);
      if ('error' in answer) {
        const error = answer.template ? new TemplateError(answer.error) : new Error(answer.error);
        if (!answer.template && answer.stack) error.stack = answer.stack;
        task.reject(error);
      } else task.resolve(answer);
      this.next();
    });
    let died: Error | undefined;
    worker.on('error', (error: Error & { code?: string }) => {
      const task = this.current?.worker === worker ? this.current : undefined;
      died =
        error.code === 'ERR_WORKER_OUT_OF_MEMORY' && task
          ? new TemplateError(
              `${couldNot(task)}: it needed more than the ${this.heapLimitMb} MB of memory a merge may use, and was stopped`,
            )
          : new Error(`the merge thread stopped: ${error.message}`, { cause: error });
    });
    worker.on('exit', (code) => {
      if (this.worker === worker) this.worker = undefined;
      // Ended unasked (out of memory, a crash): the task it ran fails, the next gets a new thread.
      if (this.current?.worker === worker)
        this.fail(worker, died ?? new Error(`the merge thread exited (code ${code})`));
    });
  }

  /** Fails the task the thread runs and terminates the thread. */
  private fail(worker: Worker, error: Error): void {
    const task = this.current;
    if (!task || task.worker !== worker) return;
    this.settle(task);
    if (this.worker === worker) this.worker = undefined;
    task.reject(error);
    void this.end(worker);
  }

  private settle(task: Task): void {
    clearTimeout(task.timer);
    this.current = undefined;
  }

  /** Terminates a thread; the queue goes on once it has gone. */
  private end(worker: Worker): Promise<void> {
    const ending = worker.terminate().then(
      () => undefined,
      () => undefined,
    );
    this.ending = ending;
    return ending.then(() => {
      if (this.ending === ending) this.ending = undefined;
      this.next();
    });
  }
}

/** The process's merge thread. */
export const mergeThread = new MergeThread();
