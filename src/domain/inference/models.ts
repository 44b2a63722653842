import { SvcError } from '../../errors/svc-error.ts';
import type { Route } from '../../providers/router.ts';
import { visibleProjectId, type Ctx } from '../context.ts';
import type { ProviderRouter } from './ports.ts';
import { routeAllowed } from '../auth/actions.ts';

export interface ModelInfo {
  id: string;
  /** Its routes, cheapest first. */
  routes: Route[];
}

/**
 * The models a caller can use: every configured model, or for a project pinned to a region only those served there
 * (with only those routes), and for a key with a model list only the models in it. The operator sees everything unless
 * it names a project.
 */
export async function listModels(providers: ProviderRouter, ctx: Ctx, requestedProjectId?: string): Promise<ModelInfo[]> {
  const projectId = await visibleProjectId(ctx, requestedProjectId);
  let region: string | null = null;
  if (projectId !== undefined) {
    const project = await ctx.db.project.findUnique({ where: { id: projectId }, select: { region: true } });
    region = project?.region ?? null;
  }
  const registry = providers;
  const out: ModelInfo[] = [];
  for (const id of registry.modelIds()) {
    // CONTRACT §22: a key narrowed to some models sees only those (and only their routes within its list).
    const routes = registry.routesForModel(id).filter((r) => (region === null || r.provider.region === region) && routeAllowed(ctx.caller.models, r));
    if (routes.length > 0) out.push({ id, routes });
  }
  return out;
}

export async function getModel(providers: ProviderRouter, ctx: Ctx, modelId: string): Promise<ModelInfo> {
  const found = (await listModels(providers, ctx)).find((m) => m.id === modelId);
  if (!found) throw new SvcError('not_found', { param: 'model', message: `No such model: ${modelId.slice(0, 200)}.` });
  return found;
}
