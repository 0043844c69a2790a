// Bytes a request allocates in the service, garbage included: V8's sampling heap profiler with
// the objects that minor and major GCs collected kept in the profile, over a window of the
// service's life, divided by the requests it received in that window. Loaded with
// NODE_OPTIONS="--import ./bench/alloc-sampling.mjs" by `npm run bench`; it acts only in the
// process that runs `serve` (the bench and its load generator load it too, and skip it).
//
//   ALLOC_START_MS, ALLOC_STOP_MS  the window, from the service's start (12000 and 24000: the
//                                  POST's measured 10 s in `npm run bench -- post`)
//   ALLOC_OUT                      where the profile goes (a .heapprofile that Chrome's DevTools open)
//
// It prints `ALLOC <requests> requests, <MB> MB, <KB> KB a request` on the service's stderr.
// Unlike time, this barely moves with the machine's other load: it is how a change's garbage is compared.
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector';
import { setTimeout } from 'node:timers';

if (process.argv.includes('serve')) {
  let counting = false;
  let requests = 0;
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function countRequests(event, ...args) {
    if (counting && event === 'request') requests++;
    return emit.call(this, event, ...args);
  };
  const session = new inspector.Session();
  session.connect();
  const start = Number(process.env.ALLOC_START_MS ?? 12000);
  const stop = Number(process.env.ALLOC_STOP_MS ?? 24000);
  setTimeout(() => {
    session.post('HeapProfiler.enable');
    session.post('HeapProfiler.startSampling', {
      samplingInterval: 16384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    counting = true;
  }, start).unref();
  setTimeout(() => {
    counting = false;
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
        `ALLOC ${requests} requests, ${(bytes / 1e6).toFixed(0)} MB, ${(bytes / Math.max(requests, 1) / 1024).toFixed(1)} KB a request\n`,
      );
    });
  }, stop).unref();
}
