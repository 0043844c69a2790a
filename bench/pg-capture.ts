/**
 * Loaded into a service child with --import (bench/pgbench.ts): writes every statement that
 * the child sends to PostgreSQL, with its parameters as text, to BENCH_PG_CAPTURE, one JSON
 * line each. Kysely runs its queries through pg.Client#query, so what is written is what the
 * service really sends, BEGIN and COMMIT included.
 */
import { appendFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import pg from 'pg';

// How pg itself turns a parameter into text (arrays, dates, buffers): the literal replayed.
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue(v: unknown): unknown };

const file = process.env.BENCH_PG_CAPTURE;
if (file) {
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const [first, second] = args;
    const text = typeof first === 'string' ? first : (first as { text?: string } | undefined)?.text;
    const values = Array.isArray(second) ? second : (first as { values?: unknown[] } | undefined)?.values;
    if (text !== undefined) {
      const line = {
        pid: (this as unknown as { processID?: number }).processID,
        name: typeof first === 'object' ? (first as { name?: string } | null)?.name : undefined,
        text,
        values: (values ?? []).map((v) => prepareValue(v)),
      };
      appendFileSync(file, `${JSON.stringify(line)}\n`);
    }
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
}
