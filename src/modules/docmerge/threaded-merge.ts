import { TaskThread, threadModule, type ThreadKind } from '../../threads/task-thread.js';
import type { MergeInput } from './merge-input.js';
import type { MergeTask, ThreadAnswer } from './merge-thread.js';
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

type MergeResult = Exclude<ThreadAnswer, { error: string }>;

/** How a stopped task's TemplateError begins. */
function couldNot(task: MergeTask): string {
  return task.op === 'merge' ? 'could not be merged' : 'could not be read';
}

const MERGE: ThreadKind<MergeTask, ThreadAnswer, MergeResult> = {
  name: 'merge',
  module: threadModule(import.meta.url, 'merge-thread'),
  result(answer) {
    if (!('error' in answer)) return answer;
    if (answer.template) throw new TemplateError(answer.error);
    // Not the template's doing: its stack in the thread says where it came from, this one would not.
    const error = new Error(answer.error);
    if (answer.stack) error.stack = answer.stack;
    throw error;
  },
  timedOut: (task, limitMs) =>
    new TemplateError(`${couldNot(task)} within ${limitMs / 1000} s, the limit of a merge: it was stopped`),
  outOfMemory: (task, heapLimitMb) =>
    new TemplateError(
      `${couldNot(task)}: it needed more than the ${heapLimitMb} MB of memory a merge may use, and was stopped`,
    ),
};

export class MergeThread extends TaskThread<MergeTask, ThreadAnswer, MergeResult> {
  constructor(timeLimitMs = MERGE_TIME_LIMIT_MS, heapLimitMb = MERGE_HEAP_LIMIT_MB) {
    super(MERGE, timeLimitMs, heapLimitMb);
  }

  /** The template with the input's values merged in; throws TemplateError, as merging on the loop did. */
  async merge(input: MergeInput): Promise<Buffer> {
    const answer = await this.run({ op: 'merge', input });
    return Buffer.from((answer as { bytes: ArrayBuffer }).bytes);
  }

  /** template.ts templateTags, in the thread. */
  async templateTags(kind: TemplateKind, template: Uint8Array): Promise<string[]> {
    return ((await this.run({ op: 'tags', kind, template })) as { tags: string[] }).tags;
  }
}

/** The process's merge thread. */
export const mergeThread = new MergeThread();
