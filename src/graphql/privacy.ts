import { setProjectPii, setProjectRetention } from '../domain/governance/guarded.ts';
import { getRetainedInference, type RetainedInference } from '../domain/privacy/service.ts';
import { getPrivacySettings, type PrivacySettings } from '../domain/privacy/settings.ts';
import { microsToUsd } from '../kernel/money.ts';
import { builder } from './builder.ts';
import { ProjectRef } from './projects.ts';

/** CONTRACT §11, §12: REST's svc.pii_policy and svc.retention_policy, in one object. */
const PrivacySettingsRef = builder.objectRef<PrivacySettings>('PrivacySettings').implement({
  description: "The project's PII redaction default and retention.",
  fields: (t) => ({
    projectId: t.exposeID('projectId'),
    piiRedact: t.exposeBoolean('piiRedact', { description: 'Redact PII in requests that send no pii option.' }),
    piiUpdatedAt: t.expose('piiUpdatedAt', { type: 'UnixSeconds', nullable: true }),
    retentionMode: t.exposeString('retentionMode', { description: 'standard or zero.' }),
    retentionDays: t.exposeInt('retentionDays', { description: 'How long content is kept under standard retention.' }),
    retentionUpdatedAt: t.expose('retentionUpdatedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

/** REST's GET /v1/inference/{id}: the retained request and response (the response's fields; null for a failure). */
const RetainedInferenceRef = builder.objectRef<RetainedInference>('RetainedInference').implement({
  description: 'A retained inference (CONTRACT §12).',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    requestId: t.exposeString('requestId'),
    status: t.exposeString('status', { description: 'succeeded or failed.' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    request: t.field({ type: 'JSON', description: 'The request as the provider saw it: {model, messages} (redacted when PII redaction ran).', resolve: (r) => r.request }),
    model: t.string({ nullable: true, resolve: (r) => r.response?.model ?? null }),
    route: t.string({ nullable: true, resolve: (r) => r.response?.route ?? null }),
    content: t.string({ nullable: true, description: "The assistant message's content as the provider answered.", resolve: (r) => r.response?.content ?? null }),
    finishReason: t.string({ nullable: true, resolve: (r) => r.response?.finishReason ?? null }),
    promptTokens: t.int({ nullable: true, resolve: (r) => r.response?.promptTokens ?? null }),
    completionTokens: t.int({ nullable: true, resolve: (r) => r.response?.completionTokens ?? null }),
    costUsd: t.float({ nullable: true, resolve: (r) => (r.response ? microsToUsd(BigInt(r.response.costMicros)) : null) }),
    pii: t.field({ type: 'JSON', nullable: true, description: '{redacted: {email: n, …}} when PII redaction ran.', resolve: (r) => r.response?.pii ?? null }),
  }),
});

builder.objectField(ProjectRef, 'privacy', (t) =>
  t.field({
    type: PrivacySettingsRef,
    nullable: true,
    authScopes: { action: 'privacy.read' },
    description: 'PII redaction default and retention (governance:manage).',
    resolve: (project, _args, { ctx }) => getPrivacySettings(ctx, project.id),
  }),
);

builder.queryFields((t) => ({
  inference: t.field({
    type: RetainedInferenceRef,
    nullable: true,
    authScopes: { action: 'inference.read' },
    description: 'A retained inference by its inf_ id: record_not_retained past its retention or under zero retention.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx, ports }) => getRetainedInference(ports.privacy, ctx, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  setProjectPii: t.field({
    type: PrivacySettingsRef,
    nullable: true,
    authScopes: { action: 'pii.update' },
    description: "Sets the project's PII redaction default (guarded resource pii). Emits policy.updated.",
    args: { projectId: t.arg.id({ required: true }), redact: t.arg.boolean({ required: true }) },
    resolve: (_root, args, { ctx, ports }) => setProjectPii(ports.projects, ctx, String(args.projectId), { redact: args.redact }),
  }),
  setProjectRetention: t.field({
    type: PrivacySettingsRef,
    nullable: true,
    authScopes: { action: 'retention.update' },
    description: "Sets the project's retention: standard for `days` (1 to 365, default 30) or zero (guarded resource retention). Emits policy.updated.",
    args: { projectId: t.arg.id({ required: true }), mode: t.arg.string({ required: true }), days: t.arg.int() },
    resolve: (_root, args, { ctx, ports }) =>
      setProjectRetention(ports.projects, ctx, String(args.projectId), { mode: args.mode, ...(args.days != null ? { days: args.days } : {}) }),
  }),
}));
