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

const only = process.argv.slice(2);
const files = only.length > 0 ? only : collect('test');
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=spec', ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
