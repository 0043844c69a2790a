/** v2 forms: /form, /form/{id}, /form/{id}/copy, /form/{id}/basic. */
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { idParams } from '../../http/schemas.js';
import type { Caller } from '../permissions/caller.js';
import { listFolders } from '../folders/service.js';
import type { Folder } from '../folders/schemas.js';
import type { FormSettings } from '../forms/schemas.js';
import { CopyQuery, FormCreate, FormListQuery, FormUpdate, type Form } from '../forms/schemas.js';
import * as service from '../forms/service.js';
import { fieldInput, toV2Field } from './fields.js';
import { v2Route, type EmbedHtml } from './route.js';
import {
  bool,
  checked,
  deleted,
  int,
  optionalId,
  parametersOf,
  pick,
  readAs,
  str,
  v2List,
  v2Time,
  type Params,
} from './wire.js';

/** A form as v2 writes it; with its fields in the detail. */
export function toV2Form(form: Form) {
  const s = form.settings;
  return {
    id: str(form.id),
    name: form.name,
    created: v2Time(form.created),
    updated: v2Time(form.updated),
    deleted: form.deleted ? '1' : '0',
    folder: str(form.folder ?? 0),
    language: s.language ?? 'en',
    timezone: s.timezone ?? 'America/New_York',
    label_position: s.labelPosition ?? 'top',
    submissions: str(form.submissionsCount),
    url: form.url,
    encrypted: form.isEncrypted,
    inactive: form.inactive,
    active: form.inactive ? '0' : '1',
    submit_button_title: form.submitButtonTitle,
    description: s.description ?? '',
    success_message: s.successMessage ?? '',
    redirect_url: s.redirectUrl ?? '',
    closed_message: s.closedMessage ?? '',
    submission_limit: s.submissionLimit === undefined ? '0' : str(s.submissionLimit),
    save_and_resume: s.saveAndResume ? '1' : '0',
    theme_id: form.themeId,
    ...(form.fields ? { fields: form.fields.map(toV2Field) } : {}),
  };
}

const SETTINGS: Record<string, [string, ((v: unknown) => unknown)?]> = {
  description: ['description'],
  language: ['language'],
  timezone: ['timezone'],
  label_position: ['labelPosition'],
  success_message: ['successMessage'],
  redirect_url: ['redirectUrl'],
  closed_message: ['closedMessage'],
  submission_limit: ['submissionLimit', int],
  save_and_resume: ['saveAndResume', bool],
};

/** Whether a setting's value says "none" (0 or empty for a limit, empty for an address): the setting is removed. */
const NONE: Record<string, (v: unknown) => boolean> = {
  submissionLimit: (v) => v === 0 || v === null || (typeof v === 'string' && v.trim() === ''),
  redirectUrl: (v) => v === null || (typeof v === 'string' && v.trim() === ''),
};

/**
 * The v2025 form input of v2 parameters (`current`: the settings of the form being changed).
 * Settings that mean nothing here (db, use_ssl,
 * num_columns, progress_meter, …) and any other unknown name are ignored, as the original did.
 */
function formInput(params: Params, current?: FormSettings): Params {
  const input = pick(params, {
    name: ['name'],
    folder: ['folder', optionalId],
    submit_button_title: ['submitButtonTitle'],
    inactive: ['inactive', bool],
    theme_id: ['themeId'],
    encrypted: ['isEncrypted', bool],
    encryption_password: ['encryptionPassword'],
    new_encryption_password: ['newEncryptionPassword'],
  });
  if (params.active !== undefined) {
    const active = bool(params.active);
    input.inactive = typeof active === 'boolean' ? !active : active;
  }
  // encryption_password names the current password on reads; here only with encrypted.
  if (params.encrypted === undefined && params.new_encryption_password === undefined) delete input.encryptionPassword;
  // On create, the fields made with the form: `fields[n][field_type]=text`, each read as a field is.
  if (current === undefined && params.fields !== undefined) {
    const fields = readAs(params.fields, Type.Array(Type.Unknown()));
    input.fields = Array.isArray(fields)
      ? fields.map((f: unknown) =>
          typeof f === 'object' && f !== null && !Array.isArray(f) ? fieldInput(f as Params) : f,
        )
      : fields;
  }
  const settings = pick(params, SETTINGS);
  const removed = Object.keys(settings).filter((k) => NONE[k]?.(settings[k]));
  if (Object.keys(settings).length > 0) {
    // v2025 replaces the settings as a whole: those not named keep their values, those said to be none go.
    const merged: Params = { ...(current ?? {}), ...settings };
    for (const k of removed) delete merged[k];
    input.settings = merged;
  }
  return input;
}

const formParams = idParams('formId');

/** Every folder of the account by id (the tree flattened), for the list grouped by folder. */
async function folderNames(ctx: AppContext, caller: Caller): Promise<Map<number, string>> {
  const names = new Map<number, string>();
  const visit = (f: Folder) => {
    names.set(f.id, f.name);
    f.subfolders.forEach(visit);
  };
  for (let pageNumber = 1; ; pageNumber++) {
    const page = await listFolders(ctx, caller, { page: pageNumber, perPage: 100 });
    page.folders.forEach(visit);
    if (pageNumber >= page.pages) break;
  }
  return names;
}

