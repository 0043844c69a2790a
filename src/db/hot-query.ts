import type { CompiledQuery, Compilable } from 'kysely';
import type { Executor } from './transaction.js';

class Slot {
  constructor(readonly index: number) {}
}

/**
 * A query that Kysely builds and compiles once per database and then runs with new values,
 * for statements on every request (token lookup, cached-read versions, a submission's
 * inserts and counters), where building the query costs more than running it. build
 * receives stand-ins for its arguments; each must be used as a plain value (not inside a
 * function or a raw fragment), and a stand-in that does not reach the compiled parameters
 * fails at once. Fixed values are arguments too (a literal would be a parameter of its own).
 */
export function hotQuery<A extends unknown[], O>(
  arity: A['length'],
  build: (db: Executor, ...args: A) => Compilable<O>,
) {
  const compiled = new WeakMap<object, { query: CompiledQuery<O>; slots: number[] }>();
  return async (db: Executor, ...args: A): Promise<O[]> => {
    // Kept per database (its adapter, which its transactions share), so that a query run in
    // transactions is compiled once too; per executor where plugins may change what it compiles.
    const executor = db.getExecutor();
    const key = executor.plugins.length === 0 ? executor.adapter : executor;
    let entry = compiled.get(key);
    if (!entry) {
      const stand = Array.from({ length: arity }, (_, i) => new Slot(i)) as unknown as A;
      const query = build(db, ...stand).compile();
      const slots = query.parameters.map((p) => {
        if (!(p instanceof Slot)) throw new Error(`hotQuery: a fixed parameter in ${query.sql}`);
        return p.index;
      });
      if (new Set(slots).size !== arity) throw new Error(`hotQuery: not every argument is used in ${query.sql}`);
      entry = { query, slots };
      compiled.set(key, entry);
    }
    const { query, slots } = entry;
    const result = await db.executeQuery<O>({ ...query, parameters: slots.map((i) => args[i]) });
    return result.rows;
  };
}
