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
 * keys. SQLite keeps its
 * foreign keys: it checks them in the writer's own process, and cannot drop one in place.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`
    CREATE FUNCTION formwork_delete_submissions_of_forms() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM submissions WHERE form_id IN (SELECT id FROM gone);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER forms_delete_submissions AFTER DELETE ON forms
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION formwork_delete_submissions_of_forms()`.execute(db);
  await sql`
    CREATE FUNCTION formwork_delete_unique_values_of_submissions() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM submission_unique_values WHERE submission_id IN (SELECT id FROM gone);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER submissions_delete_unique_values AFTER DELETE ON submissions
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION formwork_delete_unique_values_of_submissions()`.execute(db);
  await sql`
    ALTER TABLE submissions
      DROP CONSTRAINT submissions_account_id_fkey,
      DROP CONSTRAINT submissions_form_id_fkey`.execute(db);
  await sql`
    ALTER TABLE submission_unique_values DROP CONSTRAINT submission_unique_values_submission_id_fkey`.execute(db);
}
