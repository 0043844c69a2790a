import type { JobKind } from './jobs/kind.js';
import { pruneJob } from './jobs/prune.js';
import { emailDocumentJob, generateDocumentJob } from './modules/docmerge/jobs.js';
import { pruneMailLogJob, sendEmailJob } from './modules/emails/jobs.js';
import { sendResumeLinkJob } from './modules/emails/resume-link.js';
import { conversionJob } from './modules/encryption/convert.js';
import { expirePrefillsJob } from './modules/hosted/jobs.js';
import { expirePartialsJob } from './modules/partials/jobs.js';
import { prunePortalSigninsJob, sendPortalSigninJob } from './modules/portals/jobs.js';
import { reindexJob } from './modules/submissions/reindex.js';
import { removeFilesJob, sweepUploadsJob } from './modules/uploads/jobs.js';
import { deliverWebhookJob } from './modules/webhooks/jobs.js';

/**
 * Every job kind that the workers of this application run. It is assembled here, above
 * src/jobs and src/modules, so that the outbox and the worker never import the modules
 * whose jobs they run. A kind missing from this list fails its jobs (see src/jobs/worker.ts).
 */
export const jobKinds: readonly JobKind[] = [
  pruneJob,
  conversionJob,
  reindexJob,
  removeFilesJob,
  sweepUploadsJob,
  deliverWebhookJob,
  sendEmailJob,
  pruneMailLogJob,
  sendResumeLinkJob,
  sendPortalSigninJob,
  prunePortalSigninsJob,
  expirePartialsJob,
  expirePrefillsJob,
  generateDocumentJob,
  emailDocumentJob,
];
