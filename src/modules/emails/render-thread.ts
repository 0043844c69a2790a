import { parentPort } from 'node:worker_threads';
import type { ThreadReady } from '../../threads/task-thread.js';
import {
  renderEmail,
  TemplateLimitError,
  type EmailTemplates,
  type RenderedEmail,
  type TemplatePart,
} from './template.js';

/**
 * The render thread (threaded-render.ts starts it): renders the templates of each email it is
 * sent, one at a time, and answers what they made, or the error's message (and whether a limit
 * stopped the render, and in which template). It says when it is ready, so that the time limit
 * of a render is not spent loading this module.
 */

export type RenderTask = EmailTemplates & { id: number };

export type RenderAnswer =
  (RenderedEmail & { id: number }) | { id: number; error: string; limit: boolean; part: TemplatePart | undefined };

const port = parentPort!;
port.on('message', (task: RenderTask) => {
  renderEmail(task).then(
    (rendered) => port.postMessage({ id: task.id, ...rendered } satisfies RenderAnswer),
    (error: unknown) =>
      port.postMessage({
        id: task.id,
        error: error instanceof Error ? error.message : String(error),
        limit: error instanceof TemplateLimitError,
        part: error instanceof TemplateLimitError ? error.part : undefined,
      } satisfies RenderAnswer),
  );
});
port.postMessage({ ready: true } satisfies ThreadReady);
