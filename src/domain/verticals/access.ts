import { SvcError } from '../../errors/svc-error.ts';
import { requireProjectId, visibleProjectId, type Ctx } from '../context.ts';

/**
 * Spec §5.6: a vertical key carries its `<vertical>:write` plus inference:write. The scope table (auth/actions.ts)
 * checked the vertical's scope; model work runs through inference, so the key must also hold inference:write.
 */
export function assertMayRunModelWork(ctx: Ctx): void {
  if (ctx.caller.kind === 'operator') return;
  if (!ctx.caller.scopes.includes('inference:write')) {
    throw new SvcError('insufficient_scope', {
      message: 'Model work runs through the inference pipeline: the key needs inference:write besides the vertical\'s write scope.',
    });
  }
}

/** The project a vertical write addresses: the one named (body project_id, X-Svc-Project), else the key's own. */
export function writeProject(ctx: Ctx, requested: string | null | undefined): Promise<string> {
  return requireProjectId(ctx, requested ?? ctx.caller.projectId);
}

/** The project filter of a read by id: the key's own project, the operator's any (undefined) or the one it names. */
export function readProject(ctx: Ctx): Promise<string | undefined> {
  return visibleProjectId(ctx, null);
}

/** Another project's object looks absent (404), as every other object. */
export const notFound = (param: string, what: string) => new SvcError('not_found', { param, message: `No such ${what}.` });
