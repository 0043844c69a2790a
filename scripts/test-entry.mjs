// The file that one test process of scripts/run-tests.mjs is given: it runs its test files one
// after the other, each inside a suite named by its path, and fails the process when it
// outlives its last test.

/**
 * The source of an entry that imports each of files (specifiers as the entry imports them,
 * with the names to show beside them) inside a suite of its name, each once the suite before
 * it has ended, its own after hooks included. A suite's body runs as soon as it is declared, so
 * declared all at once they would load every file at the start, and a file's top-level work
 * (an app started, a dependency probed) would run beside another file's tests; in turn, each
 * file runs as it would alone.
 *
 * After the last suite it gives the process lingerSeconds to end by itself. A test that leaves
 * a server, a socket, a child process or a timer behind (most often one that failed before its
 * cleanup) would hold the process open, and with it node --test and CI, without end: CI once
 * waited 44 minutes for a failed scale-out test's clients. Past that time the process names
 * what it still holds and exits with 1, so that its file is reported failed; every test's
 * report has gone out by then. (node's --test-force-exit ends the process at once instead, and
 * on Node 24 did so before a last file's tests were reported.)
 */
export function entrySource(files, lingerSeconds) {
  return (
    "import { after, describe } from 'node:test';\n" +
    'after(() => {\n' +
    '  setTimeout(() => {\n' +
    `    process.stderr.write(\`this test process still ran ${lingerSeconds} s after its last test, held open by: \${process.getActiveResourcesInfo().join(', ')} (something a test started and did not stop)\\n\`);\n` +
    '    process.exit(1);\n' +
    `  }, ${lingerSeconds * 1000}).unref();\n` +
    '});\n' +
    // Its after hook is added last, so it runs after the file's own; it is added when the
    // import fails too, and the next file still runs.
    'const inTurn = (name, load) =>\n' +
    '  new Promise((ended) => describe(name, async () => { try { await load(); } finally { after(ended); } }));\n' +
    files
      .map(
        ({ name, specifier }) => `await inTurn(${JSON.stringify(name)}, () => import(${JSON.stringify(specifier)}));\n`,
      )
      .join('')
  );
}
