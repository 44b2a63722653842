import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import { setProjectPii, setProjectRetention } from '../../domain/governance/guarded.ts';
import { InferenceIdParams, SetPii, SetRetention } from '../../domain/privacy/schema.ts';
import { getRetainedInference, type RetainedInference } from '../../domain/privacy/service.ts';
import { getPrivacySettings, type PrivacySettings } from '../../domain/privacy/settings.ts';
import { ProjectIdParams } from '../../domain/projects/schema.ts';
import { presentInference } from './inference.ts';
import { UnixOrNull, Unix } from '../response-fields.ts';

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

/** presentPii's answer. */
export const PiiPolicyObject = Type.Object(
  {
    object: Type.Literal('svc.pii_policy'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    redact: Type.Boolean({ description: 'Whether inferences redact PII unless they ask otherwise.' }),
    updated_at: UnixOrNull('When the policy was last set'),
  },
  { description: 'A project\'s PII default (CONTRACT §11).' },
);

/** presentRetention's answer. */
export const RetentionPolicyObject = Type.Object(
  {
    object: Type.Literal('svc.retention_policy'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    mode: Type.String({ description: 'standard (content kept for `days`) or zero (no content kept anywhere).' }),
    days: Type.Integer({ description: 'How many days inference content is kept in standard mode.' }),
    updated_at: UnixOrNull('When the retention was last set'),
  },
  { description: 'A project\'s retention (CONTRACT §12).' },
);

const Answered = (description: string) => ({ description: `${description}; absent on a failed inference.` });
// fast-json-stringify writes required properties before optional ones: the fields after the first optional one are
// declared optional too (they are always present), so that the answer keeps the presenter's order.
const Always = (description: string) => ({ description: `${description} Always present.` });

/** presentRetainedInference's answer: the svc.inference object as answered, then project_id, status and request. */
export const RetainedInferenceObject = Type.Object(
  {
    id: Type.String({ description: 'The inference id (inf_…).' }),
    object: Type.Literal('svc.inference'),
    created_at: Unix('When the inference was made'),
    model: Type.Optional(Type.String(Answered('The model that answered'))),
    route: Type.Optional(Type.String(Answered('The provider route that answered'))),
    region: Type.Optional(Type.String(Answered('The region that answered'))),
    cache_hit: Type.Optional(Type.Boolean(Answered('Whether the answer came from the cache'))),
    message: Type.Optional(
      Type.Object(
        {
          role: Type.String({ description: 'assistant.' }),
          content: Type.String({ description: 'The answer\'s text (\'\' when the model only called tools).' }),
          tool_calls: Type.Optional(
            Type.Array(
              Type.Object({
                id: Type.String({ description: 'The tool call id.' }),
                type: Type.String({ description: 'function.' }),
                function: Type.Object({
                  name: Type.String({ description: 'The function called.' }),
                  arguments: Type.String({ description: 'Its arguments, a JSON text.' }),
                }),
              }),
              { description: 'The model\'s tool calls, when it called tools.' },
            ),
          ),
        },
        Answered('The answer'),
      ),
    ),
    finish_reason: Type.Optional(Type.String(Answered('Why the model stopped'))),
    usage: Type.Optional(
      Type.Object(
        {
          prompt_tokens: Type.Integer({ description: 'Prompt tokens.' }),
          completion_tokens: Type.Integer({ description: 'Completion tokens.' }),
          total_tokens: Type.Integer({ description: 'Both.' }),
        },
        Answered('The tokens billed'),
      ),
    ),
    cost_usd: Type.Optional(Type.Number(Answered('The cost in USD'))),
    request_id: Type.Optional(Type.String(Always('The request (req_…).'))),
    citations: Type.Optional(
      Type.Array(
        Type.Object({
          document_id: Type.String({ description: 'The document cited.' }),
          chunk_id: Type.String({ description: 'The chunk cited.' }),
          score: Type.Number({ description: 'Its relevance score.' }),
        }),
        { description: 'The rag option\'s sources (CONTRACT §13).' },
      ),
    ),
    pii: Type.Optional(
      Type.Object(
        { redacted: Type.Record(Type.String(), Type.Integer(), { description: 'How many values were replaced, by kind (email, phone, card, iban, ssn, ip).' }) },
        { description: 'What PII redaction replaced (CONTRACT §11).' },
      ),
    ),
    template_id: Type.Optional(Type.String({ description: 'The template used (CONTRACT §10).' })),
    template_version: Type.Optional(Type.Integer({ description: 'The template version used.' })),
    attempts: Type.Optional(Type.Integer({ description: 'Attempts made for a JSON response_format.' })),
    project_id: Type.Optional(Type.String(Always('The project (prj_…).'))),
    status: Type.Optional(Type.String(Always('succeeded or failed.'))),
    request: Type.Optional(Type.Unknown(Always('The request as retained (after redaction: what the provider saw).'))),
  },
  { description: 'A retained inference (CONTRACT §12).' },
);

export const privacyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.put('/v1/projects/:project_id/pii', { config: { action: 'pii.update' }, schema: { params: ProjectIdParams, body: SetPii, response: { 200: PiiPolicyObject } } }, async (req) =>
    presentPii(await setProjectPii(app.ports.projects, req.ctx, req.params.project_id, req.body)),
  );
  app.get('/v1/projects/:project_id/pii', { config: { action: 'privacy.read' }, schema: { params: ProjectIdParams, response: { 200: PiiPolicyObject } } }, async (req) =>
    presentPii(await getPrivacySettings(req.ctx, req.params.project_id)),
  );
  app.put('/v1/projects/:project_id/retention', { config: { action: 'retention.update' }, schema: { params: ProjectIdParams, body: SetRetention, response: { 200: RetentionPolicyObject } } }, async (req) =>
    presentRetention(await setProjectRetention(app.ports.projects, req.ctx, req.params.project_id, req.body)),
  );
  app.get('/v1/projects/:project_id/retention', { config: { action: 'privacy.read' }, schema: { params: ProjectIdParams, response: { 200: RetentionPolicyObject } } }, async (req) =>
    presentRetention(await getPrivacySettings(req.ctx, req.params.project_id)),
  );
  app.get('/v1/inference/:inference_id', { config: { action: 'inference.read' }, schema: { params: InferenceIdParams, response: { 200: RetainedInferenceObject } } }, async (req) =>
    presentRetainedInference(await getRetainedInference(app.ports.privacy, req.ctx, req.params.inference_id)),
  );
};
