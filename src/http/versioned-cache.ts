/**
 * Values built from a record (serialized responses, parsed definitions) kept in process
 * memory, each under the version of the record it was built from. A read looks the version up in the database (one indexed read) and is
 * served from here only when it still matches, so every process may keep its own cache
 * and none ever serves a stale body. Least recently used entries go first.
 */
export class VersionedCache<T = string> {
  private readonly entries = new Map<string, { version: string; body: T; size: number }>();
  private bytes = 0;

  /** sizeOf estimates an entry's memory in bytes; a string's length by default. */
  constructor(
    private readonly maxBytes: number,
    private readonly sizeOf: (value: T) => number = (value) => String(value).length,
  ) {}

  get(key: string, version: string): T | undefined {
    const entry = this.entries.get(key);
    if (!entry || entry.version !== version) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.body;
  }

  /** What is kept under key, whatever its version: for a caller that checks the version itself, later. */
  latest(key: string): T | undefined {
    return this.entries.get(key)?.body;
  }

  set(key: string, version: string, body: T): void {
    const size = this.sizeOf(body);
    if (size > this.maxBytes / 4) return;
    this.remove(key);
    this.entries.set(key, { version, body, size });
    this.bytes += size;
    while (this.bytes > this.maxBytes) this.remove(this.entries.keys().next().value as string);
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.bytes -= entry.size;
  }
}

/** True when an If-None-Match header names this entity tag (or is *). */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag === etag || tag === `W/${etag}`;
  });
}
