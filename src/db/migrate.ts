import { Migrator, type Kysely, type Migration, type MigrationProvider, type MigrationResultSet } from 'kysely';
import type { Db } from './database.js';
import type { Dialect } from './dialect.js';
import * as foundation from './migrations/0001_foundation.js';
import * as submissions from './migrations/0002_submissions.js';
import * as oauthPermissions from './migrations/0003_oauth_permissions.js';
import * as jobs from './migrations/0004_jobs.js';
import * as uploads from './migrations/0005_uploads.js';
import * as encryption from './migrations/0006_encryption.js';
import * as tokenManagement from './migrations/0007_token_management.js';
import * as clientPkce from './migrations/0008_client_pkce.js';
import * as emailsPerAccount from './migrations/0009_emails_per_account.js';
import * as processes from './migrations/0010_processes.js';
import * as webhooks from './migrations/0011_webhooks.js';
import * as emails from './migrations/0012_emails.js';
import * as hostedForms from './migrations/0013_hosted_forms.js';
import * as submissionCounts from './migrations/0014_submission_counts.js';
import * as resumeLinkMail from './migrations/0016_resume_link_mail.js';
import * as smartLists from './migrations/0017_smart_lists.js';
import * as themes from './migrations/0018_themes.js';
import * as subaccounts from './migrations/0019_subaccounts.js';
import * as portals from './migrations/0020_portals.js';
import * as jobsKindDue from './migrations/0022_jobs_kind_due.js';
import * as docmerge from './migrations/0024_docmerge.js';
import * as jobRequestId from './migrations/0029_job_request_id.js';
import * as mailLogCreated from './migrations/0030_mail_log_created.js';
import * as portalExpiry from './migrations/0031_portal_expiry.js';
import * as idempotencyExpiryIndex from './migrations/0032_idempotency_expiry_index.js';
import * as dropJobsDue from './migrations/0033_drop_jobs_due.js';
import * as createAbort from './migrations/0034_create_abort.js';
import * as searchPendingList from './migrations/0035_search_pending_list.js';
import * as submissionCascades from './migrations/0036_submission_cascades.js';
import * as submissionHourIds from './migrations/0037_submission_hour_ids.js';
import * as encryptedPrefills from './migrations/0038_encrypted_prefills.js';

interface MigrationModule {
  up(db: Kysely<unknown>, dialect: Dialect): Promise<void>;
}

// Listed here rather than read from a folder so that the same set runs from source and from dist.
const migrations: Record<string, MigrationModule> = {
  '0001_foundation': foundation,
  '0002_submissions': submissions,
  '0003_oauth_permissions': oauthPermissions,
  '0004_jobs': jobs,
  '0005_uploads': uploads,
  '0006_encryption': encryption,
  '0007_token_management': tokenManagement,
  '0008_client_pkce': clientPkce,
  '0009_emails_per_account': emailsPerAccount,
  '0010_processes': processes,
  '0011_webhooks': webhooks,
  '0012_emails': emails,
  '0013_hosted_forms': hostedForms,
  '0014_submission_counts': submissionCounts,
  '0016_resume_link_mail': resumeLinkMail,
  '0017_smart_lists': smartLists,
  '0018_themes': themes,
  '0019_subaccounts': subaccounts,
  '0020_portals': portals,
  '0022_jobs_kind_due': jobsKindDue,
  '0024_docmerge': docmerge,
  '0029_job_request_id': jobRequestId,
  '0030_mail_log_created': mailLogCreated,
  '0031_portal_expiry': portalExpiry,
  '0032_idempotency_expiry_index': idempotencyExpiryIndex,
  '0033_drop_jobs_due': dropJobsDue,
  '0034_create_abort': createAbort,
  '0035_search_pending_list': searchPendingList,
  '0036_submission_cascades': submissionCascades,
  '0037_submission_hour_ids': submissionHourIds,
  '0038_encrypted_prefills': encryptedPrefills,
};

/** Every migration's name, in the order they run. */
export const MIGRATION_NAMES: readonly string[] = Object.keys(migrations);

class StaticProvider implements MigrationProvider {
  constructor(private readonly dialect: Dialect) {}
  async getMigrations(): Promise<Record<string, Migration>> {
    return Object.fromEntries(
      Object.entries(migrations).map(([name, m]) => [name, { up: (db: Kysely<unknown>) => m.up(db, this.dialect) }]),
    );
  }
}

/** Brings the schema up to date; returns the names of the migrations it applied. */
export async function migrateToLatest(db: Db): Promise<string[]> {
  return migrate(db, (migrator) => migrator.migrateToLatest());
}

/** Brings the schema up to the named migration: for tests of a migration on the data before it. */
export async function migrateUpTo(db: Db, name: string): Promise<string[]> {
  return migrate(db, (migrator) => migrator.migrateTo(name));
}

async function migrate(db: Db, run: (migrator: Migrator) => Promise<MigrationResultSet>): Promise<string[]> {
  const migrator = new Migrator({
    db: db.kysely as unknown as Kysely<unknown>,
    provider: new StaticProvider(db.dialect),
  });
  const { error, results } = await run(migrator);
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
