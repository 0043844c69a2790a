// A worker process for test/jobs.test.ts: what `formwork worker` runs (startWorkerProcess),
// with the test's job kinds in place of the application's, so that the production command needs
// no test hook. Settings come from the environment, as for the real command. The test
// stops it with SIGTERM, or kills it with SIGKILL in the middle of a job.
import { loadConfig } from '../../src/config.js';
import { startWorkerProcess } from '../../src/server.js';
import { testKinds } from './job-handlers.js';

const running = await startWorkerProcess(loadConfig(), { kinds: testKinds });
process.stdout.write(`ready ${running.worker.id}\n`);
process.once('SIGTERM', () => {
  void running.close().then(() => process.exit(0));
});
