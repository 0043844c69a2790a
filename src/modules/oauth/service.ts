import OAuth2Server, {
  InvalidRequestError,
  OAuthError,
  Request as OAuthRequest,
  Response as OAuthResponse,
  ServerError,
  UnsupportedGrantTypeError,
} from '@node-oauth/oauth2-server';
import type { Kysely } from 'kysely';
import type { AppContext } from '../../context.js';
import { hashToken, newToken } from '../../crypto/secrets.js';
import type { Database } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { SCOPES, type Scope } from '../../http/access.js';
import { revokeToken } from '../accounts/repository.js';
import { findClientByClientId } from '../oauth-clients/repository.js';
import {
  ACCESS_TOKEN_SECONDS,
  CODE_PREFIX,
  CODE_SECONDS,
  createModel,
  GRANT_TYPES,
  isScope,
  REFRESH_TOKEN_SECONDS,
  toClient,
  type FormworkClient,
} from './model.js';
import * as repo from './repository.js';

/** Scopes granted when an authorization request names none: reading only. */
export const DEFAULT_SCOPES: Scope[] = ['forms:read', 'submissions:read'];

export const AUTHORIZE_PARAMS = [
  'client_id',
  'redirect_uri',
  'response_type',
  'state',
  'scope',
  'code_challenge',
  'code_challenge_method',
] as const;
export type AuthorizeParams = Partial<Record<(typeof AUTHORIZE_PARAMS)[number], string>>;

// RFC 7636 4.1 and 4.2: 43 to 128 unreserved characters; S256 gives exactly 43 base64url ones.
const CODE_CHALLENGE = /^[A-Za-z0-9._~-]{43,128}$/;

export type CheckedAuthorization =
  /** Who the client is or where to send the user cannot be trusted: show a page, never redirect. */
  | { kind: 'page'; message: string }
  /** The client and redirect URI are good but the request is not: tell the client at its redirect URI. */
  | { kind: 'redirect'; location: string }
  | { kind: 'ok'; client: FormworkClient; params: AuthorizeParams; scopes: Scope[] };

/** The client's redirect URI with the response parameters added to its own query. */
export function redirectTo(redirectUri: string, values: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(values)) if (v !== undefined) url.searchParams.set(k, v);
  return url.toString();
}

/** The parameters of an authorization request (query or form), each at most once. */
export function authorizeParams(source: Record<string, unknown>): { params: AuthorizeParams; repeated: string[] } {
  const params: AuthorizeParams = {};
  const repeated: string[] = [];
  for (const name of AUTHORIZE_PARAMS) {
    const value = source[name];
    if (Array.isArray(value)) repeated.push(name);
    else if (typeof value === 'string' && value !== '') params[name] = value;
  }
  return { params, repeated };
}

/** RFC 6749 4.1.1 and 4.1.2.1, RFC 7636 4.3: what an authorization request may be answered with. */
export async function checkAuthorization(
  db: Kysely<Database>,
  source: Record<string, unknown>,
  issuer: string,
): Promise<CheckedAuthorization> {
  const { params, repeated } = authorizeParams(source);
  if (repeated.includes('client_id') || repeated.includes('redirect_uri'))
    return { kind: 'page', message: 'client_id and redirect_uri may each be given only once.' };
  if (!params.client_id) return { kind: 'page', message: 'The request names no client_id.' };
  const row = await findClientByClientId(db, params.client_id);
  if (!row) return { kind: 'page', message: 'No application is registered with this client_id.' };
  const client = toClient(row);
  if (!params.redirect_uri) return { kind: 'page', message: 'The request names no redirect_uri.' };
  if (!client.redirectUris.includes(params.redirect_uri)) {
    return {
      kind: 'page',
      message: 'The redirect_uri is not one this application registered (it must match exactly).',
    };
  }

  const fail = (error: string, description: string): CheckedAuthorization => ({
    kind: 'redirect',
    location: redirectTo(params.redirect_uri!, {
      error,
      error_description: description,
      state: params.state,
      iss: issuer,
    }),
  });
  if (repeated.length > 0) return fail('invalid_request', `Parameters given more than once: ${repeated.join(', ')}`);
  if (params.response_type !== 'code') return fail('unsupported_response_type', 'Only response_type=code is supported');
  const requested = params.scope === undefined ? DEFAULT_SCOPES : params.scope.split(' ').filter((s) => s !== '');
  const unknown = requested.filter((s) => !isScope(s));
  if (requested.length === 0 || unknown.length > 0)
    return fail('invalid_scope', `Unknown scope: ${unknown.join(' ') || '(empty)'}`);
  if (params.code_challenge !== undefined || params.code_challenge_method !== undefined) {
    if (params.code_challenge_method !== 'S256') return fail('invalid_request', 'code_challenge_method must be S256');
    if (params.code_challenge === undefined || !CODE_CHALLENGE.test(params.code_challenge)) {
      return fail('invalid_request', 'code_challenge must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~');
    }
  } else if (client.requirePkce) {
    return fail(
      'invalid_request',
      'This application must use PKCE: send code_challenge with code_challenge_method=S256',
    );
  }
  return { kind: 'ok', client, params, scopes: [...new Set(requested as Scope[])] };
}

