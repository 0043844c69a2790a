import { Worker } from 'node:worker_threads';
import type { RenderAnswer, RenderTask } from './render-thread.js';
import { TemplateLimitError, type EmailTemplates, type RenderedEmail } from './template.js';

/**
 * Rendering off the event loop. An email's templates are the form editor's, and LiquidJS runs
 * them on the loop that renders them: a loop written to run long (nested ranges) held it for
 * its whole renderLimit, 2 s then, and serve's loop is the API's too, so no request of any
 * account was answered meanwhile, on each of the job's attempts. renderLimit cannot bound that
 * by itself: it is checked between the parts of a template, not inside one filter, and
 * `(1..5000000) | uniq` or a sort of as long a range ran 2 to 3 s within a 100 ms renderLimit
 * and the memoryLimit. So the templates render in one worker thread per process
 * (render-thread.ts), started with the first email and sent one email at a time, in turn, with
 * a time limit that stops the thread itself and a heap of its own. One thread, not a pool:
 * emails are background jobs, and a render takes well under a millisecond (an HTML email with
 * the all_fields of 100 fields: 0.57 ms from send to answer, 0.15 ms of it on the loop for the
 * copies, where rendering on the loop took 0.24 ms; about 2,000 a second when many wait).
 */

/**
 * How long the thread may take over one email, its subject and message together and the text
 * part made of the HTML, before it is stopped and the email fails for good: what renderLimit
 * (RENDER_LIMIT_MS, a quarter of a second for each template) does not catch, a single filter
 * working through a huge range. An HTML message near MAX_RENDERED_CHARS took 1.5 s here, its
 * text part most of it: on a slower machine such a message (no one's email) is stopped too.
 */
export const RENDER_TIME_LIMIT_MS = 2_000;

/**
 * How long a new thread may take to load before it is given up (the task fails and is retried
 * with its job): loading is not the template's doing, so it is not counted in its time limit.
 */
const STARTUP_LIMIT_MS = 30_000;

/**
 * The thread's heap (V8's old generation). An ordinary render needs a few MB, and the largest
 * message the limits let through (19.7 million characters of HTML and its 12.7 million of text,
 * 1.5 s here) fits; past this V8 stops the thread, not the process, and the email fails for good.
 */
export const RENDER_HEAP_LIMIT_MB = 256;

interface Task {
  message: RenderTask;
  resolve(rendered: RenderedEmail): void;
  reject(error: Error): void;
  /** The thread it is given to, once it is the one running. */
  worker?: Worker;
  /** Posted to the thread (which was ready). */
  sent?: boolean;
  timer?: NodeJS.Timeout;
}

// The thread's module beside this one: .ts when run from the sources through tsx, .js compiled (dist/, the tests' copy).
const TYPESCRIPT = import.meta.url.endsWith('.ts');
const THREAD_URL = new URL(`./render-thread${TYPESCRIPT ? '.ts' : '.js'}`, import.meta.url);

function startThread(heapLimitMb: number): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: heapLimitMb };
  if (!TYPESCRIPT) return new Worker(THREAD_URL, { resourceLimits });
  // From the sources: tsx's loader hooks are not inherited by a worker on Node 20, so the thread registers them first.
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const source = `import(${tsx}).then((tsx) => { tsx.register(); return import(${JSON.stringify(THREAD_URL.href)}); })`;
  return new Worker(source, { eval: true, resourceLimits });
}

export class RenderThread {
  private worker: Worker | undefined;
  /** The thread has loaded and said so. */
  private ready = false;
  /** A thread being terminated: the next is started once it has gone (one thread a process). */
  private ending: Promise<unknown> | undefined;
  private current: Task | undefined;
  private readonly queue: Task[] = [];
  private nextId = 1;
  /** Terminate the thread once it is idle (the app has closed). */
  private closing = false;

  constructor(
    /** Read as each task is sent. */
    public timeLimitMs = RENDER_TIME_LIMIT_MS,
    readonly heapLimitMb = RENDER_HEAP_LIMIT_MB,
  ) {}

  /**
   * The email's subject and message rendered (either left out is undefined). Throws
   * TemplateLimitError when a limit stopped the render (LiquidJS's, the length, the thread's
   * time or heap), and a plain Error for the other failures of a template or of the thread.
   */
  render(templates: EmailTemplates): Promise<RenderedEmail> {
    return new Promise((resolve, reject) => {
      this.queue.push({ message: { ...templates, id: this.nextId++ }, resolve, reject });
      this.next();
    });
  }

  /** Whether the thread is rendering (or about to render) an email: for tests. */
  get busy(): boolean {
    return this.current !== undefined;
  }

  /**
   * Terminates the thread, now if it is idle, else once the emails queued have rendered (each
   * within the time limit). A later render starts another.
   */
  async close(): Promise<void> {
    this.closing = true;
    if (this.current || this.queue.length > 0) return;
    const worker = this.worker;
    this.worker = undefined;
    this.closing = false;
    if (worker) await this.end(worker);
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
      this.ready = false;
      this.listen(worker);
    }
    // Busy, it keeps the process up (the job waits for it); idle, it never does.
    worker.ref();
    task.worker = worker;
    if (this.ready) this.send(task, worker);
    else {
      task.timer = setTimeout(
        () => this.fail(worker, new Error(`the render thread did not start within ${STARTUP_LIMIT_MS / 1000} s`)),
        STARTUP_LIMIT_MS,
      );
      task.timer.unref();
    }
  }

  private send(task: Task, worker: Worker): void {
    clearTimeout(task.timer);
    task.sent = true;
    task.timer = setTimeout(() => {
      const limit = `${this.timeLimitMs / 1000} s`;
      this.fail(
        worker,
        new TemplateLimitError(`the templates took more than ${limit} to render and were stopped`, undefined),
      );
    }, this.timeLimitMs);
    task.timer.unref();
    try {
      worker.postMessage(task.message);
    } catch (error) {
      // Variables that do not clone (a bug of the caller's): that email fails, the thread carries on.
      this.settle(task);
      task.reject(error as Error);
      this.next();
    }
  }

  private listen(worker: Worker): void {
    worker.on('message', (answer: RenderAnswer) => {
      const task = this.current?.worker === worker ? this.current : undefined;
      if ('ready' in answer) {
        if (this.worker === worker) this.ready = true;
        if (task && !task.sent) this.send(task, worker);
        return;
      }
      if (!task || task.message.id !== answer.id) return;
      this.settle(task);
      if ('error' in answer)
        task.reject(answer.limit ? new TemplateLimitError(answer.error, answer.part) : new Error(answer.error));
      else task.resolve({ subject: answer.subject, text: answer.text, html: answer.html });
      this.next();
    });
    let died: Error | undefined;
    worker.on('error', (error: Error & { code?: string }) => {
      died =
        error.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? new TemplateLimitError(
              `the templates needed more than the ${this.heapLimitMb} MB of memory a render may use, and were stopped`,
              undefined,
            )
          : new Error(`the render thread stopped: ${error.message}`, { cause: error });
    });
    worker.on('exit', (code) => {
      if (this.worker === worker) this.worker = undefined;
      // Ended unasked (out of memory, a crash): the email it rendered fails, the next gets a new thread.
      if (this.current?.worker === worker)
        this.fail(worker, died ?? new Error(`the render thread exited (code ${code})`));
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

/** The process's render thread. */
export const renderThread = new RenderThread();
