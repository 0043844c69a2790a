import type { Selectable } from 'kysely';
import type { OAuthClientsTable } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export type OAuthClientRow = Selectable<OAuthClientsTable>;

export async function insertClient(db: Executor, row: Omit<OAuthClientRow, 'id'>): Promise<OAuthClientRow> {
  return db.insertInto('oauth_clients').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function listClients(db: Executor, accountId: number): Promise<OAuthClientRow[]> {
  return db.selectFrom('oauth_clients').selectAll().where('account_id', '=', accountId).orderBy('id').execute();
}

export async function findClient(db: Executor, accountId: number, id: number): Promise<OAuthClientRow | undefined> {
  return db
    .selectFrom('oauth_clients')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

export async function updateClient(
  db: Executor,
  accountId: number,
  id: number,
  set: Partial<Pick<OAuthClientRow, 'name' | 'redirect_uris' | 'require_pkce'>>,
): Promise<OAuthClientRow | undefined> {
  return db
    .updateTable('oauth_clients')
    .set(set)
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirst();
}

/** By its public client_id, whatever the account: the OAuth endpoints know no account yet. */
export async function findClientByClientId(db: Executor, clientId: string): Promise<OAuthClientRow | undefined> {
  return db.selectFrom('oauth_clients').selectAll().where('client_id', '=', clientId).executeTakeFirst();
}

/** Removes the client; its grants and every token issued to it go with it (foreign keys cascade). */
export async function deleteClient(db: Executor, accountId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('oauth_clients')
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}
