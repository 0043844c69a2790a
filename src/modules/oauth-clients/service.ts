import type { Kysely } from 'kysely';
import type { AppContext } from '../../context.js';
import { hashToken, newKey, newToken } from '../../crypto/secrets.js';
import type { Database } from '../../db/schema.js';
import { transact } from '../../db/transaction.js';
import { invalid, NotFoundError } from '../../errors.js';
import { isoTime } from '../../http/schemas.js';
import * as repo from './repository.js';
import type { OAuthClient, OAuthClientCreate, OAuthClientCreated, OAuthClientUpdate } from './schemas.js';
import type { AccountScope, ClientRef } from '../permissions/caller.js';

export const CLIENT_SECRET_PREFIX = 'fw_cs_';
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Why a redirect URI cannot be registered, or undefined when it can. */
export function redirectUriProblem(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'is not an absolute URL';
  }
  if (url.hash !== '' || uri.includes('#')) return 'must not have a fragment';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && LOOPBACK.has(url.hostname)) return undefined;
  return 'must use https (http only on localhost, 127.0.0.1 or [::1])';
}

export function toClient(row: repo.OAuthClientRow): OAuthClient {
  return {
    id: row.id,
    clientId: row.client_id,
    name: row.name,
    redirectUris: JSON.parse(row.redirect_uris) as string[],
    requirePkce: row.require_pkce === 1,
    created: isoTime(row.created_at),
  };
}

function checkedName(raw: string): string {
  const name = raw.trim();
  if (name === '') throw invalid('invalid_request', 'body.name', 'must not be blank');
  return name;
}

/** The redirect URIs as stored: checked, without repeats, as JSON. */
function checkedRedirectUris(uris: string[]): string {
  uris.forEach((uri, i) => {
    const problem = redirectUriProblem(uri);
    if (problem) throw invalid('invalid_request', `body.redirectUris[${i}]`, problem);
  });
  return JSON.stringify([...new Set(uris)]);
}

export async function createClient(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  { accountId }: AccountScope,
  input: OAuthClientCreate,
): Promise<OAuthClientCreated> {
  const name = checkedName(input.name);
  const redirectUris = checkedRedirectUris(input.redirectUris);
  const secret = newToken(CLIENT_SECRET_PREFIX);
  const row = await transact(ctx.db, (trx) =>
    repo.insertClient(trx, {
      account_id: accountId,
      client_id: `fwc_${newKey(16)}`,
      secret_hash: hashToken(secret),
      name,
      redirect_uris: redirectUris,
      require_pkce: input.requirePkce === false ? 0 : 1,
      created_at: ctx.clock.now(),
    }),
  );
  const { id, clientId, ...rest } = toClient(row);
  return { id, clientId, clientSecret: secret, ...rest };
}

export async function updateClient(
  db: Kysely<Database>,
  { accountId }: AccountScope,
  { clientId: id }: ClientRef,
  input: OAuthClientUpdate,
): Promise<OAuthClient> {
  const update = {
    ...(input.name !== undefined && { name: checkedName(input.name) }),
    ...(input.redirectUris !== undefined && { redirect_uris: checkedRedirectUris(input.redirectUris) }),
    ...(input.requirePkce !== undefined && { require_pkce: input.requirePkce ? 1 : 0 }),
  };
  return transact(db, async (trx) => {
    const row = await repo.updateClient(trx, accountId, id, update);
    if (!row) throw new NotFoundError('oauth_client_not_found');
    return toClient(row);
  });
}

export async function listClients(
  db: Kysely<Database>,
  { accountId }: AccountScope,
): Promise<{ clients: OAuthClient[] }> {
  return { clients: (await repo.listClients(db, accountId)).map(toClient) };
}

export async function getClient(
  db: Kysely<Database>,
  { accountId }: AccountScope,
  { clientId: id }: ClientRef,
): Promise<OAuthClient> {
  const row = await repo.findClient(db, accountId, id);
  if (!row) throw new NotFoundError('oauth_client_not_found');
  return toClient(row);
}

export async function deleteClient(
  db: Kysely<Database>,
  { accountId }: AccountScope,
  { clientId: id }: ClientRef,
): Promise<{ id: number; deleted: true }> {
  return transact(db, async (trx) => {
    if (!(await repo.deleteClient(trx, accountId, id))) throw new NotFoundError('oauth_client_not_found');
    return { id, deleted: true as const };
  });
}
