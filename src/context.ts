import type { Kysely } from 'kysely';
import type { Config } from './config.js';
import type { Dialect } from './db/dialect.js';
import type { Database } from './db/schema.js';

/** What services need from the process: the database and the settings. */
export interface AppContext {
  db: Kysely<Database>;
  dialect: Dialect;
  config: Config;
}
