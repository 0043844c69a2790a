import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A CommonJS package loaded on its first use rather than when the app starts. For the packages
 * that only some settings or features need (S3, SMTP, Redis, PostgreSQL, document merge):
 * together they were about half of what loading the app cost (some 560 of 1,230 ms of CPU), which
 * every process pays (the service, the worker, each CLI command, each test file) and most never
 * use. `require` keeps the first use synchronous, so callers stay as they were.
 */
export function lazyRequire<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(name) as T);
}
