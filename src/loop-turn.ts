/**
 * Lets the event loop serve what waits (requests, timers, other jobs) before a job's next
 * batch. On SQLite a batch's statements run synchronously, so the awaits between batches are
 * microtasks that never reach the loop: a reindex of a form with 10,000 submissions held
 * every request of the process for the three seconds it took (`npm run bench -- reindex`).
 * Called between transactions, never inside one: on SQLite's one connection, what ran in the
 * turn would run inside it.
 */
export function loopTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
