// A worker process for test/docmerge.test.ts: `formwork worker` with the real docmerge.generate
// kind, except that its storage prints "stored" once a document's object is written and then
// waits (the test kills it there with SIGKILL), so that the production code needs no test hook.
import type { Readable } from 'node:stream';
import { loadConfig } from '../../src/config.js';
import { defineJob } from '../../src/jobs/kind.js';
import { generateDocument } from '../../src/modules/docmerge/generate.js';
import { generateDocumentJob } from '../../src/modules/docmerge/jobs.js';
import { startWorkerProcess } from '../../src/server.js';
import type { PutOptions } from '../../src/storage/types.js';

const pausing = defineJob({
  name: generateDocumentJob.name,
  payload: generateDocumentJob.payload,
  maxAttempts: generateDocumentJob.maxAttempts,
  handler: (ctx, job, tools) =>
    generateDocument(
      {
        ...ctx,
        storage: Object.assign(Object.create(ctx.storage) as typeof ctx.storage, {
          async put(key: string, body: Readable, options: PutOptions) {
            const result = await ctx.storage.put(key, body, options);
            process.stdout.write(`stored ${key}\n`);
            await new Promise(() => undefined);
            return result;
          },
        }),
      },
      job as Parameters<typeof generateDocument>[1],
      tools as Parameters<typeof generateDocument>[2],
    ),
});

const running = await startWorkerProcess(loadConfig(), { kinds: [pausing] });
process.stdout.write(`ready ${running.worker.id}\n`);
process.once('SIGTERM', () => {
  void running.close().then(() => process.exit(0));
});
