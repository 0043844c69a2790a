/**
 * v2 submissions: /form/{id}/submission (list, create), /submission/{id} (read, edit,
 * delete), /form/{id}/count and the file download /download/{submission}/{field}[/{index}].
 */
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { Id, idParams } from '../../http/schemas.js';
import type { AccountScope } from '../permissions/caller.js';
import { listFields } from '../fields/service.js';
import { submissionsDeps } from '../submissions/definitions.js';
import { fileRefs } from '../submissions/values.js';
import { countSubmissions, getSubmission, listSubmissions, openSubmissionFile } from '../submissions/query.js';
import {
  CountQuery,
  SubmissionCreate,
  SubmissionListQuery,
  SubmissionUpdate,
  type Submission,
  type SubmissionListItem,
} from '../submissions/schemas.js';
import { requestMetaOf } from '../../http/request-meta.js';
import { createSubmission, deleteSubmission, updateSubmission } from '../submissions/write.js';
import { contentDisposition } from '../uploads/routes.js';
import { V2_PREFIX } from './paths.js';
import { v2Route } from './route.js';
import {
  bool,
  checked,
  deleted,
  encryptionPassword,
  int,
  num,
  parametersOf,
  pick,
  str,
  v2List,
  v2Time,
  type Params,
} from './wire.js';

/** v2's names of the list parameters of submissions and of partial submissions, with the v2025 names they stand for. */
const LIST_PARAMETERS: Record<string, [string, ((v: unknown) => unknown)?]> = {
  page: ['pageNumber', int],
  page_number: ['pageNumber', int],
  per_page: ['pageSize', int],
  sort: ['order'],
  min_time: ['minTime'],
  max_time: ['maxTime'],
  keyword: ['keyword'],
  data: ['data', bool],
  expand_data: ['expandData', bool],
};

interface Entry {
  field: number;
  value: unknown;
  label?: string;
  type?: string;
  displayValue?: string;
}

/** Where v2 answers send for the files of submissions: `{PUBLIC_URL}/api/v2/download`. */
export const downloadsOf = (ctx: AppContext): string => `${ctx.config.publicUrl}${V2_PREFIX}/download`;

/**
 * A value as v2 writes it: a file or signature field's files as their v2 download URLs (one
 * URL, as the original's file fields held one file; a list when there are several), any other
 * value as stored.
 */
function v2Value(value: unknown, downloads: string, submissionId: number, fieldId: number): unknown {
  const files = fileRefs(value);
  if (!files || files.length === 0) return value;
  const urls = files.map((_, index) => `${downloads}/${submissionId}/${fieldId}/${index}`);
  return urls.length === 1 ? urls[0] : urls;
}

function v2Data(
  data: Entry[] | Record<string, Entry>,
  downloads: string,
  submissionId: number,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const e of Array.isArray(data) ? data : Object.values(data)) {
    out[String(e.field)] = {
      field: str(e.field),
      value: v2Value(e.value, downloads, submissionId, e.field),
      ...(e.label !== undefined ? { label: e.label } : {}),
      ...(e.type !== undefined ? { type: e.type } : {}),
      ...(e.displayValue !== undefined ? { flat_value: e.displayValue } : {}),
    };
  }
  return out;
}

/** What a submission, a listed one and a partial one share. */
type SubmissionLike = Omit<Submission | SubmissionListItem, 'latitude' | 'longitude' | 'data'> & {
  latitude?: number | null;
  longitude?: number | null;
  data?: unknown;
};

/** A submission as v2 writes it: data keyed by field id (downloads: downloadsOf, for its files). */
export function toV2Submission(s: SubmissionLike, downloads: string) {
  const coord = (n: number | null | undefined) => (n === null || n === undefined ? null : String(n));
  return {
    id: str(s.id),
    form: str(s.formId),
    timestamp: v2Time(s.timestamp),
    updated: v2Time(s.updated),
    user_agent: s.userAgent,
    remote_addr: s.remoteAddr,
    payment_status: '',
    latitude: coord(s.latitude),
    longitude: coord(s.longitude),
    ...(s.prettyName !== undefined ? { pretty_field_id: s.prettyName } : {}),
    ...(s.data !== undefined ? { data: v2Data(s.data as Entry[] | Record<string, Entry>, downloads, s.id) } : {}),
  };
}

