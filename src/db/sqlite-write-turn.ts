/**
 * Whose turn it is to write to a SQLite database in this process: the main connection's
 * (Kysely's one connection, one statement or transaction at a time) or the create thread's
 * (sqlite-create-thread.ts). SQLite takes one writer at a time, and better-sqlite3 waits for
 * a lock that another connection holds by sleeping in the calling thread: the main thread
 * would stop serving while the create thread commits. So the main connection takes its turn
 * here, without blocking, before it writes, and the create thread is sent a batch only in
 * its own turn. Another process's writes still meet SQLite's lock and busy_timeout, as before.
 *
 * A waiting main write goes before a waiting batch of creates: the batches come one after
 * another under load, and the main connection's writes (forms, tokens, the outbox) are few.
 */
export class WriteTurn {
  private holder: 'main' | 'thread' | undefined;
  private readonly mainWaiting: (() => void)[] = [];
  private readonly threadWaiting: (() => void)[] = [];

  enterMain(): Promise<void> {
    return this.enter('main', this.mainWaiting);
  }

  leaveMain(): void {
    this.leave('main');
  }

  enterThread(): Promise<void> {
    return this.enter('thread', this.threadWaiting);
  }

  leaveThread(): void {
    this.leave('thread');
  }

  private enter(who: 'main' | 'thread', waiting: (() => void)[]): Promise<void> {
    // A free turn has nobody waiting for it: leave hands it to the next in line at once.
    if (this.holder === undefined) {
      this.holder = who;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => waiting.push(resolve));
  }

  private leave(who: 'main' | 'thread'): void {
    if (this.holder !== who) throw new Error(`WriteTurn: ${who} left a turn it did not hold`);
    this.holder = undefined;
    const main = this.mainWaiting.shift();
    if (main) {
      this.holder = 'main';
      main();
      return;
    }
    const thread = this.threadWaiting.shift();
    if (thread) {
      this.holder = 'thread';
      thread();
    }
  }
}
