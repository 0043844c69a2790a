import type { CompiledQuery, Compilable } from 'kysely';
import type { Executor } from './transaction.js';

class Slot {
  constructor(readonly index: number) {}
}

/**
 * A query that Kysely builds and compiles once per database and then runs with new values,
 * for reads on every request (token lookup, cached-read versions), where building the
 * query costs more than running it. build receives stand-ins for its arguments; each must
 * be used as a plain value (not inside a function or a raw fragment), and a stand-in
 * that does not reach the compiled parameters fails at once.
 */
export function hotQuery<A extends unknown[], O>(
  arity: A['length'],
  build: (db: Executor, ...args: A) => Compilable<O>,
) {
  const compiled = new WeakMap<Executor, { query: CompiledQuery<O>; slots: number[] }>();
  return async (db: Executor, ...args: A): Promise<O[]> => {
    let entry = compiled.get(db);
    if (!entry) {
      const stand = Array.from({ length: arity }, (_, i) => new Slot(i)) as unknown as A;
      const query = build(db, ...stand).compile();
      const slots = query.parameters.map((p) => {
        if (!(p instanceof Slot)) throw new Error(`hotQuery: a fixed parameter in ${query.sql}`);
        return p.index;
      });
      if (new Set(slots).size !== arity) throw new Error(`hotQuery: not every argument is used in ${query.sql}`);
      entry = { query, slots };
      compiled.set(db, entry);
    }
    const { query, slots } = entry;
    const result = await db.executeQuery<O>({ ...query, parameters: slots.map((i) => args[i]) });
    return result.rows;
  };
}