const MULTIPLE = new Set(['checkbox']);

/**
 * field_<id> parameters as the v2025 list of values. A list becomes subvalues; a checkbox's
 * comma-separated text too; subfields (field_12[first]=Ada or a JSON object) pass as they are.
 */
async function fieldValues(
  ctx: AppContext,
  scope: AccountScope,
  formId: number,
  params: Params,
): Promise<{ id: number; value: unknown }[]> {
  const given = Object.entries(params).filter(([k]) => /^field_[1-9][0-9]{0,9}$/.test(k));
  if (given.length === 0) return [];
  const types = new Map((await listFields(ctx, scope, { formId })).fields.map((f) => [f.id, f.type]));
  return given.map(([k, v]) => {
    const id = Number(k.slice(6));
    let value = v;
    if (typeof v === 'string' && MULTIPLE.has(types.get(id) ?? ''))
      value = v === '' ? [] : v.split(',').map((s) => s.trim());
    if (Array.isArray(value)) value = { subvalues: value.map((subvalue) => ({ subvalue })) };
    return { id, value };
  });
}

/** search_field_<n>/search_value_<n> as search[n]. */
function searchOf(params: Params): Params | undefined {
  const search: Params = {};
  for (const [k, v] of Object.entries(params)) {
    const m = /^search_field_([0-9])$/.exec(k);
    if (!m) continue;
    search[m[1]!] = { fieldId: int(v), value: params[`search_value_${m[1]}`] ?? '' };
  }
  return Object.keys(search).length > 0 ? search : undefined;
}

/** The v2025 query of a v2 list of submissions or of partial submissions, its search_field_n/search_value_n too. */
export function listQueryOf(params: Params): SubmissionListQuery {
  const input = pick(params, LIST_PARAMETERS);
  const search = searchOf(params);
  if (search) input.search = search;
  return checked<SubmissionListQuery>(SubmissionListQuery, input, 'querystring');
}

const formParams = idParams('formId');
const submissionParams = idParams('submissionId');
const downloadParams = Type.Object({ submissionId: Id, fieldId: Id });
const downloadIndexParams = Type.Object({
  submissionId: Id,
  fieldId: Id,
  index: Type.Integer({ minimum: 0, maximum: 1000 }),
});