export function v2FormRoutes(ctx: AppContext, embedHtml: EmbedHtml): FastifyPluginAsync {
  const caches = service.formReadCaches(Math.min(ctx.config.readCacheBytes, 4 * 1024 * 1024));
  const serializers: service.ListSerializers = { form: (f) => JSON.stringify(f), page: (p) => JSON.stringify(p) };

  const read = async (req: { params: unknown }, caller: Caller, withFields: boolean) =>
    toV2Form(await service.getForm(ctx, caller, { formId: (req.params as { formId: number }).formId }, withFields));

  return async (app) => {
    v2Route(app, {
      method: 'GET',
      url: '/form',
      access: { scope: 'forms:read' },
      operationId: 'v2ListForms',
      summary: 'v2: list forms (page, per_page, folders=1 groups them by folder)',
      answer: '{"forms": [form, …], "total": n, "pages": n}; with folders=1, forms is an object keyed by folder id',
      handler: async (req) => {
        const params = parametersOf(req);
        const caller = principal(req);
        const q = checked<FormListQuery>(
          FormListQuery,
          pick(params, {
            page: ['pageNumber', int],
            page_number: ['pageNumber', int],
            per_page: ['pageSize', int],
            search: ['search'],
          }),
          'querystring',
        );
        const page = JSON.parse(
          (await service.listFormsJson(ctx, caches, caller, q, serializers)).toString('utf8'),
        ) as { forms: Form[]; total: number; pages: number };
        const forms = page.forms.map(toV2Form);
        if (bool(params.folders) !== true) return v2List('forms', forms, page.total, page.pages);
        const names = await folderNames(ctx, caller);
        const grouped: Record<string, { id: string; name: string; forms: unknown[] }> = {};
        for (const form of forms) {
          const id = form.folder;
          grouped[id] ??= { id, name: names.get(Number(id)) ?? '', forms: [] };
          grouped[id].forms.push(form);
        }
        return { forms: grouped, total: page.total, pages: page.pages };
      },
    });
    v2Route(app, {
      method: 'POST',
      url: '/form',
      access: { scope: 'forms:write' },
      operationId: 'v2CreateForm',
      summary: 'v2: create a form (name, folder, submit_button_title, label_position, timezone, language, active, …)',
      body: true,
      created: true,
      answer: 'The form, with its fields',
      handler: async (req) => {
        const input = checked<FormCreate>(FormCreate, formInput(parametersOf(req)));
        const form = await service.createForm(ctx, principal(req), input);
        return toV2Form({ ...form, fields: form.fields ?? [] });
      },
    });
    v2Route(app, {
      method: 'GET',
      url: '/form/:formId',
      access: { scope: 'forms:read', level: 'view', formFrom: 'formId' },
      operationId: 'v2GetForm',
      summary: 'v2: read a form with its fields',
      params: formParams,
      answer: 'The form, with its fields',
      handler: (req) => read(req, principal(req), true),
    });
    v2Route(app, {
      method: 'GET',
      url: '/form/:formId/basic',
      access: { scope: 'forms:read', level: 'view', formFrom: 'formId' },
      operationId: 'v2GetFormBasic',
      summary: 'v2: read a form without its fields',
      params: formParams,
      answer: 'The form, without fields',
      handler: (req) => read(req, principal(req), false),
    });
    v2Route(app, {
      method: 'GET',
      url: '/form/:formId/html',
      access: { scope: 'forms:read', level: 'view', formFrom: 'formId' },
      operationId: 'v2GetFormHtml',
      summary: "v2: the form's HTML, to embed in another page",
      params: formParams,
      answer: '{"id": "<form id>", "url": "<hosted page>", "html": "<the form>"}',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        const embed = await embedHtml(principal(req), formId);
        return { id: str(formId), url: embed.url, html: embed.html };
      },
    });
    v2Route(app, {
      method: 'PUT',
      url: '/form/:formId',
      access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' },
      operationId: 'v2UpdateForm',
      summary: 'v2: change a form; only the parameters sent change',
      params: formParams,
      body: true,
      answer: 'The form, with its fields',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        const caller = principal(req);
        const current = await service.getForm(ctx, caller, { formId }, false);
        const given = formInput(parametersOf(req), current.settings);
        // Only settings that mean nothing here (db, use_ssl, …): nothing to change, as the original saw it.
        if (Object.keys(given).length > 0)
          await service.updateForm(ctx, caller, { formId }, checked<FormUpdate>(FormUpdate, given));
        return read(req, caller, true);
      },
    });
    v2Route(app, {
      method: 'DELETE',
      url: '/form/:formId',
      access: { scope: 'forms:write', level: 'full', formFrom: 'formId' },
      operationId: 'v2DeleteForm',
      summary: 'v2: delete a form',
      params: formParams,
      answer: '{"success": "1", "id": "<id>"}',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        return deleted((await service.deleteForm(ctx, principal(req), { formId })).id);
      },
    });
    v2Route(app, {
      method: 'POST',
      url: '/form/:formId/copy',
      access: { scope: 'forms:write', level: 'view', formFrom: 'formId' },
      operationId: 'v2CopyForm',
      summary: 'v2: copy a form',
      params: formParams,
      body: true,
      created: true,
      answer: 'The copy, with its fields',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        const caller = principal(req);
        const given = pick(parametersOf(req), { folder: ['folder', optionalId] });
        // 0 or empty is the top level, which the v2025 copy cannot name (without a folder it copies
        // into the source's): the copy is made there and then moved up.
        const toTop = given.folder === null;
        if (toTop) delete given.folder;
        const q = checked<CopyQuery>(CopyQuery, given, 'querystring');
        const copy = await service.copyForm(ctx, caller, { formId }, q);
        if (toTop && copy.folder !== null) await service.updateForm(ctx, caller, { formId: copy.id }, { folder: null });
        return toV2Form(await service.getForm(ctx, caller, { formId: copy.id }, true));
      },
    });
  };
}
