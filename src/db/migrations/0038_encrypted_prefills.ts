import { sql, type Kysely } from 'kysely';

/**
 * Prefill values of encrypted forms are sealed under a key that only their link carries
 * (modules/hosted/prefill-sealing.ts). Those stored in the clear before that, for forms already
 * encrypted, cannot be sealed to a key their links lack: they are removed, as turning
 * encryption on now removes a form's clear ones, and their links open the form empty.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`DELETE FROM prefill_tokens
    WHERE data NOT LIKE 'fenc1:%'
      AND form_id IN (SELECT id FROM forms WHERE is_encrypted = 1)`.execute(db);
}
