import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  // The form's key pair with the private half wrapped by its password (crypto/envelope.ts);
  // null while the form is not encrypted.
  await db.schema.alterTable('forms').addColumn('encryption_key', 'text').execute();
  // 'encrypting' or 'decrypting' while a background job converts the form's submissions.
  await db.schema.alterTable('forms').addColumn('encryption_state', 'text').execute();
}
