import type { CompiledQuery, Compilable, Kysely } from 'kysely';
import type { PreparedStatement } from './change-epoch.js';
import type { Database } from './schema.js';
import type { Executor } from './transaction.js';
import { prepareOnPostgres } from './pg-prepared.js';

class Slot {
  constructor(readonly index: number) {}
}

type Prepare = (sql: string) => PreparedStatement;

const directly = new WeakMap<object, Prepare>();

/**
 * SQLite: the statements of a transaction that runHot is given run on the connection itself,
 * through prepare (the connection's statement cache), rather than through Kysely's executor.
 * The transaction holds the only connection until it ends, so they run inside it, in order,
 * exactly as Kysely would run them. Kysely's executor adds promises and bookkeeping to each
 * (6 to 9 µs a statement in a loop); taking it from a create's six statements and its
 * job's two savepoints saved about 25 µs of the create's 330 of CPU. Outside a transaction the
 * connection may be another flow's, so statements go through Kysely there.
 */
export function runHotDirectly(db: Kysely<Database>, prepare: Prepare): void {
  directly.set(db.getExecutor().adapter, prepare);
}

/** Runs a compiled query: on SQLite's connection itself inside a transaction (see runHotDirectly). */
export async function runHot<O>(db: Executor, query: CompiledQuery<O>): Promise<O[]> {
  const executor = db.getExecutor();
  const prepare = db.isTransaction && executor.plugins.length === 0 ? directly.get(executor.adapter) : undefined;
  if (!prepare) return (await db.executeQuery<O>(query)).rows;
  const statement = prepare(query.sql);
  const parameters = query.parameters as unknown[];
  if (statement.reader) return statement.all(parameters) as O[];
  statement.run(parameters);
  return [];
}

/**
 * A query that Kysely builds each time but whose text never varies (no list of varying
 * length), compiled to run with executeQuery and, on PostgreSQL, prepared once per connection
 * like hotQuery's: for statements of every job, whose values vary too much to be hotQuery's
 * arguments.
 */
export function prepared<O>(query: Compilable<O>): CompiledQuery<O> {
  const compiled = query.compile();
  prepareOnPostgres(compiled.sql);
  return compiled;
}

/**
 * A query that Kysely builds and compiles once per database and then runs with new values,
 * for statements on every request (token lookup, cached-read versions, a submission's
 * inserts and counters), where building the query costs more than running it. build
 * receives stand-ins for its arguments; each must be used as a plain value (not inside a
 * function or a raw fragment), and a stand-in that does not reach the compiled parameters
 * fails at once. Fixed values are arguments too (a literal would be a parameter of its own).
 * On PostgreSQL the statement is prepared once per connection (pg-prepared.ts).
 */
export function hotQuery<A extends unknown[], O>(
  arity: A['length'],
  build: (db: Executor, ...args: A) => Compilable<O>,
) {
  const compiled = new WeakMap<object, HotStatement<O>>();
  const compiledFor = (db: Executor): HotStatement<O> => {
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
      prepareOnPostgres(query.sql);
      entry = { query, slots };
      compiled.set(key, entry);
    }
    return entry;
  };
  const run = (db: Executor, ...args: A): Promise<O[]> => {
    const { query, slots } = compiledFor(db);
    return runHot(db, { ...query, parameters: slots.map((i) => args[i]) });
  };
  return Object.assign(run, { compiledFor });
}

/** A hotQuery compiled for one database: its SQL, and which argument each parameter is. */
export interface HotStatement<O> {
  query: CompiledQuery<O>;
  slots: number[];
}