/** On consent: a new grant and its code, and the URL that takes the code back to the client. */
export async function issueCode(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  checked: { client: FormworkClient; params: AuthorizeParams; scopes: Scope[] },
  user: { id: number; accountId: number },
  issuer: string,
): Promise<string> {
  const code = newToken(CODE_PREFIX);
  await transact(ctx.db, async (trx) => {
    const now = ctx.clock.now();
    const grantId = await repo.insertGrant(
      trx,
      { clientId: checked.client.dbId, userId: user.id, accountId: user.accountId, scope: checked.scopes.join(' ') },
      now,
    );
    await createModel(trx, ctx.clock, []).saveAuthorizationCode(
      {
        authorizationCode: code,
        // On the system clock, as the library's dates are (see createModel).
        expiresAt: new Date(ctx.clock.toSystem(now + CODE_SECONDS * 1000)),
        redirectUri: checked.params.redirect_uri!,
        scope: checked.scopes,
        codeChallenge: checked.params.code_challenge,
        codeChallengeMethod: checked.params.code_challenge_method,
      },
      checked.client,
      { id: user.id, accountId: user.accountId, grantId },
    );
  });
  return redirectTo(checked.params.redirect_uri!, { code, state: checked.params.state, iss: issuer });
}

export interface OAuthReply {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

function errorReply(error: OAuthError, headers: Record<string, string> = {}): OAuthReply {
  let name = error.name;
  // RFC 6749 5.2 names a redirect_uri that differs from the authorization request's invalid_grant.
  if (name === 'invalid_request' && /redirect_uri/.test(error.message)) name = 'invalid_grant';
  return {
    status: error.code,
    headers: { ...headers, 'cache-control': 'no-store' },
    body: { error: name, error_description: error.message },
  };
}

/**
 * The token endpoint, through @node-oauth/oauth2-server, in one transaction. Revocations
 * that a replayed code or refresh token calls for are run after the failed transaction.
 */
export async function exchangeToken(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  request: { headers: Record<string, string>; body: Record<string, unknown> },
): Promise<OAuthReply> {
  // RFC 6749 3.2: a parameter is sent at most once. The body's parser makes a repeated one an
  // array, which the library would pass on to the model as it is.
  const repeated = Object.keys(request.body).filter((name) => Array.isArray(request.body[name]));
  if (repeated.length > 0)
    return errorReply(
      new InvalidRequestError(
        `Parameters given more than once: ${repeated
          .slice(0, 5)
          .map((name) => name.slice(0, 60))
          .join(', ')}`,
      ),
    );
  const grantType = request.body.grant_type;
  // The library knows more grants than a client here may use; those are unsupported, not unauthorized.
  if (typeof grantType === 'string' && !GRANT_TYPES.includes(grantType)) {
    return errorReply(new UnsupportedGrantTypeError(`Unsupported grant type: ${grantType.slice(0, 60)}`));
  }
  const afterFailure: ((db: Executor) => Promise<void>)[] = [];
  const response = new OAuthResponse();
  try {
    await transact(ctx.db, async (trx) => {
      const server = new OAuth2Server({ model: createModel(trx, ctx.clock, afterFailure) });
      await server.token(
        new OAuthRequest({ method: 'POST', headers: request.headers, query: {}, body: request.body }),
        response,
        {
          accessTokenLifetime: ACCESS_TOKEN_SECONDS,
          refreshTokenLifetime: REFRESH_TOKEN_SECONDS,
          allowExtendedTokenAttributes: true,
          alwaysIssueNewRefreshToken: true,
          requireClientAuthentication: { authorization_code: true, refresh_token: true },
        },
      );
    });
  } catch (error) {
    if (afterFailure.length > 0)
      await transact(ctx.db, async (trx) => {
        for (const run of afterFailure) await run(trx);
      });
    // The library wraps what failed inside (the model, the database) as its server_error, with
    // the cause's message: that goes to the error handler, logged and answered without it.
    if (error instanceof ServerError) throw (error as ServerError & { inner?: unknown }).inner ?? error;
    if (error instanceof OAuthError) return errorReply(error, response.headers);
    throw error;
  }
  return {
    status: 200,
    headers: { ...response.headers, 'cache-control': 'no-store', pragma: 'no-cache' },
    body: response.body as Record<string, unknown>,
  };
}

/** RFC 6749 2.3.1: credentials from HTTP Basic (form-encoded, then base64) or the body. */
export function clientCredentials(
  authorization: string | undefined,
  body: Record<string, unknown>,
): { id: string; secret: string } | undefined {
  if (authorization?.startsWith('Basic ')) {
    const decoded = Buffer.from(authorization.slice(6), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon === -1) return undefined;
    try {
      return { id: decodeURIComponent(decoded.slice(0, colon)), secret: decodeURIComponent(decoded.slice(colon + 1)) };
    } catch {
      return undefined;
    }
  }
  if (typeof body.client_id === 'string' && typeof body.client_secret === 'string')
    return { id: body.client_id, secret: body.client_secret };
  return undefined;
}

export async function authenticateClient(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  authorization: string | undefined,
  body: Record<string, unknown>,
): Promise<FormworkClient | undefined> {
  const credentials = clientCredentials(authorization, body);
  if (!credentials) return undefined;
  return (await createModel(ctx.db, ctx.clock, []).getClient(credentials.id, credentials.secret)) as
    FormworkClient | undefined;
}

/**
 * RFC 7009: the client's own access or refresh token stops working; a refresh token ends its
 * whole grant. A personal access token of the client's account stops working too: it was
 * issued to no client, and a client of the account that comes across one (in a log, a
 * leaked file) should be able to end it where standard tooling looks. Unknown tokens and
 * other clients' or accounts' tokens are answered the same way (nothing happens).
 */
export async function revoke(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  client: FormworkClient,
  token: string,
): Promise<void> {
  const hash = hashToken(token);
  await transact(ctx.db, async (trx) => {
    const now = ctx.clock.now();
    const refresh = await repo.findRefreshToken(trx, hash);
    if (refresh && refresh.clientId === client.dbId) return repo.revokeGrant(trx, refresh.grantId, now);
    const access = await repo.findAccessToken(trx, hash);
    if (!access) return;
    const personal = access.clientId === null && access.accountId === client.accountId;
    if (access.clientId === client.dbId || personal) await revokeToken(trx, access.id, now);
  });
}

/** RFC 7662: the state of a token issued to this client; anything else is simply inactive. */
export async function introspect(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  client: FormworkClient,
  token: string,
  issuer: string,
): Promise<Record<string, unknown>> {
  const { db } = ctx;
  const hash = hashToken(token);
  const now = ctx.clock.now();
  const seconds = (ms: number | string) => Math.floor(Number(ms) / 1000);
  const access = await repo.findAccessToken(db, hash);
  if (
    access &&
    access.clientId === client.dbId &&
    access.revokedAt === null &&
    access.expiresAt !== null &&
    Number(access.expiresAt) > now
  ) {
    return {
      active: true,
      token_type: 'access_token',
      scope: access.scope ?? '',
      client_id: client.id,
      username: access.email,
      sub: String(access.userId),
      iat: seconds(access.createdAt),
      exp: seconds(access.expiresAt),
      iss: issuer,
    };
  }
  const refresh = await repo.findRefreshToken(db, hash);
  if (
    refresh &&
    refresh.clientId === client.dbId &&
    refresh.revokedAt === null &&
    refresh.rotatedAt === null &&
    refresh.grantRevokedAt === null &&
    Number(refresh.expiresAt) > now
  ) {
    return {
      active: true,
      token_type: 'refresh_token',
      scope: refresh.scope,
      client_id: client.id,
      username: await repo.userEmail(db, refresh.userId),
      sub: String(refresh.userId),
      iat: seconds(refresh.createdAt),
      exp: seconds(refresh.expiresAt),
      iss: issuer,
    };
  }
  return { active: false };
}

export function metadata(ctx: AppContext): Record<string, unknown> {
  const base = ctx.config.publicUrl;
  const clientAuth = ['client_secret_basic', 'client_secret_post'];
  return {
    issuer: base,
    authorization_endpoint: `${base}/oauth2/authorize`,
    token_endpoint: `${base}/oauth2/token`,
    revocation_endpoint: `${base}/oauth2/revoke`,
    introspection_endpoint: `${base}/oauth2/introspect`,
    scopes_supported: SCOPES,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: GRANT_TYPES,
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: clientAuth,
    revocation_endpoint_auth_methods_supported: clientAuth,
    introspection_endpoint_auth_methods_supported: clientAuth,
    authorization_response_iss_parameter_supported: true,
    service_documentation: `${base}/docs`,
  };
}
