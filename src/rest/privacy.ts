import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { unixOrNull, unixSeconds } from '../domain/context.ts';
import { setProjectPii, setProjectRetention } from '../domain/governance/guarded.ts';
import { InferenceIdParams, SetPii, SetRetention } from '../domain/privacy/schema.ts';
import { getRetainedInference, type RetainedInference } from '../domain/privacy/service.ts';
import { getPrivacySettings, type PrivacySettings } from '../domain/privacy/settings.ts';
import { ProjectIdParams } from '../domain/projects/schema.ts';
import { presentInference } from './inference.ts';

/** The project's PII default (CONTRACT §11). */
export function presentPii(s: PrivacySettings) {
  return { object: 'svc.pii_policy' as const, project_id: s.projectId, redact: s.piiRedact, updated_at: unixOrNull(s.piiUpdatedAt) };
}

/** The project's retention (CONTRACT §12). */
export function presentRetention(s: PrivacySettings) {
  return {
    object: 'svc.retention_policy' as const,
    project_id: s.projectId,
    mode: s.retentionMode,
    days: s.retentionDays,
    updated_at: unixOrNull(s.retentionUpdatedAt),
  };
}

/**
 * A retained inference: the svc.inference response object as it was answered (before any restore: the retained
 * answer is what the provider saw and said), plus `request` and `status`. A failed inference has no response fields.
 */
export function presentRetainedInference(r: RetainedInference) {
  const res = r.response;
  const base = res
    ? {
        ...presentInference({
          ...res,
          createdAt: new Date(res.createdAt),
          costMicros: BigInt(res.costMicros),
          cacheStatus: res.cacheHit ? 'hit' : 'off',
          toolCalls: res.toolCalls as Parameters<typeof presentInference>[0]['toolCalls'],
        }),
        ...(res.pii ? { pii: res.pii } : {}),
      }
    : { id: r.id, object: 'svc.inference' as const, created_at: unixSeconds(r.createdAt), request_id: r.requestId };
  return { ...base, project_id: r.projectId, status: r.status, request: r.request };
}

export const privacyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.put('/v1/projects/:project_id/pii', { schema: { params: ProjectIdParams, body: SetPii } }, async (req) =>
    presentPii(await setProjectPii(app.ports.projects, req.ctx, req.params.project_id, req.body)),
  );
  app.get('/v1/projects/:project_id/pii', { schema: { params: ProjectIdParams } }, async (req) =>
    presentPii(await getPrivacySettings(req.ctx, req.params.project_id)),
  );
  app.put('/v1/projects/:project_id/retention', { schema: { params: ProjectIdParams, body: SetRetention } }, async (req) =>
    presentRetention(await setProjectRetention(app.ports.projects, req.ctx, req.params.project_id, req.body)),
  );
  app.get('/v1/projects/:project_id/retention', { schema: { params: ProjectIdParams } }, async (req) =>
    presentRetention(await getPrivacySettings(req.ctx, req.params.project_id)),
  );
  app.get('/v1/inference/:inference_id', { schema: { params: InferenceIdParams } }, async (req) =>
    presentRetainedInference(await getRetainedInference(app.ports.privacy, req.ctx, req.params.inference_id)),
  );
};
