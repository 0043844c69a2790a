/**
 * pgbench next to the service's PostgreSQL POSTs, in the same run and at the same
 * concurrency (npm run bench -- pg, and section 4 of npm run bench):
 *
 * (a) one 10-key jsonb row inserted per transaction: what PostgreSQL itself can take;
 * (b) the statements of one Formwork create, captured from the service (bench/pg-capture.ts,
 *     loaded into a service child) and replayed as they were sent, parameters inlined as
 *     literals, and prepared when the service sent them by name: what the service's own SQL
 *     costs with no Node.js in front of it.
 *
 * The POST rate is then read as a share of each.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

export interface Captured {
  pid?: number;
  /** The name it was sent under: a statement the service prepares once per connection. */
  name?: string;
  text: string;
  values: (string | null)[];
}

export interface PgbenchResult {
  tps: number;
  latencyMs: number;
  failed: number;
  /** Transactions processed in the run. */
  transactions: number;
}

/** The captured lines of a file, from a byte offset on. */
export function readCaptured(file: string, from = 0): Captured[] {
  return readFileSync(file)
    .subarray(from)
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Captured);
}

/** Statements of the service's background work (presence, the worker), not of a request. */
export function isBackground(c: Captured): boolean {
  return /"processes"|\bLISTEN\b|pg_try_advisory|FOR UPDATE SKIP LOCKED/i.test(c.text);
}

/**
 * A value as an SQL literal on one line. pgbench reads ":name" in a statement as a variable (in
 * prepared mode even inside a string), so a colon is written as an escape of an E'' string,
 * and so is a line break: a statement of a script is one line, and some values are lines (the
 * payloads of a create's outbox rows, jobsAsArgs).
 */
export const literal = (v: string | null) =>
  v === null
    ? 'NULL'
    : /[:\n\r\t]/.test(v)
      ? `E'${v
          .replace(/\\/g, '\\\\')
          .replace(/'/g, "''")
          .replace(/:/g, '\\x3a')
          .replace(/\n/g, '\\n')
          .replace(/\r/g, '\\r')
          .replace(/\t/g, '\\t')}'`
      : `'${v.replace(/'/g, "''")}'`;

/**
 * When the outbox rows that a replay writes are due: never, for any worker. They are a
 * statement's cost measured, not events: the service beside pgbench would otherwise deliver
 * them while pgbench and the next POST run (the bench deletes them after the replay).
 */
export const REPLAYED_JOBS_RUN_AT = 253_402_300_799_000; // 9999-12-31T23:59:59Z

/** The parameter that holds the outbox rows' columns in a create's statement (jobsAsArgs). */
const JOBS_ARGUMENT = /json_to_recordset\(\$(\d+)::json\) AS x\(i int, k text, r int8/;

/**
 * A pgbench script of the statements, each with its parameters as literals (untyped, as the
 * parameters were, so PostgreSQL infers the same types). A unique value must differ in every
 * transaction, or the replay would only meet conflicts: each value_norm becomes one drawn from
 * a sequence (SEQUENCE below, made by the caller), in a Kysely insert into
 * submission_unique_values (every fourth parameter, as Kysely lays the rows out) and in the
 * create's one statement (the text array of unnest(field ids, values), or the "n" of each
 * object of the JSON list of a shared statement's unique values).
 *
 * A create with events takes its id from those its process drew ahead (takeIds in the
 * submissions repository: a statement before its own only when too few are left) and sends it
 * in its statement's JSON ("id":N): the replay draws one id before every such statement, into
 * a pgbench variable (\gset), and puts it in place of the captured one. A captured draw is
 * replayed as that one draw, whatever it drew. The outbox rows it writes are never due
 * (REPLAYED_JOBS_RUN_AT).
 */
export const SEQUENCE = 'fw_bench_unique';
export function pgbenchScript(statements: Captured[]): string {
  const drawn = `('u' || nextval('${SEQUENCE}'))`;
  const drawOne = "SELECT nextval(pg_get_serial_sequence('submissions', 'id'))::int AS fw_id \\gset";
  let drew = false;
  return statements
    .map((c) => {
      if (
        /pg_get_serial_sequence\('submissions', 'id'\)::regclass\)\)::int AS id\s+FROM generate_series/.test(c.text)
      ) {
        drew = true;
        return drawOne;
      }
      const unique = /insert into "submission_unique_values"/i.test(c.text);
      const uniqueArray = /unnest\(\$\d+::int\[\], \$(\d+)::text\[\]\)/.exec(c.text)?.[1];
      const createsJson = /jsonb_to_recordset\(\$(\d+)::jsonb\) AS v\(i int, id int/.exec(c.text)?.[1];
      const uniqueJson = /jsonb_to_recordset\(\$(\d+)::jsonb\) AS u\(i int, f int, n text\)/.exec(c.text)?.[1];
      const jobsJson = JOBS_ARGUMENT.exec(c.text)?.[1];
      let withId = false;
      // The statement's own text on one line first, then its values: they may hold line breaks.
      const sqlText = c.text
        .replace(/\s+/g, ' ')
        .trim()
        .replace(/\$(\d+)/g, (_, n: string) => {
          const i = Number(n) - 1;
          if (unique && i % 4 === 3) return drawn;
          let captured = c.values[i] ?? null;
          if (n === jobsJson && captured !== null)
            captured = captured.replace(/"r":\d+/g, `"r":${REPLAYED_JOBS_RUN_AT}`);
          const value = literal(captured);
          if (n === uniqueArray) return `ARRAY(SELECT ${drawn} FROM generate_series(1, cardinality(${value}::text[])))`;
          if (n === uniqueJson)
            return `(SELECT coalesce(json_agg(json_build_object('i', e.i, 'f', e.f, 'n', ${drawn})), '[]')::text FROM jsonb_to_recordset(${value}::jsonb) AS e(i int, f int, n text))`;
          const id = n !== createsJson || captured === null ? null : /"id":(\d+)}/.exec(captured);
          if (!id) return value;
          withId = true;
          return `replace(${value}, ${literal(`"id":${id[1]}}`)}, ${literal('"id":')} || :fw_id || '}')`;
        });
      const statement = `${sqlText};`;
      return withId && !drew ? `${drawOne}\n${statement}` : statement;
    })
    .join('\n');
}

