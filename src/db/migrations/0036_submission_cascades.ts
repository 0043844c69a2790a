import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * On PostgreSQL, a submission's form and account, and a unique value's submission, are no
 * longer foreign keys: the deletes they cascaded are triggers instead. Each key cost every
 * create a query of its own, run by PostgreSQL's constraint trigger: the three were a tenth of
 * PostgreSQL's time a create (docs/performance.md, "Twenty-sixth pass").
 *
 * What the keys guarded still holds, by the statements that write these rows:
 * - A submission is written only by a statement or transaction that share-locks its form's row
 *   with the account's id in the condition, and that fails when the row is not there
 *   (submissions/repository.ts: the create statements, noteSubmissionChange). A form's
 *   account never changes (a copy is a new form).
 * - A unique value is written with its submission's row (the same statement), or after an
 *   update of that row in the same transaction, and a submission's row is deleted before its
 *   values are: a delete and an edit of one submission wait for each other on the row's lock.
 *
 * The cascades run once per deleting statement: a form's row deleted (with its account's, or by
 * hand: the service itself only marks a form deleted) takes its submissions, and a
 * submission's row its unique values. The other tables that refer to submissions keep their
 * keys. SQLite keeps its foreign keys: it checks them in the writer's own process, and cannot
 * drop one in place.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await cascade(db, { parent: 'forms', child: 'submissions', column: 'form_id', name: 'submissions_of_forms' });
  await cascade(db, {
    parent: 'submissions',
    child: 'submission_unique_values',
    column: 'submission_id',
    name: 'unique_values_of_submissions',
  });
  await sql`
    ALTER TABLE submissions
      DROP CONSTRAINT submissions_account_id_fkey,
      DROP CONSTRAINT submissions_form_id_fkey`.execute(db);
  await sql`
    ALTER TABLE submission_unique_values DROP CONSTRAINT submission_unique_values_submission_id_fkey`.execute(db);
}

/** After a statement deletes parent rows, one statement deletes the child rows whose column holds their ids. */
async function cascade(
  db: Kysely<unknown>,
  t: { parent: string; child: string; column: string; name: string },
): Promise<void> {
  const fn = sql.id(`formwork_delete_${t.name}`);
  await sql`
    CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM ${sql.id(t.child)} WHERE ${sql.id(t.column)} IN (SELECT id FROM gone);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER ${sql.id(`${t.parent}_delete_${t.child}`)} AFTER DELETE ON ${sql.id(t.parent)}
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`.execute(db);
}
