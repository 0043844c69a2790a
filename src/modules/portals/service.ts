import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { AppContext } from '../../context.js';
import { newKey } from '../../crypto/secrets.js';
import type { PortalRow, PortalUserRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { invalid, NotFoundError } from '../../errors.js';
import { FIRST_ISO_INSTANT, isoTime, LAST_ISO_INSTANT, page, type Page } from '../../http/schemas.js';
import { enqueue } from '../../jobs/outbox.js';
import * as formsRepo from '../forms/repository.js';
import { imageVersion } from '../images/serve.js';
import { requireImageType } from '../images/type.js';
import type { AccountScope, PortalFormRef, PortalRef, PortalUserRef } from '../permissions/caller.js';
import { removeFilesJob } from '../uploads/jobs.js';
import * as repo from './repository.js';
import type {
  Portal,
  PortalCreate,
  PortalDetails,
  PortalForm,
  PortalFormCreate,
  PortalFormUpdate,
  PortalQuery,
  PortalUpdate,
  PortalUser,
  PortalUserCreate,
  PortalUserUpdate,
} from './schemas.js';

type Ctx = Pick<AppContext, 'db' | 'clock' | 'config' | 'storage'>;

export const emailKey = (email: string): string => email.trim().toLowerCase();

function toPortal(ctx: Ctx, row: PortalRow, counts: { forms: number; users: number }): Portal {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    url: `${ctx.config.publicUrl}/p/${row.portal_key}`,
    avatar:
      row.avatar_key === null
        ? null
        : {
            contentType: row.avatar_type ?? '',
            size: row.avatar_size ?? 0,
            url: `${ctx.config.publicUrl}/p/${row.portal_key}/avatar?v=${imageVersion(row.avatar_key)}`,
          },
    formsCount: counts.forms,
    usersCount: counts.users,
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

function toPortalForm(ctx: Ctx, row: repo.PortalFormWithForm): PortalForm {
  return {
    portalId: row.portal_id,
    formId: row.form_id,
    name: row.name,
    url: `${ctx.config.publicUrl}/f/${row.view_key}`,
    dueDate: row.due_at === null ? null : isoTime(Number(row.due_at)),
    required: row.required === 1,
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

function toPortalUser(row: PortalUserRow): PortalUser {
  return {
    id: row.id,
    portalId: row.portal_id,
    email: row.email,
    name: row.name,
    lastSignIn: row.last_sign_in_at === null ? null : isoTime(Number(row.last_sign_in_at)),
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

/** One of the account's portals, or 404: another account's answers the same as none. */
async function requirePortal(db: Executor, { accountId }: AccountScope, portalId: number): Promise<PortalRow> {
  const portal = await repo.findPortal(db, accountId, portalId);
  if (!portal) throw new NotFoundError('portal_not_found');
  return portal;
}

async function details(ctx: Ctx, db: Executor, row: PortalRow): Promise<PortalDetails> {
  const [forms, users] = await Promise.all([repo.portalForms(db, row.id), repo.portalUsers(db, row.id)]);
  return {
    ...toPortal(ctx, row, { forms: forms.length, users: users.length }),
    forms: forms.map((f) => toPortalForm(ctx, f)),
    users: users.map(toPortalUser),
  };
}

/** ISO 8601 in, epoch ms out; null stays null, undefined means unchanged. */
function dueAt(value: string | null | undefined): number | null | undefined {
  if (value === undefined || value === null) return value;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw invalid('validation_failed', 'body.dueDate', 'must be an ISO 8601 date and time');
  if (ms < FIRST_ISO_INSTANT || ms > LAST_ISO_INSTANT)
    throw invalid('validation_failed', 'body.dueDate', 'must be between the years 0000 and 9999 in UTC');
  return ms;
}

export async function listPortals(
  ctx: Ctx,
  { accountId }: AccountScope,
  query: PortalQuery,
): Promise<Page & { portals: Portal[] }> {
  const { rows, total } = await repo.listPortals(
    ctx.db,
    accountId,
    query.pageSize,
    (query.pageNumber - 1) * query.pageSize,
  );
  const counts = await repo.countsOf(
    ctx.db,
    rows.map((r) => r.id),
  );
  return {
    portals: rows.map((r) => toPortal(ctx, r, counts.get(r.id)!)),
    ...page(total, query.pageNumber, query.pageSize),
  };
}

export async function getPortal(ctx: Ctx, scope: AccountScope, { portalId }: PortalRef): Promise<PortalDetails> {
  return details(ctx, ctx.db, await requirePortal(ctx.db, scope, portalId));
}

export async function createPortal(ctx: Ctx, { accountId }: AccountScope, input: PortalCreate): Promise<PortalDetails> {
  return transact(ctx.db, async (trx) => {
    const now = ctx.clock.now();
    const row = await repo.insertPortal(trx, {
      account_id: accountId,
      name: input.name,
      description: input.description ?? null,
      portal_key: newKey(16),
      avatar_key: null,
      avatar_type: null,
      avatar_size: null,
      created_at: now,
      updated_at: now,
    });
    return details(ctx, trx, row);
  });
}

export async function updatePortal(
  ctx: Ctx,
  scope: AccountScope,
  { portalId }: PortalRef,
  input: PortalUpdate,
): Promise<PortalDetails> {
  return transact(ctx.db, async (trx) => {
    await requirePortal(trx, scope, portalId);
    const row = await repo.updatePortal(
      trx,
      portalId,
      { name: input.name, description: input.description },
      ctx.clock.now(),
    );
    return details(ctx, trx, row);
  });
}

export async function deletePortal(ctx: Ctx, scope: AccountScope, { portalId }: PortalRef): Promise<{ id: number }> {
  return transact(ctx.db, async (trx) => {
    const portal = await requirePortal(trx, scope, portalId);
    // The avatar's file goes once the delete commits.
    if (portal.avatar_key !== null) await enqueue(trx, removeFilesJob, { keys: [portal.avatar_key] });
    await repo.deletePortal(trx, portalId);
    return { id: portalId };
  });
}

const avatarKeyOf = (accountId: number, portalId: number) =>
  `portals/${accountId}/${portalId}-${randomBytes(12).toString('hex')}`;

async function readStored(ctx: Ctx, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of (await ctx.storage.get(key)).stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * A copy of the portal: its name (with " (copy)"), description, avatar (a copy of the file) and
 * forms with their due dates and flags. Its users are not copied: a copy is for another set of
 * people, who are added to it (and sign in to it) on their own.
 */
export async function copyPortal(ctx: Ctx, scope: AccountScope, { portalId }: PortalRef): Promise<PortalDetails> {
  const source = await requirePortal(ctx.db, scope, portalId);
  let avatarKey: string | null = null;
  if (source.avatar_key !== null) {
    avatarKey = avatarKeyOf(scope.accountId, portalId);
    const bytes = await readStored(ctx, source.avatar_key);
    await ctx.storage.put(avatarKey, Readable.from([bytes]), {
      maxBytes: bytes.length + 1,
      contentType: source.avatar_type ?? undefined,
    });
  }
  try {
    return await transact(ctx.db, async (trx) => {
      const current = await requirePortal(trx, scope, portalId);
      const now = ctx.clock.now();
      const suffix = ' (copy)';
      const row = await repo.insertPortal(trx, {
        account_id: scope.accountId,
        name: current.name.length + suffix.length <= 200 ? `${current.name}${suffix}` : current.name,
        description: current.description,
        portal_key: newKey(16),
        avatar_key: avatarKey,
        avatar_type: avatarKey === null ? null : current.avatar_type,
        avatar_size: avatarKey === null ? null : current.avatar_size,
        created_at: now,
        updated_at: now,
      });
      const forms = await repo.portalForms(trx, portalId);
      await repo.insertPortalForms(
        trx,
        forms.map((f) => ({
          portal_id: row.id,
          form_id: f.form_id,
          account_id: scope.accountId,
          due_at: f.due_at,
          required: f.required,
          created_at: f.created_at,
          updated_at: now,
        })),
      );
      return details(ctx, trx, row);
    });
  } catch (error) {
    if (avatarKey !== null) await ctx.storage.deleteMany([avatarKey]).catch(() => undefined);
    throw error;
  }
}

/**
 * Sets or (with null from read) removes the avatar. The portal is checked before the body is
 * read, so that another account's id answers 404 whatever the body holds; the bytes are stored
 * under a new key first, and the row points at them in one transaction, which queues the
 * removal of the file they replace.
 */
export async function setAvatar(
  ctx: Ctx,
  scope: AccountScope,
  ref: PortalRef,
  read: () => Promise<Buffer | null>,
): Promise<PortalDetails> {
  await requirePortal(ctx.db, scope, ref.portalId);
  const bytes = await read();
  if (bytes === null) return removeAvatar(ctx, scope, ref).then(() => getPortal(ctx, scope, ref));
  const type = requireImageType(bytes);
  const key = avatarKeyOf(scope.accountId, ref.portalId);
  await ctx.storage.put(key, Readable.from([bytes]), { maxBytes: ctx.config.optionImageMaxBytes, contentType: type });
  try {
    return await transact(ctx.db, async (trx) => {
      const portal = await requirePortal(trx, scope, ref.portalId);
      if (portal.avatar_key !== null) await enqueue(trx, removeFilesJob, { keys: [portal.avatar_key] });
      const row = await repo.updatePortal(
        trx,
        portal.id,
        { avatar_key: key, avatar_type: type, avatar_size: bytes.length },
        ctx.clock.now(),
      );
      return details(ctx, trx, row);
    });
  } catch (error) {
    await ctx.storage.deleteMany([key]).catch(() => undefined);
    throw error;
  }
}

export async function removeAvatar(ctx: Ctx, scope: AccountScope, { portalId }: PortalRef): Promise<{ id: number }> {
  return transact(ctx.db, async (trx) => {
    const portal = await requirePortal(trx, scope, portalId);
    if (portal.avatar_key !== null) {
      await enqueue(trx, removeFilesJob, { keys: [portal.avatar_key] });
      await repo.updatePortal(
        trx,
        portalId,
        { avatar_key: null, avatar_type: null, avatar_size: null },
        ctx.clock.now(),
      );
    }
    return { id: portalId };
  });
}

async function requirePortalForm(db: Executor, portalId: number, formId: number): Promise<repo.PortalFormWithForm> {
  const [row] = await repo.portalForms(db, portalId, formId);
  if (!row) throw new NotFoundError('portal_form_not_found');
  return row;
}

export async function addForm(
  ctx: Ctx,
  scope: AccountScope,
  { portalId }: PortalRef,
  input: PortalFormCreate,
): Promise<PortalForm> {
  const due = dueAt(input.dueDate);
  return transact(ctx.db, async (trx) => {
    await requirePortal(trx, scope, portalId);
    // Another account's form, a deleted one or none at all: the same 404.
    const form = await formsRepo.findForm(trx, scope.accountId, input.formId);
    if (!form) throw new NotFoundError('form_not_found');
    if (await repo.hasForm(trx, portalId, input.formId))
      throw invalid('invalid_portal_form', 'body.formId', `form ${input.formId} is already in this portal`);
    const now = ctx.clock.now();
    await repo.insertPortalForms(trx, [
      {
        portal_id: portalId,
        form_id: input.formId,
        account_id: scope.accountId,
        due_at: due ?? null,
        required: Number(input.required ?? false),
        created_at: now,
        updated_at: now,
      },
    ]);
    await repo.updatePortal(trx, portalId, {}, now);
    return toPortalForm(ctx, await requirePortalForm(trx, portalId, input.formId));
  });
}

export async function updateForm(
  ctx: Ctx,
  scope: AccountScope,
  { portalId, formId }: PortalFormRef,
  input: PortalFormUpdate,
): Promise<PortalForm> {
  const due = dueAt(input.dueDate);
  return transact(ctx.db, async (trx) => {
    await requirePortal(trx, scope, portalId);
    await requirePortalForm(trx, portalId, formId);
    const update: { due_at?: number | null; required?: number } = {};
    if (due !== undefined) update.due_at = due;
    if (input.required !== undefined) update.required = Number(input.required);
    const now = ctx.clock.now();
    await repo.updatePortalForm(trx, portalId, formId, update, now);
    await repo.updatePortal(trx, portalId, {}, now);
    return toPortalForm(ctx, await requirePortalForm(trx, portalId, formId));
  });
}

export async function removeForm(
  ctx: Ctx,
  scope: AccountScope,
  { portalId, formId }: PortalFormRef,
): Promise<{ portalId: number; formId: number }> {
  return transact(ctx.db, async (trx) => {
    await requirePortal(trx, scope, portalId);
    if (!(await repo.hasForm(trx, portalId, formId))) throw new NotFoundError('portal_form_not_found');
    await repo.deletePortalForm(trx, portalId, formId);
    await repo.updatePortal(trx, portalId, {}, ctx.clock.now());
    return { portalId, formId };
  });
}

async function requirePortalUser(db: Executor, portalId: number, userId: number): Promise<PortalUserRow> {
  const user = await repo.findPortalUser(db, portalId, userId);
  if (!user) throw new NotFoundError('portal_user_not_found');
  return user;
}

async function refuseTakenEmail(db: Executor, portalId: number, email: string, except?: number): Promise<void> {
  const other = await repo.findPortalUserByEmail(db, portalId, emailKey(email));
  if (other && other.id !== except)
    throw invalid('invalid_portal_user', 'body.email', 'another user of this portal has this email');
}

export async function addUser(
  ctx: Ctx,
  scope: AccountScope,
  { portalId }: PortalRef,
  input: PortalUserCreate,
): Promise<PortalDetails> {
  return transact(ctx.db, async (trx) => {
    await requirePortal(trx, scope, portalId);
    const email = input.email.trim();
    await refuseTakenEmail(trx, portalId, email);
    const now = ctx.clock.now();
    await repo.insertPortalUser(
      trx,
      { portal_id: portalId, account_id: scope.accountId, email, email_key: emailKey(email), name: input.name },
      now,
    );
    return details(ctx, trx, await repo.updatePortal(trx, portalId, {}, now));
  });
}

export async function updateUser(
  ctx: Ctx,
  scope: AccountScope,
  { portalId, userId }: PortalUserRef,
  input: PortalUserUpdate,
): Promise<PortalUser> {
  return transact(ctx.db, async (trx) => {
    await requirePortal(trx, scope, portalId);
    const user = await requirePortalUser(trx, portalId, userId);
    const update: { email?: string; email_key?: string; name?: string } = {};
    if (input.name !== undefined) update.name = input.name;
    if (input.email !== undefined) {
      const email = input.email.trim();
      await refuseTakenEmail(trx, portalId, email, user.id);
      update.email = email;
      update.email_key = emailKey(email);
      // A new address: links sent to the old one, and sessions they opened, end.
      if (update.email_key !== user.email_key) await repo.deleteSessionsOf(trx, user.id);
    }
    return toPortalUser(await repo.updatePortalUser(trx, user.id, update, ctx.clock.now()));
  });
}

export async function removeUser(
  ctx: Ctx,
  scope: AccountScope,
  { portalId, userId }: PortalUserRef,
): Promise<{ portalId: number; userId: number }> {
  return transact(ctx.db, async (trx) => {
    await requirePortal(trx, scope, portalId);
    const user = await requirePortalUser(trx, portalId, userId);
    // Links, sessions and submission ties go with the user (ON DELETE CASCADE); submissions stay.
    await repo.deletePortalUser(trx, user.id);
    await repo.updatePortal(trx, portalId, {}, ctx.clock.now());
    return { portalId, userId };
  });
}
