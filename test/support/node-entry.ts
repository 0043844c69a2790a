/**
 * How a test starts one of the project's own scripts as a process of its own. Under
 * `npm test` the suites run as JavaScript compiled beside the sources (scripts/run-tests.mjs),
 * and a child started from the compiled file skips tsx's loader, about a second of CPU per
 * process on this machine. Run straight from the TypeScript (`node --import tsx --test …`), the
 * children go through tsx as well.
 */
const compiled = import.meta.url.endsWith('.js');

/** Node's arguments that run `path` (a `.ts` path from the checkout's root), then `args`. */
export function nodeArgs(path: string, ...args: string[]): string[] {
  return compiled
    ? ['--enable-source-maps', path.replace(/\.ts$/, '.js'), ...args]
    : ['--import', 'tsx', path, ...args];
}

/** `formwork <args>`: Node's arguments for the command line, from the checkout's root. */
export function cliArgs(...args: string[]): string[] {
  return nodeArgs('src/cli.ts', ...args);
}