/** How many outbox rows one replay of the statements writes: as many as the captured create did. */
export function jobsPerReplay(statements: Captured[]): number {
  return statements.reduce((sum, c) => {
    const n = JOBS_ARGUMENT.exec(c.text)?.[1];
    const jobs = n === undefined ? null : c.values[Number(n) - 1];
    return sum + (jobs ? (JSON.parse(jobs) as unknown[]).length : 0);
  }, 0);
}

/**
 * How pgbench sends the script: prepared (each statement parsed and planned once per
 * connection) when the service sent any of them by name, as it does its hot statements.
 */
export const protocolOf = (statements: Captured[]): 'prepared' | 'simple' =>
  statements.some((c) => c.name !== undefined) ? 'prepared' : 'simple';

/** The table and statement of script (a): one row of a 10-key jsonb document. */
export const JSONB_TABLE = 'CREATE TABLE fw_bench_jsonb (id bigserial PRIMARY KEY, data jsonb NOT NULL)';
export function jsonbScript(): string {
  const doc = Object.fromEntries(
    Array.from({ length: 10 }, (_, i) => [`field_${i + 1}`, `value ${i + 1} of a bench row`]),
  );
  return `\\set n random(1, 1000000000)\nINSERT INTO fw_bench_jsonb (data) VALUES (jsonb_set('${JSON.stringify(doc)}'::jsonb, '{n}', to_jsonb(:n)));`;
}

/** Finds pgbench: on PATH, or in PostgreSQL's own bin directory. */
export function pgbenchPath(): string {
  for (const dir of ['/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin']) {
    try {
      readFileSync(`${dir}/pgbench`, { flag: 'r' }).subarray(0, 1);
      return `${dir}/pgbench`;
    } catch {
      // not there
    }
  }
  return 'pgbench';
}

/** Runs one pgbench script for seconds at clients connections; its tps (without connection time). */
export async function runPgbench(
  url: string,
  scriptFile: string,
  script: string,
  clients: number,
  seconds: number,
  log: (m: string) => void,
  protocol: 'prepared' | 'simple' = 'simple',
): Promise<PgbenchResult> {
  writeFileSync(scriptFile, `${script}\n`);
  const args = ['-n', '-M', protocol, '-c', String(clients), '-j', '2', '-T', String(seconds), '-f', scriptFile, url];
  const proc = spawn(pgbenchPath(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number>((resolve) => proc.on('close', (c) => resolve(c ?? 1)));
  const tps = /tps = ([\d.]+)/.exec(out);
  const latency = /latency average = ([\d.]+) ms/.exec(out);
  const failed = /number of failed transactions: (\d+)/.exec(out);
  const processed = /number of transactions actually processed: (\d+)/.exec(out);
  if (code !== 0 || !tps) {
    log(out);
    throw new Error(`pgbench ${scriptFile} exited with ${code}`);
  }
  return {
    tps: Number(tps[1]),
    latencyMs: latency ? Number(latency[1]) : Number.NaN,
    failed: failed ? Number(failed[1]) : 0,
    transactions: processed ? Number(processed[1]) : Number(tps[1]) * seconds,
  };
}
