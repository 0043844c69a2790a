import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The request id (x-request-id) of the work under way: set for each writing request by the
 * HTTP edge (src/http/observability.ts) and for each job run by the worker, read by the outbox
 * so that a job carries the id of the request that enqueued it. Outside both it is undefined.
 */
const current = new AsyncLocalStorage<string>();

/** Work under way that holds the request id (holdRequestId). */
let holders = 0;
/** Holds taken over the process's life. */
let holdsTaken = 0;

export function currentRequestId(): string | undefined {
  return current.getStore();
}

/** Runs fn with id as the current request id (undefined leaves none). */
export function withRequestId<T>(id: string | undefined, fn: () => T): T {
  return id === undefined ? current.exit(fn) : current.run(id, fn);
}

/** How many holders are under way: for tests, which check that every request lets go. */
export function requestIdHolders(): number {
  return holders;
}

/** How many holds were ever taken: for tests, which check that a create written alone takes none. */
export function requestIdHoldsTaken(): number {
  return holdsTaken;
}

/**
 * Marks work that may enqueue jobs (a writing request, a job run) as under way until the
 * function returned is called. With none under way the storage is disabled: once entered,
 * an AsyncLocalStorage makes Node 20 run a hook for every promise of the process (about a
 * sixth of the CPU of a cached form read), and it stays entered until disabled. Reads enqueue
 * nothing, so under reads alone no request pays for it.
 */
export function holdRequestId(): () => void {
  holders++;
  holdsTaken++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    holders--;
    if (holders === 0) current.disable();
  };
}

/**
 * Runs fn with id as the current request id, held (holdRequestId) until its promise settles:
 * for the part of a route that runs outside the request-id context (requestIdPassed in
 * src/http/observability.ts) and enqueues jobs.
 */
export async function withHeldRequestId<T>(id: string, fn: () => Promise<T>): Promise<T> {
  const release = holdRequestId();
  try {
    return await withRequestId(id, fn);
  } finally {
    release();
  }
}
