import type { Executor } from '../../db/transaction.js';
import * as repo from './repository.js';
import { newSigningSecret, openSecret, sealSecret } from './secrets.js';

/**
 * Gives the form `to` a copy of each webhook of the form `from` (both of one account), for
 * POST /forms/{formId}/copy?includeIntegrations=true. Each copy has a signing secret of its
 * own, which nobody has seen: the account rotates it (POST /webhook/{id}/secret) to learn it.
 * The hmacSecret and handshakeKey are the account's own values and go with the copy. A copy
 * starts active, unless its original was turned off; it has no deliveries. With toAccountId
 * (a copy into a subaccount), the copies belong to that account, their hmacSecret sealed for it.
 * Kept apart from service.ts so that the forms service can call it without an import cycle.
 */
export async function copyWebhooks(
  db: Executor,
  secretKey: string,
  accountId: number,
  from: number,
  to: number,
  now: number,
  toAccountId = accountId,
): Promise<void> {
  for (const source of await repo.listWebhooks(db, accountId, from)) {
    const disabled = source.state === 'disabled';
    // Secrets are sealed for their account: a copy into another is opened and sealed again.
    const reseal = (name: 'hmac' | 'handshake', sealed: string | null) =>
      sealed === null || toAccountId === accountId
        ? sealed
        : sealSecret(secretKey, toAccountId, name, openSecret(secretKey, accountId, name, sealed));
    await repo.insertWebhook(db, {
      account_id: toAccountId,
      form_id: to,
      url: source.url,
      content_type: source.content_type,
      events: source.events,
      include_field_type: source.include_field_type,
      signing_secret: sealSecret(secretKey, toAccountId, 'signing', newSigningSecret()),
      hmac_secret: reseal('hmac', source.hmac_secret),
      handshake_key: reseal('handshake', source.handshake_key),
      state: disabled ? 'disabled' : 'active',
      failure_reason: disabled ? source.failure_reason : null,
      failed_at: null,
      created_at: now,
      updated_at: now,
    });
  }
}
