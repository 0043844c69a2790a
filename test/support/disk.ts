import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Every file under a directory, relative to it ('.tmp/...' included: a leftover temp file counts). */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else out.push(relative(dir, path));
    }
  };
  walk(dir);
  return out.sort();
}

/** The raw bytes of every file under a directory, as one latin1 string to search for values. */
export function bytesUnder(dir: string): string {
  return filesUnder(dir)
    .map((f) => readFileSync(join(dir, f)).toString('latin1'))
    .join('\n');
}
