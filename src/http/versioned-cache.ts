/**
 * Serialized responses kept in process memory, each under the version of the record it
 * was built from. A read looks the version up in the database (one indexed read) and is
 * served from here only when it still matches, so every process may keep its own cache
 * and none ever serves a stale body. Least recently used entries go first.
 */
export class VersionedCache {
  private readonly entries = new Map<string, { version: string; body: string }>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get(key: string, version: string): string | undefined {
    const entry = this.entries.get(key);
    if (!entry || entry.version !== version) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.body;
  }

  set(key: string, version: string, body: string): void {
    if (body.length > this.maxBytes / 4) return;
    this.remove(key);
    this.entries.set(key, { version, body });
    this.bytes += body.length;
    while (this.bytes > this.maxBytes) this.remove(this.entries.keys().next().value as string);
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.bytes -= entry.body.length;
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
