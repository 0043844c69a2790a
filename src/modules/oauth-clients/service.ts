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

/** Control characters (C0, DEL, C1) and whitespace of any kind. */
const CONTROL_OR_SPACE = /[\p{Cc}\s]/u;

const codePoint = (c: string) => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/**
 * Why a redirect URI cannot be registered, or undefined when it can. The authorize request must
 * name it character for character and the redirect goes to it as the URL parser reads it, so
 * only a URI that the WHATWG parser writes back unchanged is taken: one that the parser would
 * read differently (CR/LF or a tab dropped, `https:host` read as `https://host`, case, a default
 * port, characters it escapes) is refused with the form to write instead. Stored URIs are
 * compared as stored.
 */
export function redirectUriProblem(uri: string): string | undefined {
  const bad = CONTROL_OR_SPACE.exec(uri);
  if (bad) {
    return (
      `must not hold control characters or whitespace (${codePoint(bad[0])} at character ${bad.index + 1}); ` +
      'percent-encode any that the URI needs'
    );
  }
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'is not an absolute URL';
  }
  if (url.hash !== '' || uri.includes('#')) return 'must not have a fragment';
  if (url.username !== '' || url.password !== '') return 'must not hold a user name or password (user:password@)';
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK.has(url.hostname)))
    return 'must use https (http only on localhost, 127.0.0.1 or [::1])';
  if (url.href !== uri) return `is not in canonical form; write it as ${url.href}`;
  return undefined;
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
