import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { EvalCase } from '../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../domain/context.ts';
import { cancelEvalRun, createEvalRun, getEvalRun, listEvalResults, listEvalRuns, type EvalRunView } from '../domain/evals/service.ts';
import { CancelEvalRun, CreateEvalRun, EvalIdParams, ListEvalResultsQuery, ListEvalRunsQuery } from '../domain/evals/schema.ts';
import { microsToUsd } from '../kernel/money.ts';
import { sendList } from './list.ts';

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
  app.post('/v1/evals', { schema: { body: CreateEvalRun } }, async (req) => presentEvalRun(await createEvalRun(app.ports.inference, req.ctx, req.body)));

  app.get('/v1/evals', { schema: { querystring: ListEvalRunsQuery } }, async (req, reply) =>
    sendList(reply, await listEvalRuns(req.ctx, req.query), '/v1/evals', presentEvalRun),
  );

  app.get('/v1/evals/:eval_id', { schema: { params: EvalIdParams } }, async (req) => presentEvalRun(await getEvalRun(req.ctx, req.params.eval_id)));

  app.get('/v1/evals/:eval_id/results', { schema: { params: EvalIdParams, querystring: ListEvalResultsQuery } }, async (req, reply) =>
    sendList(reply, await listEvalResults(req.ctx, req.params.eval_id, req.query), `/v1/evals/${req.params.eval_id}/results`, presentEvalResult),
  );

  app.post('/v1/evals/:eval_id/cancel', { schema: { params: EvalIdParams, body: CancelEvalRun } }, async (req) =>
    presentEvalRun(await cancelEvalRun(req.ctx, req.params.eval_id, req.body ?? {})),
  );
};
