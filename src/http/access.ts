import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Executor } from '../db/transaction.js';
import { ForbiddenError } from '../errors.js';
import { isAdminRole, LEVEL_MEANINGS, levelAtLeast, type Level } from '../modules/permissions/levels.js';
import {
  formOfEmail,
  formOfField,
  formOfPartial,
  formOfSubmission,
  formOfWebhook,
  levelOnForm,
} from '../modules/permissions/repository.js';
import { principal } from './auth.js';
import type { TokenOwner } from '../modules/accounts/repository.js';
import { ErrorBody } from './schemas.js';
import { Type } from '@sinclair/typebox';

export const SCOPES = ['forms:read', 'forms:write', 'submissions:read', 'submissions:write', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

export const SCOPE_MEANINGS: Record<Scope, string> = {
  'forms:read': 'read forms, fields and folders',
  'forms:write': 'create, change and delete forms, fields and folders',
  'submissions:read': 'read, search and export submissions',
  'submissions:write': 'create, edit and delete submissions',
  // Said plainly on the consent page: a new admin user or client reaches every other scope.
  admin: 'manage users, their passwords and form permissions, and OAuth clients: everything in the account',
};

/**
 * What a route needs, declared next to it and checked before its handler: a token scope;
 * optionally the owner or admin role; optionally, for members, a level on the form the
 * request addresses (by its formId, or by the form of its submissionId, webhookId,
 * confirmationId, notificationId or partialSubmissionId).
 */
export interface RouteAccess {
  scope: Scope;
  role?: 'admin';
  level?: Level;
  formFrom?:
    'formId' | 'fieldId' | 'submissionId' | 'webhookId' | 'confirmationId' | 'notificationId' | 'partialSubmissionId';
}

/** How the form of a request is found from the path parameter that formFrom names, when it is not formId. */
const FORM_OF: Record<Exclude<NonNullable<RouteAccess['formFrom']>, 'formId'>, FormLookup> = {
  fieldId: formOfField,
  submissionId: formOfSubmission,
  webhookId: formOfWebhook,
  confirmationId: (db, accountId, id) => formOfEmail(db, accountId, 'confirmation', id),
  notificationId: (db, accountId, id) => formOfEmail(db, accountId, 'notification', id),
  partialSubmissionId: formOfPartial,
};
type FormLookup = (db: Executor, accountId: number, id: number) => Promise<number | undefined>;

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: RouteAccess;
  }
}

function describe(access: RouteAccess): string {
  const parts = [`Needs the \`${access.scope}\` scope.`];
  if (access.role) parts.push('Only the account owner and admins may call it.');
  if (access.level)
    parts.push(`Members need the \`${access.level}\` level on the form (${LEVEL_MEANINGS[access.level]}).`);
  return parts.join(' ');
}

/**
 * Every route of the scope must declare its access; a route without one stops the server at
 * start, so no route can be added unchecked. The declaration also goes into the OpenAPI
 * document (security scopes, the x-formwork-access extension and the description), which is
 * where the permission matrix test reads it from.
 */
export function requireAccessRules(scope: FastifyInstance, db: Kysely<Database>): void {
  scope.addHook('onRoute', (route) => {
    const access = route.config?.access;
    if (!access) throw new Error(`${String(route.method)} ${route.url} declares no access rule (config.access)`);
    if (access.level && !access.formFrom)
      throw new Error(`${String(route.method)} ${route.url}: a level needs formFrom`);
    if (route.schema) {
      const schema = route.schema as Record<string, unknown> & {
        response?: Record<number, unknown>;
        description?: string;
      };
      schema.security = [{ bearer: [] }, { oauth2: [access.scope] }];
      schema['x-formwork-access'] = access;
      // The HEAD route Fastify adds for a GET shares its schema: the sentence goes in once.
      const rule = describe(access);
      if (!schema.description?.endsWith(rule))
        schema.description = schema.description ? `${schema.description}\n\n${rule}` : rule;
      if (schema.response && !schema.response[403]) {
        schema.response[403] = Type.Ref(ErrorBody, {
          description: 'The token lacks the scope, or the user the role or form level',
        });
      }
    }
  });

  // A callback hook: most calls are decided by the token's scopes and the user's role alone,
  // without a promise; a member's level on a form is read from the database.
  scope.addHook('preHandler', (request, _reply, done) => {
    const access = request.routeOptions.config.access;
    if (!access) return done();
    let reading: Promise<void> | undefined;
    try {
      reading = check(db, request, access);
    } catch (error) {
      return done(error as Error);
    }
    if (!reading) return done();
    reading.then(() => done(), done);
  });
}

/**
 * What the token's scopes and the user's role say about a call: a refusal, 'allowed', or
 * 'level' when the member's level on the form the call addresses decides (a database read).
 */
export function accessByRole(who: TokenOwner, access: RouteAccess): ForbiddenError | 'allowed' | 'level' {
  if (who.scopes !== null && !who.scopes.includes(access.scope)) {
    return new ForbiddenError('insufficient_scope', `This token was not granted the ${access.scope} scope`);
  }
  if (isAdminRole(who.role)) return 'allowed';
  if (access.role === 'admin') return new ForbiddenError('admin_required');
  return access.level && access.formFrom ? 'level' : 'allowed';
}

/** Throws a refusal, or answers undefined (allowed) or the read of the member's level that decides. */
function check(db: Kysely<Database>, request: FastifyRequest, access: RouteAccess): Promise<void> | undefined {
  const who = principal(request);
  const byRole = accessByRole(who, access);
  if (byRole instanceof ForbiddenError) throw byRole;
  if (byRole === 'allowed' || !access.level || !access.formFrom) return undefined;

  const params = request.params as Record<string, number | undefined>;
  const id = params[access.formFrom];
  if (id === undefined) return undefined;
  return checkLevel(db, who, access.level, access.formFrom, id);
}

async function checkLevel(
  db: Kysely<Database>,
  who: TokenOwner,
  level: Level,
  formFrom: NonNullable<RouteAccess['formFrom']>,
  id: number,
): Promise<void> {
  const formId = formFrom === 'formId' ? id : await FORM_OF[formFrom](db, who.accountId, id);
  // Not in the account: the handler answers 404, exactly as it does for anyone else.
  if (formId === undefined) return;
  await requireFormLevel(db, who.accountId, who.userId, formId, level);
}

/**
 * A member's level on a form of the account, checked: 403 below the needed level. A form
 * outside the account passes, as the caller answers 404 for it as for anyone. For services
 * that reach a second form besides the one the route addresses (a copy's template).
 */
export async function requireFormLevel(
  db: Executor,
  accountId: number,
  userId: number,
  formId: number,
  level: Level,
): Promise<void> {
  const held = await levelOnForm(db, accountId, userId, formId);
  if (held === undefined) return;
  if (held === null) throw new ForbiddenError('form_permission_required', 'You have no permission on this form');
  if (!levelAtLeast(held, level)) {
    throw new ForbiddenError('form_permission_required', `This needs the ${level} level on the form; you hold ${held}`);
  }
}
