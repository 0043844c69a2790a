import {
  InvalidGrantError,
  type AuthorizationCode,
  type AuthorizationCodeModel,
  type Client,
  type RefreshToken,
  type RefreshTokenModel,
  type Token,
  type User,
} from '@node-oauth/oauth2-server';
import { timingSafeEqual } from 'node:crypto';
import type { Clock } from '../../clock.js';
import { hashToken, newToken } from '../../crypto/secrets.js';
import type { Executor } from '../../db/transaction.js';
import { SCOPES, type Scope } from '../../http/access.js';
import { findClientByClientId } from '../oauth-clients/repository.js';
import * as repo from './repository.js';

export const GRANT_TYPES = ['authorization_code', 'refresh_token'];

export const ACCESS_TOKEN_PREFIX = 'fw_at_';
export const REFRESH_TOKEN_PREFIX = 'fw_rt_';
export const CODE_PREFIX = 'fw_ac_';
export const ACCESS_TOKEN_SECONDS = 3600;
export const REFRESH_TOKEN_SECONDS = 30 * 86_400;
export const CODE_SECONDS = 600;

/** What the library carries between the model's calls as the "user": whom and under which grant. */
export interface GrantUser extends User {
  id: number;
  accountId: number;
  grantId: number;
}

export interface FormworkClient extends Client {
  /** The public client_id. */
  id: string;
  dbId: number;
  name: string;
  accountId: number;
  redirectUris: string[];
  /** Every authorization request must carry a PKCE S256 challenge. */
  requirePkce: boolean;
}

export function isScope(s: string): s is Scope {
  return (SCOPES as readonly string[]).includes(s);
}

const sameSecret = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/**
 * The storage side of @node-oauth/oauth2-server's authorization_code and refresh_token
 * grants. Codes and tokens are kept only as SHA-256 hashes. A replayed code or refresh
 * token revokes its whole grant; that revocation must outlive the failed request's
 * transaction, so it is queued in `afterFailure` and run by the caller on its own.
 *
 * The library computes expiry dates and checks them against the system clock, so the
 * expiry Dates that pass between it and the model are on the system clock, and the database
 * holds them on the service clock (clock.toSystem / clock.fromSystem): a code or token is
 * expired for the library exactly when it is for everything else that reads ctx.clock.
 */
