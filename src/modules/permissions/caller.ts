import { isAdminRole, type Role } from './levels.js';

/**
 * Who makes a request: made once per request from its token (the principal) and handed to
 * services as one object, so that an account id and a user id cannot trade places.
 */
export interface Caller {
  accountId: number;
  userId: number;
  role: Role;
  tokenId: number;
}

/** The account a service acts in: all that account-wide actions need (the CLI acts without a token). */
export type AccountScope = Pick<Caller, 'accountId'>;

/** The user whose form permissions limit what the caller sees; undefined for owners and admins, who see it all. */
export function memberOf(caller: Pick<Caller, 'userId' | 'role'>): number | undefined {
  return isAdminRole(caller.role) ? undefined : caller.userId;
}

// The ids a request names, by name: a service that takes two of them cannot be given them swapped.
export interface FormRef {
  formId: number;
}
export interface FieldRef extends FormRef {
  fieldId: number;
}
export interface FolderRef {
  folderId: number;
}
export interface SubmissionRef {
  submissionId: number;
}
export interface UserRef {
  userId: number;
}
export interface ClientRef {
  clientId: number;
}
export interface WebhookRef {
  webhookId: number;
}
export interface SmartListRef {
  smartListId: number;
}
export interface SmartListOptionRef extends SmartListRef {
  optionId: number;
}
export interface PortalRef {
  portalId: number;
}
export interface PortalFormRef extends PortalRef {
  formId: number;
}
export interface PortalUserRef extends PortalRef {
  /** A portal user's id (not an account user's): the spec names it userId. */
  userId: number;
}
