import { ACTIONS, scopesFor, type Action } from '../auth/actions.ts';
import { SCOPES, type Scope } from '../keys/scopes.ts';

/** CONTRACT §17: a group gives its members one of these per project. */
export const ROLES = ['viewer', 'admin'] as const;
export type Role = (typeof ROLES)[number];
export const isRole = (value: unknown): value is Role => value === 'viewer' || value === 'admin';

/** A read: an action named `<resource>.read` or `<resource>.list` (the table's convention, domain/auth/actions.ts). */
export const isReadAction = (action: Action): boolean => /\.(read|list)$/.test(action);

const ALL_ACTIONS = Object.keys(ACTIONS) as Action[];

/** What a viewer's reads need: every scope that allows some read action (keys:manage for key.list, …). */
export const VIEWER_SCOPES: readonly Scope[] = SCOPES.filter((scope) =>
  ALL_ACTIONS.some((action) => isReadAction(action) && scopesFor(action).includes(scope)),
);

/** An admin acts with every scope in its project (it may hand any of them to the keys it creates). */
export const ADMIN_SCOPES: readonly Scope[] = SCOPES;

export const scopesOfRole = (role: Role): readonly Scope[] => (role === 'admin' ? ADMIN_SCOPES : VIEWER_SCOPES);

/** Whether a role may perform an action (its scopes are checked as for any key, too). */
export const roleAllows = (role: Role, action: Action): boolean => role === 'admin' || isReadAction(action);

/** Of several groups' roles in one project, the strongest wins. */
export const strongest = (a: Role | undefined, b: Role): Role => (a === 'admin' || b === 'admin' ? 'admin' : 'viewer');

/** Whether a caller's role allows an action: only console sessions have roles (keys and the operator key: their scopes). */
export function callerMay(caller: { kind: string; session?: { role: Role | null } }, action: Action): boolean {
  if (caller.kind !== 'session') return true;
  const role = caller.session?.role ?? null;
  return role !== null && roleAllows(role, action);
}