export function createModel(
  db: Executor,
  clock: Clock,
  afterFailure: ((db: Executor) => Promise<void>)[],
): AuthorizationCodeModel & RefreshTokenModel {
  const revokeLater = (grantId: number) => afterFailure.push((later) => repo.revokeGrant(later, grantId, clock.now()));
  const stored = (date: Date) => clock.fromSystem(date.getTime());
  const given = (ms: number | string) => new Date(clock.toSystem(Number(ms)));

  async function clientById(dbId: number): Promise<FormworkClient | undefined> {
    const row = await db.selectFrom('oauth_clients').selectAll().where('id', '=', dbId).executeTakeFirst();
    return row ? toClient(row) : undefined;
  }

  return {
    // Every client is confidential: the token endpoint always wants its secret, PKCE or not.
    async getClient(clientId: string, clientSecret: string | null | undefined) {
      if (!clientSecret) return undefined;
      const row = await findClientByClientId(db, clientId);
      if (!row || !sameSecret(row.secret_hash, hashToken(clientSecret))) return undefined;
      return toClient(row);
    },

    generateAccessToken: async () => newToken(ACCESS_TOKEN_PREFIX),
    generateRefreshToken: async () => newToken(REFRESH_TOKEN_PREFIX),
    generateAuthorizationCode: async () => newToken(CODE_PREFIX),

    async validateScope(_user: User, _client: Client, scope?: string[]) {
      if (!scope || scope.length === 0 || !scope.every(isScope)) return false;
      return [...new Set(scope)];
    },

    async saveAuthorizationCode(code, client, user) {
      const c = client as FormworkClient;
      const u = user as GrantUser;
      await repo.insertCode(db, {
        code_hash: hashToken(code.authorizationCode),
        grant_id: u.grantId,
        redirect_uri: code.redirectUri,
        scope: (code.scope ?? []).join(' '),
        code_challenge: code.codeChallenge ?? null,
        code_challenge_method: code.codeChallengeMethod ?? null,
        expires_at: stored(code.expiresAt),
      });
      return { ...code, client: c, user: u };
    },

    async getAuthorizationCode(authorizationCode: string): Promise<AuthorizationCode | undefined> {
      const row = await repo.findCode(db, hashToken(authorizationCode));
      if (!row || row.grantRevokedAt !== null) return undefined;
      // RFC 6749 4.1.2: a code used twice is an attack on the first exchange; end what it issued.
      if (row.usedAt !== null) {
        revokeLater(row.grantId);
        return undefined;
      }
      const client = await clientById(row.clientId);
      if (!client) return undefined;
      // A code issued before the client came to require PKCE would let its exchange skip it.
      if (client.requirePkce && row.codeChallenge === null) {
        throw new InvalidGrantError(
          'Invalid grant: this client must use PKCE, and the code was issued without a code_challenge',
        );
      }
      return {
        authorizationCode,
        id: row.id,
        expiresAt: given(row.expiresAt),
        redirectUri: row.redirectUri,
        scope: row.scope.split(' '),
        codeChallenge: row.codeChallenge ?? undefined,
        codeChallengeMethod: row.codeChallengeMethod ?? undefined,
        client,
        user: { id: row.userId, accountId: row.accountId, grantId: row.grantId } satisfies GrantUser,
      };
    },

    async revokeAuthorizationCode(code: AuthorizationCode) {
      const now = clock.now();
      const used = await repo.useCode(db, code.id as number, now);
      if (!used) revokeLater((code.user as GrantUser).grantId);
      // The library consumes the code before checking the PKCE verifier and redirect URI, so a
      // failed check cannot be retried with other guesses; keep it consumed when the request fails.
      else afterFailure.push(async (later) => void (await repo.useCode(later, code.id as number, now)));
      return used;
    },

    async saveToken(token: Token, client: Client, user: User) {
      const c = client as FormworkClient;
      const u = user as GrantUser;
      const now = clock.now();
      const scope = (token.scope ?? []).join(' ');
      await repo.insertAccessToken(
        db,
        {
          accountId: u.accountId,
          userId: u.id,
          hash: hashToken(token.accessToken),
          clientId: c.dbId,
          clientName: c.name,
          grantId: u.grantId,
          scope,
          expiresAt: stored(token.accessTokenExpiresAt!),
        },
        now,
      );
      if (token.refreshToken) {
        await repo.insertRefreshToken(db, {
          token_hash: hashToken(token.refreshToken),
          grant_id: u.grantId,
          scope,
          created_at: now,
          expires_at: stored(token.refreshTokenExpiresAt!),
        });
      }
      return {
        accessToken: token.accessToken,
        // The library derives expires_in by flooring the time left, which says 3599 for a fresh
        // hour; half a second of slack makes it the 3600 clients expect. The stored expiry is exact.
        accessTokenExpiresAt: new Date(token.accessTokenExpiresAt!.getTime() + 500),
        refreshToken: token.refreshToken,
        refreshTokenExpiresAt: token.refreshTokenExpiresAt,
        scope: token.scope,
        client: c,
        user: u,
        // Extended attribute: the token response names the user it acts for.
        user_id: u.id,
      };
    },

    async getRefreshToken(refreshToken: string): Promise<RefreshToken | undefined> {
      const row = await repo.findRefreshToken(db, hashToken(refreshToken));
      if (!row || row.revokedAt !== null || row.grantRevokedAt !== null) return undefined;
      // RFC 9700 4.14.2: an exchanged refresh token coming back means one of two holders is a thief.
      if (row.rotatedAt !== null) {
        revokeLater(row.grantId);
        return undefined;
      }
      const client = await clientById(row.clientId);
      if (!client) return undefined;
      return {
        refreshToken,
        id: row.id,
        refreshTokenExpiresAt: given(row.expiresAt),
        scope: row.scope.split(' '),
        client,
        user: { id: row.userId, accountId: row.accountId, grantId: row.grantId } satisfies GrantUser,
      };
    },

    async revokeToken(token: RefreshToken) {
      const rotated = await repo.rotateRefreshToken(db, token.id as number, clock.now());
      if (!rotated) revokeLater((token.user as GrantUser).grantId);
      return rotated;
    },

    // Bearer tokens of API calls are checked by src/http/auth.ts; the library's authenticate() is not used.
    async getAccessToken() {
      return undefined;
    },
  };
}

export function toClient(row: {
  id: number;
  client_id: string;
  name: string;
  account_id: number;
  redirect_uris: string;
  require_pkce: number;
}): FormworkClient {
  return {
    id: row.client_id,
    dbId: row.id,
    name: row.name,
    accountId: row.account_id,
    redirectUris: JSON.parse(row.redirect_uris) as string[],
    requirePkce: row.require_pkce === 1,
    grants: GRANT_TYPES,
  };
}
