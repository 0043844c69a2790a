import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * Emails are unique per account instead of across the service: one person may be a user of
 * several accounts, and an admin adding a user learns nothing about other accounts' users.
 * Sign-in by email looks across accounts, so email alone keeps an index.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') {
    await sql`ALTER TABLE users DROP CONSTRAINT users_email_key`.execute(db);
    await sql`DROP INDEX users_account`.execute(db);
  } else {
    await rebuildSqliteUsers(db);
  }
  // Also serves every lookup by account alone, as users_account did.
  await db.schema.createIndex('users_account_email').unique().on('users').columns(['account_id', 'email']).execute();
  await db.schema.createIndex('users_email').on('users').column('email').execute();
}

/**
 * SQLite cannot drop a column's UNIQUE constraint, so the table is made anew (the procedure of
 * https://sqlite.org/lang_altertable.html#otheralter). Foreign keys are off meanwhile, or
 * dropping the old table would delete every token, grant and permission of its users; the
 * check before the commit proves every reference still finds its row.
 */
async function rebuildSqliteUsers(db: Kysely<unknown>): Promise<void> {
  await sql`PRAGMA foreign_keys = OFF`.execute(db);
  try {
    await db.transaction().execute(async (trx) => {
      // Ids are never reused after a delete: the new table carries the old counter on.
      const sequence = await sql<{ seq: number }>`SELECT seq FROM sqlite_sequence WHERE name = 'users'`.execute(trx);
      await sql`CREATE TABLE users_new (
        id integer primary key autoincrement,
        account_id integer not null references accounts (id) on delete cascade,
        email text not null,
        name text not null,
        password_hash text,
        role text not null,
        created_at bigint not null
      )`.execute(trx);
      await sql`INSERT INTO users_new (id, account_id, email, name, password_hash, role, created_at)
        SELECT id, account_id, email, name, password_hash, role, created_at FROM users`.execute(trx);
      await sql`DROP TABLE users`.execute(trx);
      await sql`ALTER TABLE users_new RENAME TO users`.execute(trx);
      const seq = sequence.rows[0]?.seq;
      if (seq !== undefined) {
        await sql`DELETE FROM sqlite_sequence WHERE name = 'users'`.execute(trx);
        await sql`INSERT INTO sqlite_sequence (name, seq) VALUES ('users', ${seq})`.execute(trx);
      }
      const broken = await sql`PRAGMA foreign_key_check`.execute(trx);
      if (broken.rows.length > 0)
        throw new Error(
          `Rebuilding users broke ${broken.rows.length} references: ${JSON.stringify(broken.rows.slice(0, 5))}`,
        );
    });
  } finally {
    await sql`PRAGMA foreign_keys = ON`.execute(db);
  }
}
