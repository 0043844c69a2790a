import { hkdfSync } from 'node:crypto';
import { decryptWith, encryptWith, SealError } from '../../crypto/envelope.js';

/**
 * An encrypted form's prefill values are sealed under a key that only the prefill link
 * carries (tokens.ts), like a partial's resume copy: the page opens them without the
 * password, and nothing the service stores opens them without the link.
 */
export const SEALED_PREFILL_PREFIX = 'fenc1:';

export function isSealedPrefill(data: string): boolean {
  return data.startsWith(SEALED_PREFILL_PREFIX);
}

const keyOf = (linkKey: string) => Buffer.from(hkdfSync('sha256', linkKey, 'formwork prefill', 'prefill data', 32));
const aad = (formId: number, id: string) => `formwork prefill ${formId} ${id}`;

export function sealPrefill(linkKey: string, json: string, formId: number, id: string): string {
  return SEALED_PREFILL_PREFIX + encryptWith(keyOf(linkKey), Buffer.from(json), aad(formId, id)).toString('base64');
}

/**
 * The stored values as JSON, or undefined when they are sealed and the link's key does not
 * open them, or are in the clear where they must be sealed.
 */
export function openPrefill(
  linkKey: string | undefined,
  data: string,
  formId: number,
  id: string,
  mustBeSealed: boolean,
): string | undefined {
  if (!isSealedPrefill(data)) return mustBeSealed ? undefined : data;
  if (linkKey === undefined) return undefined;
  try {
    return decryptWith(
      keyOf(linkKey),
      Buffer.from(data.slice(SEALED_PREFILL_PREFIX.length), 'base64'),
      aad(formId, id),
    ).toString();
  } catch (error) {
    if (error instanceof SealError) return undefined;
    throw error;
  }
}
