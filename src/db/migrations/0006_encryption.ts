import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  // The form's key pair with the private half wrapped by its password (crypto/envelope.ts);
  // null while the form is not encrypted.
  await db.schema.alterTable('forms').addColumn('encryption_key', 'text').execute();
  // 'encrypting' or 'decrypting' while a background job converts the form's submissions.
  await db.schema.alterTable('forms').addColumn('encryption_state', 'text').execute();
  // 1 when the stored object is sealed (crypto/envelope.ts) to its form's public key.
  await db.schema
    .alterTable('uploads')
    .addColumn('sealed', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
