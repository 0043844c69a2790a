import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The request id (x-request-id) of the work under way: set for each request by the HTTP edge
 * (src/http/request-id.ts) and for each job run by the worker, read by the outbox so that a
 * job carries the id of the request that enqueued it. Outside both it is undefined.
 */
const current = new AsyncLocalStorage<string>();

export function currentRequestId(): string | undefined {
  return current.getStore();
}

/** Runs fn with id as the current request id (undefined leaves none). */
export function withRequestId<T>(id: string | undefined, fn: () => T): T {
  return id === undefined ? current.exit(fn) : current.run(id, fn);
}
