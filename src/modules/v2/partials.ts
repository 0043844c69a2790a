/** v2 partial submissions: /form/{id}/partialsubmission and /partialsubmission/{id}. */
import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { idParams } from '../../http/schemas.js';
import * as service from '../partials/service.js';
import { v2Route } from './route.js';
import { downloadsOf, listQueryOf, toV2Submission } from './submissions.js';
import { deleted, encryptionPassword, parametersOf, v2List, v2Time } from './wire.js';

const partialParams = idParams('partialSubmissionId');

export function v2PartialRoutes(ctx: AppContext): FastifyPluginAsync {
  const downloads = downloadsOf(ctx);
  /** A partial submission as v2 writes a submission (data keyed by field id), with when it expires. */
  const toV2Partial = (p: Parameters<typeof toV2Submission>[0] & { expires: string }) => ({
    ...toV2Submission(p, downloads),
    expires: v2Time(p.expires),
  });
  return async (app) => {
    v2Route(app, {
      method: 'GET',
      url: '/form/:formId/partialsubmission',
      access: { scope: 'submissions:read', level: 'view', formFrom: 'formId' },
      operationId: 'v2ListPartialSubmissions',
      summary:
        'v2: the partial submissions of a form (page, per_page, sort, min_time, max_time, search_field_n/search_value_n, data)',
      params: idParams('formId'),
      answer: '{"partial_submissions": [partial submission, …], "total": n, "pages": n}',
      handler: async (req) => {
        const params = parametersOf(req);
        const q = listQueryOf(params);
        const page = await service.listPartials(
          ctx,
          principal(req),
          req.params as { formId: number },
          q,
          encryptionPassword(req, params),
        );
        return v2List('partial_submissions', page.partialSubmissions.map(toV2Partial), page.total, page.pages);
      },
    });
    v2Route(app, {
      method: 'GET',
      url: '/partialsubmission/:partialSubmissionId',
      access: { scope: 'submissions:read', level: 'view', formFrom: 'partialSubmissionId' },
      operationId: 'v2GetPartialSubmission',
      summary: 'v2: read a partial submission',
      params: partialParams,
      answer: 'The partial submission',
      handler: async (req) =>
        toV2Partial(
          await service.getPartial(
            ctx,
            principal(req),
            req.params as { partialSubmissionId: number },
            encryptionPassword(req, parametersOf(req)),
          ),
        ),
    });
    v2Route(app, {
      method: 'DELETE',
      url: '/partialsubmission/:partialSubmissionId',
      access: { scope: 'submissions:write', level: 'submissions', formFrom: 'partialSubmissionId' },
      operationId: 'v2DeletePartialSubmission',
      summary: 'v2: delete a partial submission',
      params: partialParams,
      answer: '{"success": "1", "id": "<id>"}',
      handler: async (req) =>
        deleted((await service.deletePartial(ctx, principal(req), req.params as { partialSubmissionId: number })).id),
    });
  };
}
