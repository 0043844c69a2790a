import { parentPort } from 'node:worker_threads';
import type { ThreadReady } from '../../threads/task-thread.js';
import { mergeInput, type MergeInput } from './merge-input.js';
import { templateTags, TemplateError, type TemplateKind } from './template.js';

/**
 * The merge thread (threaded-merge.ts starts it): merges a document, or reads a template's
 * tags, for each task it is sent, one at a time, and answers the bytes (their ArrayBuffer
 * transferred), the tags, or the error's message (and whether it was a TemplateError). It says
 * when it is ready, so that the time limit of a task is not spent loading this module.
 */

export type MergeTask = { op: 'merge'; input: MergeInput } | { op: 'tags'; kind: TemplateKind; template: Uint8Array };

export type ThreadTask = MergeTask & { id: number };

export type ThreadAnswer =
  | { id: number; bytes: ArrayBuffer }
  | { id: number; tags: string[] }
  | { id: number; error: string; template: boolean; stack: string | undefined };

/** The bytes in an ArrayBuffer of their own, to transfer (a small Buffer is a view into Node's shared pool). */
function ownBuffer(bytes: Uint8Array): ArrayBuffer {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer)
    return bytes.buffer;
  return new Uint8Array(bytes).buffer;
}

async function perform(task: ThreadTask): Promise<ThreadAnswer> {
  if (task.op === 'tags') {
    const template = Buffer.from(task.template.buffer, task.template.byteOffset, task.template.byteLength);
    return { id: task.id, tags: await templateTags(task.kind, template) };
  }
  return { id: task.id, bytes: ownBuffer(await mergeInput(task.input)) };
}

const port = parentPort!;
port.on('message', (task: ThreadTask) => {
  perform(task).then(
    (answer) => port.postMessage(answer, 'bytes' in answer ? [answer.bytes] : []),
    (error: unknown) =>
      port.postMessage({
        id: task.id,
        error: error instanceof Error ? error.message : String(error),
        template: error instanceof TemplateError,
        stack: error instanceof Error ? error.stack : undefined,
      } satisfies ThreadAnswer),
  );
});
port.postMessage({ ready: true } satisfies ThreadReady);
