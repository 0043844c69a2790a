/**
 * Every setting that src/config.ts reads is explained in docs/operations.md and listed in
 * .env.example, and neither names a setting that the code no longer reads.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const sorted = (names: Iterable<string>) => [...new Set(names)].sort();

/** Names read from the environment: `env.NAME`, `env['NAME']` and the readers' `(env, 'NAME', …)`. */
function settingsRead(source: string): string[] {
  const names: string[] = [];
  for (const m of source.matchAll(/\benv\.([A-Z][A-Z0-9_]+)\b/g)) names.push(m[1]!);
  for (const m of source.matchAll(/\benv\[\s*'([A-Z][A-Z0-9_]+)'\s*\]/g)) names.push(m[1]!);
  for (const m of source.matchAll(/\(\s*env,\s*'([A-Z][A-Z0-9_]+)'/g)) names.push(m[1]!);
  return sorted(names);
}

/** The backticked names in the first cell of the settings tables' rows. */
function settingsDocumented(markdown: string): string[] {
  const names: string[] = [];
  for (const line of markdown.split('\n')) {
    const first = /^\|([^|]*)\|/.exec(line)?.[1];
    if (!first) continue;
    for (const m of first.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) names.push(m[1]!);
  }
  return sorted(names);
}

/** `NAME=` lines, commented out or not. */
function settingsListed(example: string): string[] {
  return sorted([...example.matchAll(/^#?\s*([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]!));
}

describe('the settings are documented where a reader looks for them', () => {
  const code = settingsRead(read('src/config.ts'));

  it('finds the settings that src/config.ts reads', () => {
    // A guard on the pattern itself: if the readers change shape, the lists below would be empty.
    for (const name of ['DATABASE_URL', 'DATA_DIR', 'HOST', 'SECRET_KEY', 'JOB_RETENTION_DAYS']) {
      assert.ok(code.includes(name), `${name} not found in src/config.ts: the patterns need updating`);
    }
  });

  it('explains each in docs/operations.md, and nothing else', () => {
    assert.deepEqual(settingsDocumented(read('docs/operations.md')), code);
  });

  it('lists each in .env.example, and nothing else', () => {
    assert.deepEqual(settingsListed(read('.env.example')), code);
  });
});
