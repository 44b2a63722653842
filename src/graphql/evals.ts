import type { EvalCase } from '../generated/prisma/client.ts';
import { cancelEvalRun, createEvalRun, getEvalRun, listEvalResults, listEvalRuns, type EvalRunView } from '../domain/evals/service.ts';
import { microsToUsd } from '../kernel/money.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { listFilters } from './inputs.ts';

/** REST's summary (CONTRACT §14) with camelCase names. */
const EvalSummaryRef = builder.objectRef<EvalRunView['summary']>('EvalSummary').implement({
  fields: (t) => ({
    total: t.exposeInt('total'),
    passed: t.exposeInt('passed'),
    failed: t.exposeInt('failed'),
    errored: t.exposeInt('errored'),
    passRate: t.float({ description: 'passed / total, to 4 decimals.', resolve: (s) => (s.total === 0 ? 0 : Math.round((s.passed / s.total) * 10_000) / 10_000) }),
    costUsd: t.float({ description: 'The sum of the cases\' costs (judge calls included).', resolve: (s) => microsToUsd(s.costMicros) }),
    latencyP50Ms: t.exposeInt('latencyP50Ms', { nullable: true, description: 'The median latency of the judged cases; null before any.' }),
  }),
});

export const EvalResultRef = builder.objectRef<EvalCase>('EvalResult').implement({
  description: "One case's result (REST's svc.eval_result).",
  fields: (t) => ({
    id: t.exposeID('id'),
    evalId: t.exposeID('runId'),
    caseId: t.exposeString('caseId'),
    index: t.exposeInt('index'),
    status: t.exposeString('status', { description: 'pending, started, passed, failed, errored or skipped.' }),
    passed: t.boolean({
      nullable: true,
      resolve: (c) => (c.status === 'passed' ? true : c.status === 'failed' || c.status === 'errored' ? false : null),
    }),
    output: t.exposeString('output', { nullable: true }),
    reason: t.exposeString('reason', { nullable: true }),
    promptTokens: t.exposeInt('promptTokens'),
    completionTokens: t.exposeInt('completionTokens'),
    totalTokens: t.int({ resolve: (c) => c.promptTokens + c.completionTokens }),
    costUsd: t.float({ resolve: (c) => microsToUsd(c.costMicros) }),
    latencyMs: t.exposeInt('latencyMs', { nullable: true }),
    requestId: t.exposeString('requestId', { nullable: true }),
    attempts: t.exposeInt('attempts'),
    finishedAt: t.expose('finishedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

export const EvalRunRef = builder.objectRef<EvalRunView>('EvalRun').implement({
  description: 'An evaluation run (REST\'s svc.eval_run, CONTRACT §14).',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    name: t.exposeString('name'),
    model: t.exposeString('model', { nullable: true }),
    template: t.field({ type: 'JSON', nullable: true, resolve: (r) => r.template ?? null }),
    status: t.exposeString('status', { description: 'queued, running, completed, failed or canceled.' }),
    concurrency: t.exposeInt('concurrency'),
    keyId: t.exposeString('keyId', { description: 'The key the cases run as.' }),
    summary: t.field({ type: EvalSummaryRef, resolve: (r) => r.summary }),
    error: t.field({ type: 'JSON', nullable: true, description: 'Why a failed run failed: {code, message}.', resolve: (r) => r.error ?? null }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    completedAt: t.expose('completedAt', { type: 'UnixSeconds', nullable: true }),
    results: t.connection(
      {
        type: EvalResultRef,
        description: 'In case order; after/first walk forward (REST\'s starting_after/limit).',
        resolve: (run, args, { ctx }) => serviceConnection(args, (query) => listEvalResults(ctx, run.id, query)),
      },
      { name: 'EvalResultConnection' },
      { name: 'EvalResultEdge' },
    ),
  }),
});

builder.queryFields((t) => ({
  evalRuns: t.connection(
    {
      type: EvalRunRef,
      nullable: true,
      authScopes: { action: 'eval_run.list' },
      description: 'Newest first; status filters.',
      args: { projectId: t.arg.id(), status: t.arg.string() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listEvalRuns(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'EvalRunConnection' },
    { name: 'EvalRunEdge' },
  ),
  evalRun: t.field({
    type: EvalRunRef,
    nullable: true,
    authScopes: { action: 'eval_run.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getEvalRun(ctx, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  createEvalRun: t.field({
    type: EvalRunRef,
    nullable: true,
    authScopes: { action: 'eval_run.create' },
    description:
      'Queues a run for the background worker. `cases` is REST\'s list as JSON (snake_case: messages, expected, assert {type, value, schema, judge_model, rubric}). Audits eval_run.create.',
    args: {
      projectId: t.arg.id(),
      name: t.arg.string({ required: true }),
      model: t.arg.string(),
      template: t.arg({ type: 'JSON' }),
      cases: t.arg({ type: 'JSON', required: true }),
      concurrency: t.arg.int(),
    },
    resolve: (_root, args, { ctx, ports }) => {
      const input: Record<string, unknown> = { name: args.name, cases: args.cases };
      if (args.projectId != null) input.project_id = String(args.projectId);
      if (args.model != null) input.model = args.model;
      if (args.template != null) input.template = args.template;
      if (args.concurrency != null) input.concurrency = args.concurrency;
      return createEvalRun(ports.inference, ctx, input);
    },
  }),
  cancelEvalRun: t.field({
    type: EvalRunRef,
    nullable: true,
    authScopes: { action: 'eval_run.cancel' },
    description: 'Canceling a canceled run returns it; a completed or failed one is invalid_request. Emits eval.run.completed (status canceled).',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => cancelEvalRun(ctx, String(args.id)),
  }),
}));
