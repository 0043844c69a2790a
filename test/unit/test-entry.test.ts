/**
 * The entry of one test process (scripts/test-entry.mjs), run by node --test as the runner
 * runs it: its files are loaded one after the other, each once the one before has ended; a
 * test that leaves a server open fails the process once it has lingered, with its tests
 * reported and what held it named; a process that holds nothing ends at once, passing.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { entrySource } from '../../scripts/test-entry.mjs';

const dir = mkdtempSync(join(tmpdir(), 'formwork-test-entry-'));
writeFileSync(
  join(dir, 'leaves-server.mjs'),
  "import { it } from 'node:test';\nimport { createServer } from 'node:net';\n" +
    "it('passes and leaves a server listening', () => { createServer().listen(0, '127.0.0.1'); });\n",
);
writeFileSync(join(dir, 'tidy.mjs'), "import { it } from 'node:test';\nit('passes and leaves nothing', () => {});\n");
// A file whose test ends half a second in, and one that records at its top level whether it had.
writeFileSync(
  join(dir, 'slow.mjs'),
  "import { it } from 'node:test';\n" +
    "it('ends half a second in', async () => { await new Promise((r) => setTimeout(r, 500)); globalThis.slowEnded = true; });\n",
);
writeFileSync(
  join(dir, 'loads-after.mjs'),
  "import assert from 'node:assert/strict';\nimport { it } from 'node:test';\nconst ended = globalThis.slowEnded === true;\n" +
    "it('was loaded once the file before it had ended', () => assert.equal(ended, true));\n",
);

/** node --test on an entry of files, as a run of its own (not a child of this one); its exit code and output. */
async function runEntry(name: string, files: string[], lingerSeconds: number) {
  writeFileSync(
    join(dir, name),
    entrySource(
      files.map((f) => ({ name: f, specifier: `./${f}` })),
      lingerSeconds,
    ),
  );
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  const child = spawn(process.execPath, ['--test', '--test-reporter=spec', name], { cwd: dir, env });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  // Were the entry's check missing, the first run would never end: it ends here, failed, instead.
  const stuck = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearTimeout(stuck);
  return { code, output };
}

describe('a test process entry', () => {
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('fails a process that a test left something open in, after its tests were reported', async () => {
    const run = await runEntry('lingers.mjs', ['leaves-server.mjs', 'tidy.mjs'], 1);
    assert.equal(run.code, 1, run.output);
    assert.match(run.output, /✔ passes and leaves a server listening/);
    assert.match(run.output, /✔ passes and leaves nothing/);
    assert.match(run.output, /still ran 1 s after its last test, held open by: .*TCPServerWrap/);
  });

  it('loads each file once the one before it has ended', async () => {
    const run = await runEntry('in-turn.mjs', ['slow.mjs', 'loads-after.mjs'], 30);
    assert.equal(run.code, 0, run.output);
    assert.match(run.output, /✔ was loaded once the file before it had ended/);
  });

  it('lets a process that holds nothing end by itself, passing', async () => {
    // Had the entry's own timer held the process, it would have fired and exited with 1.
    const run = await runEntry('ends.mjs', ['tidy.mjs'], 30);
    assert.equal(run.code, 0, run.output);
    assert.match(run.output, /✔ passes and leaves nothing/);
  });
});
