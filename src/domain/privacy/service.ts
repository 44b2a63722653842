import { SvcError } from '../../errors/svc-error.ts';
import { addressed, visibleProjectId, type Ctx } from '../context.ts';
import type { PrivacyPorts } from './ports.ts';
import { readPrivacySettings } from './settings.ts';
import type { RetainedContent } from './stage.ts';

/** GET /v1/inference/{id} (CONTRACT §12): the retained request and response, and how the inference ended. */
export interface RetainedInference {
  id: string;
  projectId: string;
  requestId: string;
  status: 'succeeded' | 'failed';
  createdAt: Date;
  request: RetainedContent['request'];
  response: RetainedContent['response'];
}

const notFound = () => new SvcError('not_found', { param: 'inference_id', message: 'No such inference.' });

async function findRecord(ctx: Ctx, id: string, projectId: string | undefined) {
  return ctx.db.retainedInference.findFirst({ where: { id, ...(projectId ? { projectId } : {}) } });
}

/**
 * Another project's id is not_found (never revealed); an id the project kept no content for (zero retention) or
 * whose content was purged or is past its end: record_not_retained. The record is written off the request path, so
 * a miss first waits for the outcomes accepted before it (read-your-writes) and looks again.
 */
export async function getRetainedInference(ports: PrivacyPorts, ctx: Ctx, id: string): Promise<RetainedInference> {
  const projectId = await visibleProjectId(ctx, null);
  if (!id.startsWith('inf_')) throw notFound();
  let row = await findRecord(ctx, id, projectId);
  if (!row) {
    await ports.outcomes.flush({ timeoutMs: 5_000 });
    row = await findRecord(ctx, id, projectId);
  }
  if (!row) throw notFound();
  addressed(ctx, row.projectId);
  // The project's settings now: a record written just after a switch to zero, or before a shorter period, ends too.
  const settings = await readPrivacySettings(ctx.db, row.projectId);
  const end = Math.min(row.retainedUntil?.getTime() ?? 0, row.createdAt.getTime() + (settings?.retentionDays ?? 0) * 86_400_000);
  if (row.sealed === null || settings?.retentionMode !== 'standard' || end <= ctx.now().getTime()) {
    throw new SvcError('record_not_retained', { param: 'inference_id' });
  }
  const content = JSON.parse(ports.sealer.open(row.sealed, row.id)) as RetainedContent;
  return {
    id: row.id,
    projectId: row.projectId,
    requestId: row.requestId,
    status: row.status as RetainedInference['status'],
    createdAt: row.createdAt,
    request: content.request,
    response: content.response,
  };
}