export function v2SubmissionRoutes(ctx: AppContext): FastifyPluginAsync {
  const deps = submissionsDeps(ctx);
  const downloads = downloadsOf(ctx);
  const toV2 = (s: SubmissionLike) => toV2Submission(s, downloads);
  return async (app) => {
    v2Route(app, {
      method: 'GET',
      url: '/form/:formId/submission',
      access: { scope: 'submissions:read', level: 'view', formFrom: 'formId' },
      operationId: 'v2ListSubmissions',
      summary:
        'v2: list submissions (page, per_page, sort, min_time, max_time, search_field_n/search_value_n, data, expand_data)',
      params: formParams,
      answer: '{"submissions": [submission, …], "total": n, "pages": n}',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        const params = parametersOf(req);
        const q = listQueryOf(params);
        const page = await listSubmissions(deps, principal(req), { formId }, q, encryptionPassword(req, params));
        return v2List('submissions', page.submissions.map(toV2), page.total, page.pages);
      },
    });
    v2Route(app, {
      method: 'POST',
      url: '/form/:formId/submission',
      access: { scope: 'submissions:write', level: 'submissions', formFrom: 'formId' },
      operationId: 'v2CreateSubmission',
      summary: 'v2: submit a form (field_<id> values; subfields in brackets or as an object)',
      params: formParams,
      body: true,
      created: true,
      answer: 'The submission, data keyed by field id',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        const caller = principal(req);
        const params = parametersOf(req);
        const input = pick(params, { latitude: ['latitude', num], longitude: ['longitude', num] });
        input.fields = await fieldValues(ctx, caller, formId, params);
        const body = checked<SubmissionCreate>(SubmissionCreate, input);
        const meta = requestMetaOf(req);
        return toV2(await createSubmission(deps, caller, { formId }, body, meta));
      },
    });
    v2Route(app, {
      method: 'GET',
      url: '/submission/:submissionId',
      access: { scope: 'submissions:read', level: 'view', formFrom: 'submissionId' },
      operationId: 'v2GetSubmission',
      summary: 'v2: read a submission (encryption_password or the header on encrypted forms)',
      params: submissionParams,
      answer: 'The submission, data keyed by field id',
      handler: async (req) => {
        const { submissionId } = req.params as { submissionId: number };
        const password = encryptionPassword(req, parametersOf(req));
        return toV2(await getSubmission(deps, principal(req), { submissionId }, password));
      },
    });
    v2Route(app, {
      method: 'PUT',
      url: '/submission/:submissionId',
      access: { scope: 'submissions:write', level: 'submissions', formFrom: 'submissionId' },
      operationId: 'v2UpdateSubmission',
      summary: 'v2: change the values named (field_<id>)',
      params: submissionParams,
      body: true,
      answer: 'The submission, data keyed by field id',
      handler: async (req) => {
        const { submissionId } = req.params as { submissionId: number };
        const caller = principal(req);
        const params = parametersOf(req);
        const password = encryptionPassword(req, params);
        const current = await getSubmission(deps, caller, { submissionId }, password);
        const body = checked<SubmissionUpdate>(SubmissionUpdate, {
          fields: await fieldValues(ctx, caller, current.formId, params),
        });
        return toV2(await updateSubmission(deps, caller, { submissionId }, body, password));
      },
    });
    v2Route(app, {
      method: 'DELETE',
      url: '/submission/:submissionId',
      access: { scope: 'submissions:write', level: 'submissions', formFrom: 'submissionId' },
      operationId: 'v2DeleteSubmission',
      summary: 'v2: delete a submission',
      params: submissionParams,
      answer: '{"success": "1", "id": "<id>"}',
      handler: async (req) => {
        const { submissionId } = req.params as { submissionId: number };
        return deleted((await deleteSubmission(deps, principal(req), { submissionId })).id);
      },
    });
    v2Route(app, {
      method: 'GET',
      url: '/form/:formId/count',
      access: { scope: 'submissions:read', level: 'view', formFrom: 'formId' },
      operationId: 'v2CountSubmissions',
      summary: 'v2: count the submissions of a form (min_time: from then on; lookback_period: days)',
      params: formParams,
      answer: '{"id": "<form id>", "count": n}',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        const q = checked<CountQuery>(
          CountQuery,
          pick(parametersOf(req), { min_time: ['startDate'], lookback_period: ['lookbackPeriod', int] }),
          'querystring',
        );
        const counted = await countSubmissions(deps, principal(req), { formId }, q);
        return { id: str(formId), count: counted.count };
      },
    });
    const download = async (req: { params: unknown }, reply: FastifyReply, r: Parameters<typeof parametersOf>[0]) => {
      const p = req.params as { submissionId: number; fieldId: number; index?: number };
      const file = await openSubmissionFile(
        deps,
        principal(r),
        { submissionId: p.submissionId },
        { fieldId: p.fieldId, index: p.index ?? 0 },
        encryptionPassword(r, parametersOf(r)),
      );
      return reply
        .type('application/octet-stream')
        .header('content-length', String(file.size))
        .header('content-disposition', contentDisposition(file.filename))
        .header('x-content-type-options', 'nosniff')
        .send(file.stream);
    };
    v2Route(app, {
      method: 'GET',
      url: '/download/:submissionId/:fieldId',
      access: { scope: 'submissions:read', level: 'view', formFrom: 'submissionId' },
      operationId: 'v2DownloadFile',
      summary: 'v2: the bytes of the first file of a file or signature field',
      params: downloadParams,
      answer: 'application/octet-stream',
      handler: (req, reply) => download(req, reply, req),
    });
    v2Route(app, {
      method: 'GET',
      url: '/download/:submissionId/:fieldId/:index',
      access: { scope: 'submissions:read', level: 'view', formFrom: 'submissionId' },
      operationId: 'v2DownloadFileAt',
      // Its index is no id (0 is the first file), which the id matrices of the tests cannot take; docs/v2.md has it.
      hide: true,
      summary: 'v2: the bytes of the index-th file (from 0) of a file or signature field',
      params: downloadIndexParams,
      answer: 'application/octet-stream',
      handler: (req, reply) => download(req, reply, req),
    });
  };
}
