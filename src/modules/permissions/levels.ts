import type { FormPermissionsTable, UsersTable } from '../../db/schema.js';

export type Role = UsersTable['role'];
export type Level = FormPermissionsTable['level'];

/** Per-form permission levels of members, weakest first; each includes the ones before it. */
export const LEVELS: readonly Level[] = ['view', 'submissions', 'edit', 'full'];

export const LEVEL_MEANINGS: Record<Level, string> = {
  view: 'read the form, its fields and its submissions',
  submissions: 'view, and create, edit and delete submissions',
  edit: 'submissions, and change the form and its fields',
  full: 'edit, and delete or restore the form',
};

export function levelAtLeast(held: Level, needed: Level): boolean {
  return LEVELS.indexOf(held) >= LEVELS.indexOf(needed);
}

/** Owners and admins see every form of the account; members only those they hold a level on. */
export function isAdminRole(role: Role): boolean {
  return role === 'owner' || role === 'admin';
}
