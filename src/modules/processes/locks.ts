import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import type pg from 'pg';
import { loadPg } from '../../db/pg-driver.js';
import type { Executor } from '../../db/transaction.js';
import { heldAdvisoryLocks, tryAdvisoryLock } from './repository.js';

/**
 * A lock that a process holds for as long as it lives and that its end lets go of by
 * itself, however it ends (SIGKILL, a crash, the machine stopping): the operating system
 * or the database server releases it, so others know at once that the process is gone.
 */
export interface LifeLock {
  /** Takes the lock of process id, until release() or the end of the process. */
  hold(id: number): Promise<void>;
  /** Takes the lock again if it was lost (its connection dropped); called with every heartbeat. */
  keep(): Promise<void>;
  /** Of these process ids, those whose lock is held. */
  heldAmong(ids: number[], db: Executor): Promise<Set<number>>;
  /** The process ids that have left something behind to forget (lock files), if the lock keeps any. */
  leftBehind(): number[];
  /** Removes what the locks of these stopped processes left behind. */
  forget(ids: number[]): void;
  release(): Promise<void>;
}

/**
 * SQLite (one machine): an exclusive lock on a small file of its own per process,
 * DATA_DIR/processes/<id>.lock, taken with SQLite's own file locking. The kernel drops a
 * process's file locks when it ends, whatever the pid namespace (containers sharing a
 * volume) and without trusting pids, which are reused.
 */
export class FileLifeLock implements LifeLock {
  private readonly dir: string;
  private held: SQLite.Database | undefined;
  private id: number | undefined;

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'processes');
  }

  private file(id: number): string {
    return join(this.dir, `${id}.lock`);
  }

  async hold(id: number): Promise<void> {
    mkdirSync(this.dir, { recursive: true });
    const db = new SQLite(this.file(id));
    db.exec('BEGIN EXCLUSIVE');
    this.held = db;
    this.id = id;
  }

  async keep(): Promise<void> {}

  async heldAmong(ids: number[]): Promise<Set<number>> {
    const out = new Set<number>();
    for (const id of ids) {
      if (id === this.id) {
        out.add(id);
        continue;
      }
      let probe: SQLite.Database;
      try {
        probe = new SQLite(this.file(id), { fileMustExist: true, timeout: 0 });
      } catch {
        continue; // no lock file: the process stopped and was forgotten
      }
      try {
        // Free only if no live process holds its exclusive lock; the probe writes nothing.
        probe.exec('BEGIN IMMEDIATE');
        probe.exec('ROLLBACK');
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'SQLITE_BUSY') throw error;
        out.add(id);
      } finally {
        probe.close();
      }
    }
    return out;
  }

  leftBehind(): number[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    return names.flatMap((name) => {
      const m = /^(\d+)\.lock$/.exec(name);
      return m && Number(m[1]) !== this.id ? [Number(m[1])] : [];
    });
  }

  forget(ids: number[]): void {
    for (const id of ids) if (id !== this.id) rmSync(this.file(id), { force: true });
  }

  async release(): Promise<void> {
    if (!this.held) return;
    this.held.close();
    this.held = undefined;
    if (this.id !== undefined) rmSync(this.file(this.id), { force: true });
  }
}

/** key1 of the advisory locks: "Form" in ASCII, so that other applications' locks on the same database do not collide. */
const LOCK_NAMESPACE = 0x466f726d;

/**
 * PostgreSQL (many machines): a session advisory lock on a connection of its own. The
 * server drops it when the session ends, which a killed process's closed socket ends at
 * once; a machine cut off altogether is left to the heartbeat timeout.
 */
export class AdvisoryLifeLock implements LifeLock {
  private client: pg.Client | undefined;
  private id: number | undefined;
  private connecting: Promise<void> | undefined;

  constructor(private readonly databaseUrl: string) {}

  async hold(id: number): Promise<void> {
    this.id = id;
    await this.connect(true);
    if (!this.client) throw new Error(`The advisory lock of process ${id} is held by another session`);
  }

  keep(): Promise<void> {
    if (this.client || this.id === undefined) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async connect(failLoudly = false): Promise<void> {
    const id = this.id;
    if (id === undefined) return;
    const client = new (loadPg().Client)({ connectionString: this.databaseUrl, connectionTimeoutMillis: 10_000 });
    const lost = () => {
      if (this.client === client) this.client = undefined;
      void client.end().catch(() => {});
    };
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.connect();
      // Only try: a session that dropped may still hold it on the server for a while.
      if (this.id === id && (await tryAdvisoryLock(client, LOCK_NAMESPACE, id))) {
        this.client = client;
        return;
      }
    } catch (error) {
      // At start the process must not run without its lock; later, the next heartbeat tries again.
      if (failLoudly) {
        await client.end().catch(() => {});
        throw error;
      }
    }
    await client.end().catch(() => {});
  }

  heldAmong(ids: number[], db: Executor): Promise<Set<number>> {
    return heldAdvisoryLocks(db, LOCK_NAMESPACE, ids);
  }

  leftBehind(): number[] {
    return [];
  }

  forget(): void {}

  async release(): Promise<void> {
    this.id = undefined;
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
