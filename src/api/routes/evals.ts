import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { EvalCase } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import { cancelEvalRun, createEvalRun, getEvalRun, listEvalResults, listEvalRuns, type EvalRunView } from '../../domain/evals/service.ts';
import { CancelEvalRun, CreateEvalRun, EvalIdParams, ListEvalResultsQuery, ListEvalRunsQuery } from '../../domain/evals/schema.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { Type } from 'typebox';
import { ListOf, sendList } from '../list.ts';
import { Int, Json, Nullable, NullableInt, NullableStr, Num, ObjectType, Str, TokenUsage, Unix, UnixOrNull } from '../response-fields.ts';

const EvalRun = Type.Object(
  {
    id: Str('The run id (evr_…).'),
    object: ObjectType('svc.eval_run'),
    project_id: Str('The project it runs in.'),
    name: Str('Its name.'),
    model: NullableStr('The model asked for (or "auto"), or null when the template names it.'),
    template: Json('The template it renders per case, {id, version} (version pinned at creation), or null.'),
    status: Str('queued, running, completed, failed or canceled.'),
    concurrency: Int('How many cases run at once.'),
    key_id: Str('The key it runs as (its limits and budget apply).'),
    summary: Type.Object(
      {
        total: Int('Cases in the run.'),
        passed: Int('Cases that passed their assertion.'),
        failed: Int('Cases that failed it.'),
        errored: Int('Cases whose inference failed.'),
        pass_rate: Num('passed / total, rounded to 4 decimals (0 without cases).'),
        cost_usd: Num('What the run cost so far, in USD.'),
        latency_p50_ms: NullableInt('Median inference latency in ms, or null before any case ran.'),
      },
      { description: 'Results so far.' },
    ),
    progress: Type.Object({ done: Int('Cases finished (passed, failed or errored).'), total: Int('Cases in the run.') }, { description: 'How far it got.' }),
    error: Json("A failed run's why, {code, message}, or null."),
    created_at: Unix('Created'),
    completed_at: UnixOrNull('Finished'),
  },
  { description: 'The svc.eval_run object (CONTRACT §14).' },
);

const EvalResult = Type.Object(
  {
    id: Str('The result id.'),
    object: ObjectType('svc.eval_result'),
    eval_id: Str('The run.'),
    case_id: Str("The case's id (given, or case_<n>)."),
    index: Int("The case's position in the run, from 0."),
    status: Str('pending, started, passed, failed, errored or skipped.'),
    passed: Nullable(Type.Boolean(), 'Whether it passed; null until judged (false when errored).'),
    output: NullableStr("The model's answer, or null."),
    reason: NullableStr('Why it failed or errored, or null.'),
    tokens: TokenUsage,
    cost_usd: Num('What the case cost, in USD.'),
    latency_ms: NullableInt('Inference latency in ms, or null.'),
    request_id: NullableStr("The inference's request id, or null."),
    attempts: Int('Inference attempts made.'),
    finished_at: UnixOrNull('Finished'),
  },
  { description: "One case's result." },
);

/** The svc.eval_run object (CONTRACT §14), plus `concurrency`, `key_id` (the key it runs as) and `error` (a failed run's why). */
export function presentEvalRun(r: EvalRunView) {
  const s = r.summary;
  const done = s.passed + s.failed + s.errored;
  return {
    id: r.id,
    object: 'svc.eval_run' as const,
    project_id: r.projectId,
    name: r.name,
    model: r.model,
    template: r.template ?? null,
    status: r.status,
    concurrency: r.concurrency,
    key_id: r.keyId,
    summary: {
      total: s.total,
      passed: s.passed,
      failed: s.failed,
      errored: s.errored,
      pass_rate: s.total === 0 ? 0 : Math.round((s.passed / s.total) * 10_000) / 10_000,
      cost_usd: microsToUsd(s.costMicros),
      latency_p50_ms: s.latencyP50Ms,
    },
    progress: { done, total: s.total },
    error: r.error ?? null,
    created_at: unixSeconds(r.createdAt),
    completed_at: unixOrNull(r.completedAt),
  };
}

/** One case's result: status pending, started, passed, failed, errored or skipped (passed is null until judged). */
export function presentEvalResult(c: EvalCase) {
  const judged = c.status === 'passed' || c.status === 'failed';
  return {
    id: c.id,
    object: 'svc.eval_result' as const,
    eval_id: c.runId,
    case_id: c.caseId,
    index: c.index,
    status: c.status,
    passed: judged ? c.status === 'passed' : c.status === 'errored' ? false : null,
    output: c.output,
    reason: c.reason,
    tokens: { prompt_tokens: c.promptTokens, completion_tokens: c.completionTokens, total_tokens: c.promptTokens + c.completionTokens },
    cost_usd: microsToUsd(c.costMicros),
    latency_ms: c.latencyMs,
    request_id: c.requestId,
    attempts: c.attempts,
    finished_at: unixOrNull(c.finishedAt),
  };
}

export const evalsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/evals', { config: { action: 'eval_run.create' }, schema: { body: CreateEvalRun, response: { 200: EvalRun } } }, async (req) => presentEvalRun(await createEvalRun(app.ports.inference, req.ctx, req.body)));

  app.get('/v1/evals', { config: { action: 'eval_run.list' }, schema: { querystring: ListEvalRunsQuery, response: { 200: ListOf(EvalRun) } } }, async (req, reply) =>
    sendList(reply, await listEvalRuns(req.ctx, req.query), '/v1/evals', presentEvalRun),
  );

  app.get('/v1/evals/:eval_id', { config: { action: 'eval_run.read' }, schema: { params: EvalIdParams, response: { 200: EvalRun } } }, async (req) => presentEvalRun(await getEvalRun(req.ctx, req.params.eval_id)));

  app.get('/v1/evals/:eval_id/results', { config: { action: 'eval_run.read' }, schema: { params: EvalIdParams, querystring: ListEvalResultsQuery, response: { 200: ListOf(EvalResult) } } }, async (req, reply) =>
    sendList(reply, await listEvalResults(req.ctx, req.params.eval_id, req.query), `/v1/evals/${req.params.eval_id}/results`, presentEvalResult),
  );

  app.post('/v1/evals/:eval_id/cancel', { config: { action: 'eval_run.cancel' }, schema: { params: EvalIdParams, body: CancelEvalRun, response: { 200: EvalRun } } }, async (req) =>
    presentEvalRun(await cancelEvalRun(req.ctx, req.params.eval_id, req.body ?? {})),
  );
};
