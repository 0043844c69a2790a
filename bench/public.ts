/**
 * The public section's request bodies: the 10-field form of bench/submission-data.ts as the
 * hosted page's plain HTML form posts it (urlencoded, the input names of
 * src/modules/hosted/form-model.ts), each with a page token of its own, signed as the
 * service signs them (the bench gives the service its SECRET_KEY).
 */
import { loadToken } from '../src/modules/hosted/tokens.js';
import { submissionInput, type FieldIds } from './submission-data.js';

export function plainPost(n: number, ids: FieldIds, formId: number, secretKey: string, now: number): string {
  const body = new URLSearchParams();
  // Loaded 10 s ago: past the minimum time to submit; a new token is a new idempotency key.
  body.set('_fw', loadToken(secretKey, formId, now - 10_000));
  body.set('website', '');
  for (const { id, value } of submissionInput(n, ids)) {
    const name = `f${id}`;
    const v = value as Record<string, unknown> | string | number;
    if (typeof v !== 'object') body.append(name, String(v));
    else if (Array.isArray(v.subvalues))
      for (const s of v.subvalues as { subvalue: string }[]) body.append(name, s.subvalue);
    else if ('value' in v) body.append(name, String(v.value));
    else for (const [part, x] of Object.entries(v)) body.append(`${name}.${part}`, String(x));
  }
  return body.toString();
}
