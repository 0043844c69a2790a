import { Worker } from 'node:worker_threads';

/**
 * A worker thread that runs one kind of task, one at a time, in turn, under a time limit and a
 * heap of its own, for work that would otherwise hold the event loop that serves the API. One
 * thread a process, started with the first task: a kind that needs one pays nothing until then.
 * Why each kind runs in a thread, and the numbers of its limits, are with the kind
 * (docmerge/threaded-merge.ts, emails/threaded-render.ts).
 *
 * The thread's module answers each task it is sent (the message is the task and its id) with
 * an answer that carries the same id, and posts a ThreadReady once it has loaded: until then
 * nothing is sent, so that a task's time limit is not spent loading the module.
 */

/** What a thread's module posts once it has loaded, before any answer. */
export interface ThreadReady {
  ready: true;
}

/** What makes a kind of thread: the parts in which kinds differ. */
export interface ThreadKind<Task, Answer, Result> {
  /** The thread's name in the errors of the thread itself: 'merge' makes 'the merge thread exited (code 1)'. */
  name: string;
  /** The thread's module (threadModule). */
  module: URL;
  /** The task's result, from the thread's answer to it; throws the task's error when the answer is one. */
  result(answer: Answer): Result;
  /** The error of a task that the time limit stopped. */
  timedOut(task: Task, limitMs: number): Error;
  /** The error of a task whose thread ran out of heap. */
  outOfMemory(task: Task, heapLimitMb: number): Error;
}

/**
 * How long a new thread may take to load before it is given up (the task fails, a plain Error,
 * and is retried with its job): loading is not the task's doing, so it is not counted in the
 * task's time limit.
 */
const STARTUP_LIMIT_MS = 30_000;

/**
 * The module `name` beside the module at `base` (its import.meta.url): .ts when run from the
 * sources through tsx, .js compiled (dist/, the tests' copy).
 */
export function threadModule(base: string, name: string): URL {
  return new URL(`./${name}${base.endsWith('.ts') ? '.ts' : '.js'}`, base);
}

function startThread(module: URL, heapLimitMb: number): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: heapLimitMb };
  if (!module.pathname.endsWith('.ts')) return new Worker(module, { resourceLimits });
  // From the sources: tsx's loader hooks are not inherited by a worker on Node 20, so the thread registers them first.
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const source = `import(${tsx}).then((tsx) => { tsx.register(); return import(${JSON.stringify(module.href)}); })`;
  return new Worker(source, { eval: true, resourceLimits });
}

function isReady(message: unknown): message is ThreadReady {
  return (message as Partial<ThreadReady> | null)?.ready === true;
}

interface Pending<Task, Result> {
  id: number;
  task: Task;
  resolve(result: Result): void;
  reject(error: Error): void;
  /** The thread it is given to, once it is the one running. */
  worker?: Worker;
  /** Posted to the thread (which was ready). */
  sent?: boolean;
  timer?: NodeJS.Timeout;
}

export class TaskThread<Task extends object, Answer extends { id: number }, Result> {
  private worker: Worker | undefined;
  /** The thread has loaded and said so. */
  private ready = false;
  /** A thread being terminated: the next is started once it has gone (one thread a process). */
  private ending: Promise<unknown> | undefined;
  private current: Pending<Task, Result> | undefined;
  private readonly queue: Pending<Task, Result>[] = [];
  private nextId = 1;
  /** Terminate the thread once it is idle (the app has closed). */
  private closing = false;

  constructor(
    private readonly kind: ThreadKind<Task, Answer, Result>,
    /** Read as each task is sent (tests shorten it). */
    public timeLimitMs: number,
    readonly heapLimitMb: number,
  ) {}

  /** The thread's id (tests: a stopped thread is replaced), or undefined when there is none. */
  get threadId(): number | undefined {
    return this.worker?.threadId;
  }

  /** Whether the thread is running (or about to run) a task: for tests. */
  get busy(): boolean {
    return this.current !== undefined;
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

  /** The task run in the thread, after those queued before it. */
  protected run(task: Task): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, task, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.current || this.ending) return;
    const pending = this.queue.shift();
    if (!pending) {
      this.worker?.unref();
      if (this.closing) void this.close();
      return;
    }
    this.current = pending;
    let worker = this.worker;
    if (!worker) {
      worker = startThread(this.kind.module, this.heapLimitMb);
      this.worker = worker;
      this.ready = false;
      this.listen(worker);
    }
    // Busy, it keeps the process up (the job waits for it); idle, it never does.
    worker.ref();
    pending.worker = worker;
    if (this.ready) this.send(pending, worker);
    else {
      const limit = `${STARTUP_LIMIT_MS / 1000} s`;
      pending.timer = setTimeout(
        () => this.fail(worker, new Error(`the ${this.kind.name} thread did not start within ${limit}`)),
        STARTUP_LIMIT_MS,
      );
      pending.timer.unref();
    }
  }

  private send(pending: Pending<Task, Result>, worker: Worker): void {
    clearTimeout(pending.timer);
    pending.sent = true;
    const limitMs = this.timeLimitMs;
    pending.timer = setTimeout(() => this.fail(worker, this.kind.timedOut(pending.task, limitMs)), limitMs);
    pending.timer.unref();
    try {
      worker.postMessage({ ...pending.task, id: pending.id });
    } catch (error) {
      // A task that does not clone (a bug of the caller's): that task fails, the thread carries on.
      this.settle();
      pending.reject(error as Error);
      this.next();
    }
  }

  private listen(worker: Worker): void {
    worker.on('message', (message: Answer | ThreadReady) => {
      const pending = this.current?.worker === worker ? this.current : undefined;
      if (isReady(message)) {
        if (this.worker === worker) this.ready = true;
        if (pending && !pending.sent) this.send(pending, worker);
        return;
      }
      if (!pending || pending.id !== message.id) return;
      this.settle();
      try {
        pending.resolve(this.kind.result(message));
      } catch (error) {
        pending.reject(error as Error);
      }
      this.next();
    });
    let died: Error | undefined;
    worker.on('error', (error: Error & { code?: string }) => {
      const pending = this.current?.worker === worker ? this.current : undefined;
      died =
        error.code === 'ERR_WORKER_OUT_OF_MEMORY' && pending
          ? this.kind.outOfMemory(pending.task, this.heapLimitMb)
          : new Error(`the ${this.kind.name} thread stopped: ${error.message}`, { cause: error });
    });
    worker.on('exit', (code) => {
      if (this.worker === worker) this.worker = undefined;
      // Ended unasked (out of memory, a crash): the task it ran fails, the next gets a new thread.
      if (this.current?.worker === worker)
        this.fail(worker, died ?? new Error(`the ${this.kind.name} thread exited (code ${code})`));
    });
  }

  /** Fails the task the thread runs and terminates the thread. */
  private fail(worker: Worker, error: Error): void {
    const pending = this.current;
    if (!pending || pending.worker !== worker) return;
    this.settle();
    if (this.worker === worker) this.worker = undefined;
    pending.reject(error);
    void this.end(worker);
  }

  private settle(): void {
    clearTimeout(this.current?.timer);
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
