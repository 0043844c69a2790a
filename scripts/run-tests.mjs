// Runs every test/**/*.test.ts with node's own test runner (through tsx), so that the
// same command works on Node 20, whose --test takes no globs.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...collect(path));
    else if (name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

/**
 * The longest suites (by CI's timings) start first: two run at a time, and a long one that
 * starts last holds the run up alone at its end. The rest follow in name order.
 */
const LONGEST_FIRST = [
  'test/permission-matrix.test.ts',
  'test/route-matrix.test.ts',
  'test/scale-out.test.ts',
  'test/recovery.test.ts',
  'test/hashing.test.ts',
  'test/hosted-browser.test.ts',
  'test/many-writers.test.ts',
  'test/shutdown.test.ts',
  'test/request-log.test.ts',
  'test/write-property.test.ts',
  'test/encryption-conversion.test.ts',
];

function longestFirst(paths) {
  const rank = (path) => {
    const i = LONGEST_FIRST.indexOf(path);
    return i === -1 ? LONGEST_FIRST.length : i;
  };
  return [...paths].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

const only = process.argv.slice(2);
const files = longestFirst(only.length > 0 ? only : collect('test'));
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=spec', ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
