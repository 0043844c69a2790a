import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * How often the checkpointer copies what the WAL holds into the database file. Between two
 * checkpoints the WAL grows by what was written meanwhile (a few MB at most at full load).
 */
const CHECKPOINT_EVERY_MS = 200;

/**
 * The WAL size, in pages, at which the writing connection checkpoints by itself: only when the
 * checkpointer cannot keep up (or is gone), so that the WAL stays bounded whatever happens.
 */
export const FALLBACK_AUTOCHECKPOINT_PAGES = 16384;

// Plain JavaScript, run as a CommonJS worker: the same from source (tsx) and from dist.
const SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const SQLite = require(workerData.driver);
const db = new SQLite(workerData.file);
db.pragma('busy_timeout = 5000');
const checkpoint = () => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch (error) {
    parentPort.postMessage({ error: String(error && error.message || error) });
  }
};
const timer = setInterval(checkpoint, workerData.everyMs);
parentPort.on('message', () => {
  clearInterval(timer);
  checkpoint();
  db.close();
  parentPort.close();
});
`;

export interface Checkpointer {
  stop(): Promise<void>;
}

/**
 * Checkpoints a SQLite database in WAL mode from a thread of its own, with a connection of
 * its own. A checkpoint copies pages into the database file and syncs it: tens of
 * milliseconds on a slow disk, which SQLite's automatic checkpoint spends inside whichever
 * commit crosses the threshold, on the event loop, holding up every request meanwhile. A
 * passive checkpoint needs no lock that the writer takes, so the writer goes on meanwhile.
 */
export function startCheckpointer(file: string, onError: (message: string) => void): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(SOURCE, { eval: true, workerData: { file, driver, everyMs: CHECKPOINT_EVERY_MS } });
  worker.unref();
  worker.on('message', (m: { error?: string }) => {
    if (m.error) onError(m.error);
  });
  worker.on('error', (error) => onError(error.message));
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    async stop() {
      // Kept from holding the process open while it runs; held open while it finishes.
      worker.ref();
      worker.postMessage('stop');
      await exited;
    },
  };
}
