import { randomBytes } from 'node:crypto';
import { constants, createWriteStream } from 'node:fs';
import { copyFile, mkdir, open, readdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ByteLimit } from './limit.js';
import {
  checkKey,
  ObjectNotFoundError,
  ObjectTooLargeError,
  type PutOptions,
  type Storage,
  type StoredObject,
  type TemporaryFile,
} from './types.js';

const isMissing = (error: unknown) => (error as NodeJS.ErrnoException | null)?.code === 'ENOENT';

/** <writer>.<random>.part, or <random>.part from a version that named no writer. */
const TEMPORARY = /^(?:([A-Za-z0-9_-]{1,64})\.)?[0-9a-f]{24}\.part$/;

/**
 * Files on local disk under one directory. A put writes a temporary file in the same
 * file system and renames it into place, so a reader never sees half an object and a
 * refused or broken upload leaves nothing behind. A process killed mid-put leaves its
 * temporary file, named after the writer (the process), for temporaryFiles() to find.
 */
export class LocalStorage implements Storage {
  readonly driver = 'local' as const;
  private readonly tmpDir: string;

  constructor(
    private readonly root: string,
    private readonly writer?: string,
  ) {
    this.tmpDir = join(root, '.tmp');
    if (writer !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(writer))
      throw new Error(`Invalid writer name: ${JSON.stringify(writer)}`);
  }

  private path(key: string): string {
    return join(this.root, checkKey(key));
  }

  private async temporaryPath(): Promise<string> {
    await mkdir(this.tmpDir, { recursive: true });
    return join(
      this.tmpDir,
      `${this.writer === undefined ? '' : `${this.writer}.`}${randomBytes(12).toString('hex')}.part`,
    );
  }

  async put(key: string, body: Readable, options: PutOptions): Promise<{ size: number }> {
    const target = this.path(key);
    const tmp = await this.temporaryPath();
    const limit = new ByteLimit(options.maxBytes);
    const file = createWriteStream(tmp, { flags: 'wx' });
    try {
      await pipeline(body, limit, file);
      await mkdir(dirname(target), { recursive: true });
      await rename(tmp, target);
      return { size: limit.bytes };
    } catch (error) {
      // pipeline rejects as soon as a stream fails, while the file may still be opening (a
      // limit passed or a body failed at its first chunk): removed before its open, the file
      // would be made after and left (seen under load). Its close comes after the open.
      if (!file.closed) await new Promise<void>((resolve) => file.once('close', () => resolve()));
      await rm(tmp, { force: true });
      if (limit.exceeded) throw new ObjectTooLargeError(options.maxBytes);
      throw error;
    }
  }

  async get(key: string, range?: { start: number; end: number }): Promise<StoredObject> {
    const path = this.path(key);
    try {
      // Opened first, so that a delete after this point cannot turn into a failed stream.
      const file = await open(path);
      const { size } = await file.stat();
      const stream = file.createReadStream(range ? { start: range.start, end: range.end } : {});
      return { stream, size: range ? Math.max(0, Math.min(range.end, size - 1) - range.start + 1) : size };
    } catch (error) {
      if (isMissing(error)) throw new ObjectNotFoundError(key);
      throw error;
    }
  }

  async head(key: string): Promise<{ size: number } | undefined> {
    try {
      return { size: (await stat(this.path(key))).size };
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  /** Through a temporary file, like put: a reader of the copy never sees half of it. */
  async copy(from: string, to: string): Promise<{ size: number }> {
    const [source, target] = [this.path(from), this.path(to)];
    const tmp = await this.temporaryPath();
    try {
      await copyFile(source, tmp, constants.COPYFILE_EXCL);
      const { size } = await stat(tmp);
      await mkdir(dirname(target), { recursive: true });
      await rename(tmp, target);
      return { size };
    } catch (error) {
      await rm(tmp, { force: true });
      if (isMissing(error) && (await this.head(from)) === undefined) throw new ObjectNotFoundError(from);
      throw error;
    }
  }

  async deleteMany(keys: string[]): Promise<void> {
    for (const key of keys) {
      try {
        await unlink(this.path(key));
      } catch (error) {
        if (!isMissing(error)) throw error;
      }
    }
  }

  async temporaryFiles(): Promise<TemporaryFile[]> {
    let names: string[];
    try {
      names = await readdir(this.tmpDir);
    } catch (error) {
      if (isMissing(error)) return [];
      throw error;
    }
    const out: TemporaryFile[] = [];
    for (const name of names) {
      const m = TEMPORARY.exec(name);
      if (!m) continue;
      try {
        out.push({ name, writer: m[1], modifiedAt: (await stat(join(this.tmpDir, name))).mtimeMs });
      } catch (error) {
        if (!isMissing(error)) throw error; // finished (renamed) or removed meanwhile
      }
    }
    return out;
  }

  async removeTemporary(names: string[]): Promise<void> {
    for (const name of names) {
      if (!TEMPORARY.test(name)) throw new Error(`Not a temporary file: ${JSON.stringify(name)}`);
      await rm(join(this.tmpDir, name), { force: true });
    }
  }

  /** Writes and removes a file where puts write theirs: a full or read-only disk fails it. */
  async check(): Promise<void> {
    await mkdir(this.tmpDir, { recursive: true });
    const probe = join(this.tmpDir, `${randomBytes(12).toString('hex')}.ready`);
    try {
      await writeFile(probe, 'ready', { flag: 'wx' });
    } finally {
      await rm(probe, { force: true });
    }
  }

  async close(): Promise<void> {}
}
