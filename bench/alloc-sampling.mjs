// Bytes a request allocates in the service, garbage included: V8's sampling heap profiler with
// the objects that minor and major GCs collected kept in the profile, over a window counted in
// requests (so that a slow minute does not change what is sampled), divided by its requests.
// Loaded with NODE_OPTIONS="--import ./bench/alloc-sampling.mjs" by `npm run bench`; it acts
// only in the process that runs `serve` (the bench and its load generator load it too, and skip it).
//
//   ALLOC_SKIP     requests received before the window opens (3000: past the setup and most of
//                  the warm-up of `npm run bench -- post`)
//   ALLOC_COUNT    requests in the window (10000)
//   ALLOC_OUT      where the profile goes (a .heapprofile that Chrome's DevTools open)
//
// It prints `ALLOC <requests> requests, <MB> MB, <KB> KB a request` on the service's stderr.
// Unlike time, this barely moves with the machine's other load: it is how a change's garbage is compared.
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector';

if (process.argv.includes('serve')) {
  const skip = Number(process.env.ALLOC_SKIP ?? 3000);
  const count = Number(process.env.ALLOC_COUNT ?? 10000);
  const session = new inspector.Session();
  session.connect();
  let requests = 0;
  const start = () => {
    session.post('HeapProfiler.enable');
    session.post('HeapProfiler.startSampling', {
      samplingInterval: 16384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  };
  const stop = () =>
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (error) {
        process.stderr.write(`ALLOC failed: ${error.message}\n`);
        return;
      }
      let bytes = 0;
      const walk = (node) => {
        bytes += node.selfSize;
        node.children.forEach(walk);
      };
      walk(result.profile.head);
      if (process.env.ALLOC_OUT) writeFileSync(process.env.ALLOC_OUT, JSON.stringify(result.profile));
      process.stderr.write(
        `ALLOC ${count} requests, ${(bytes / 1e6).toFixed(0)} MB, ${(bytes / count / 1024).toFixed(1)} KB a request\n`,
      );
    });
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function countRequests(event, ...args) {
    if (event === 'request') {
      if (requests === skip) start();
      requests++;
      if (requests === skip + count) stop();
    }
    return emit.call(this, event, ...args);
  };
}
