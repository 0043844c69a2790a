/**
 * Requests in the v2 manner and the shapes of v2 answers, written from the original
 * service's v2 documentation (API overview and per-endpoint pages; docs/v2.md).
 */
import assert from 'node:assert/strict';
import type { Reply, TestApp } from './helpers.js';
import { httpRequest } from './http-client.js';

export const V2_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
const ID = /^[1-9][0-9]*$/;

/** Form-encoded text of nested values, in bracket notation (field_12[first]=Ada, options[0]=Small). */
export function formEncode(values: Record<string, unknown>, prefix = ''): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(values)) {
    const name = prefix ? `${prefix}[${k}]` : k;
    if (v !== null && typeof v === 'object') parts.push(formEncode(v as Record<string, unknown>, name));
    else parts.push(`${encodeURIComponent(name)}=${encodeURIComponent(String(v))}`);
  }
  return parts.filter((p) => p !== '').join('&');
}

export type V2Style = 'form' | 'json' | 'form-as-json' | 'none';

/** A v2 request: the body form-encoded (default), JSON, form-encoded labelled JSON, or form-encoded with no content type. */
export function v2(app: TestApp, token: string) {
  return (method: string, path: string, values?: Record<string, unknown>, style: V2Style = 'form', headers = {}) => {
    if (values === undefined) return app.request(method, `/api/v2${path}`, { token, headers });
    if (style === 'none' || method === 'GET')
      return rawV2(
        app,
        token,
        method,
        path,
        formEncode(values),
        style === 'none' ? undefined : 'application/x-www-form-urlencoded',
      );
    const raw = style === 'json' ? JSON.stringify(values) : formEncode(values);
    const h: Record<string, string> = {
      ...headers,
      'content-type': style === 'form' ? 'application/x-www-form-urlencoded' : 'application/json',
    };
    return app.request(method, `/api/v2${path}`, { token, raw, headers: h });
  };
}

/** A request with no Content-Type unless given, and a body with any method (fetch sends none on GET). */
export async function rawV2(
  app: TestApp,
  token: string,
  method: string,
  path: string,
  raw: string,
  contentType?: string,
): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (contentType) headers['content-type'] = contentType;
  const res = await httpRequest(`${app.url}/api/v2${path}`, { method, headers, body: raw });
  return { ...res, body: res.text === '' ? undefined : JSON.parse(res.text) };
}

export function ok(res: Reply, status = 200): any {
  assert.equal(res.status, status, `${res.status} ${res.text.slice(0, 400)}`);
  return res.body;
}

/** Every documented key is there, with the documented kind of value. */
export function assertShape(
  value: any,
  shape: Record<string, 'id' | 'string' | 'time' | 'flag' | 'boolean' | 'array' | 'object' | 'any'>,
  what: string,
) {
  for (const [key, kind] of Object.entries(shape)) {
    assert.ok(key in value, `${what}: ${key} missing in ${JSON.stringify(value).slice(0, 300)}`);
    const v = value[key];
    const where = `${what}.${key} = ${JSON.stringify(v)}`;
    if (kind === 'id') assert.match(v, ID, where);
    if (kind === 'string') assert.equal(typeof v, 'string', where);
    if (kind === 'time') assert.match(v, V2_TIME, where);
    if (kind === 'flag') assert.ok(v === '0' || v === '1', where);
    if (kind === 'boolean') assert.equal(typeof v, 'boolean', where);
    if (kind === 'array') assert.ok(Array.isArray(v), where);
    if (kind === 'object') assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), where);
  }
}

// Shapes from the original's documentation (form, field, submission, folder, list wrappers, delete).
export const FORM_SHAPE = {
  id: 'id',
  name: 'string',
  created: 'time',
  updated: 'time',
  deleted: 'flag',
  folder: 'string',
  language: 'string',
  timezone: 'string',
  submissions: 'string',
  url: 'string',
  encrypted: 'boolean',
  inactive: 'boolean',
  submit_button_title: 'string',
} as const;
export const FIELD_SHAPE = {
  id: 'id',
  label: 'string',
  hide_label: 'flag',
  description: 'string',
  type: 'string',
  options: 'array',
  required: 'flag',
  uniq: 'flag',
  hidden: 'flag',
  readonly: 'flag',
  colspan: 'string',
  sort: 'string',
  default: 'any',
} as const;
export const SUBMISSION_SHAPE = {
  id: 'id',
  form: 'id',
  timestamp: 'time',
  user_agent: 'string',
  remote_addr: 'string',
  latitude: 'any',
  longitude: 'any',
} as const;
export const FOLDER_SHAPE = { id: 'id', name: 'string', parent: 'string', subfolders: 'array' } as const;
export const LIST_SHAPE = { total: 'any', pages: 'any' } as const;

export function assertDeleted(res: Reply, id: number | string): void {
  assert.deepEqual(ok(res), { success: '1', id: String(id) });
}

export function assertV2Error(res: Reply, status: number): void {
  assert.equal(res.status, status, res.text.slice(0, 300));
  assert.equal(res.body.status, 'error');
  assert.equal(typeof res.body.error, 'string');
}
