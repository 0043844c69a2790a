import { randomBytes } from 'node:crypto';
import { randomBase64url } from '../../crypto/random-pool.js';
import { decryptWith, encryptWith, serviceKey } from '../../crypto/envelope.js';

/** The secrets a webhook keeps; each is sealed on its own, bound to its account and its name. */
export type WebhookSecretName = 'signing' | 'hmac' | 'handshake';

function aad(accountId: number, name: WebhookSecretName): string {
  return `formwork webhook ${accountId} ${name}`;
}

/**
 * Sealed with a key derived from SECRET_KEY (AES-256-GCM), so that a copy of the database
 * alone signs nothing. A process with another SECRET_KEY cannot open them: every process
 * must share one (docs/operations.md).
 */
export function sealSecret(secretKey: string, accountId: number, name: WebhookSecretName, value: string): string {
  return encryptWith(serviceKey(secretKey, 'webhook secrets'), Buffer.from(value), aad(accountId, name)).toString(
    'base64',
  );
}

export function openSecret(secretKey: string, accountId: number, name: WebhookSecretName, sealed: string): string {
  return decryptWith(
    serviceKey(secretKey, 'webhook secrets'),
    Buffer.from(sealed, 'base64'),
    aad(accountId, name),
  ).toString();
}

/** A Standard Webhooks signing secret: whsec_ and 32 random bytes in base64. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** The webhook-id of one event: the same on every attempt and redelivery of it. */
export function newMessageId(): string {
  return `msg_${randomBase64url(16)}`;
}
