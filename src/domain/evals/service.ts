import type { EvalCase, EvalRun, Prisma } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { releaseLease } from '../../db/leases.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, requireProjectId, visibleProjectId, type Ctx } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import type { InferencePorts } from '../inference/ports.ts';
import { pageById, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { checkAssert } from './assertions.ts';
import { CancelEvalRun, CreateEvalRun, DEFAULT_CONCURRENCY, ListEvalResultsQuery, ListEvalRunsQuery, type EvalStatus } from './schema.ts';
import * as store from './store.ts';
import type { EvalSummary } from './store.ts';
import { assertModelAllowed } from '../auth/actions.ts';

export type { EvalSummary } from './store.ts';

/** A run with its summary, as both surfaces present it. */
export type EvalRunView = EvalRun & { summary: EvalSummary };

/** A stored case: what the runner needs (the input as given, without its id). */
export interface StoredCaseInput {
  messages?: unknown[];
  variables?: Record<string, unknown>;
  expected?: string;
  assert: CreateEvalRun['cases'][number]['assert'];
}

function checkModel(ports: InferencePorts, ctx: Ctx, model: string, param: string): void {
  if (model === 'auto') return;
  const type = ports.providers.modelType(model);
  if (type === undefined) throw invalid(param, `Unknown model "${model.slice(0, 200)}". GET /v1/models lists the models; "auto" routes by policy.`);
  if (type !== 'chat') throw invalid(param, `${model.slice(0, 200)} is an embedding model: evaluation runs need a chat model.`);
  // CONTRACT §22: refused at creation rather than case by case (the runner's calls would be refused the same way). A key
  // without a model list may use every model.
  if (!ctx.caller.models) return;
  try {
    assertModelAllowed(ctx.caller.models, model, ports.providers.routesForModel(model));
  } catch (err) {
    throw param === 'model' ? err : new SvcError('insufficient_scope', { param, message: (err as Error).message });
  }
}

/**
 * A template run's template (CONTRACT §10), pinned to a version at creation (the latest unless named), so that a
 * version published meanwhile does not change a run under way. Another project's template is 404 `template.id`.
 */
async function pinTemplate(ports: InferencePorts, ctx: Ctx, projectId: string, ref: { id: string; version?: number }) {
  const head = await ports.templates.template(ref.id);
  if (!head || head.projectId !== projectId) throw new SvcError('not_found', { param: 'template.id', message: 'No such template.' });
  const number = ref.version ?? head.latestVersion;
  const version = await ports.templates.version(head.id, number);
  if (!version) throw new SvcError('not_found', { param: 'template.version', message: `The template has no version ${number}.` });
  return { id: head.id, version: number, model: version.model };
}

/**
 * POST /v1/evals. The run is queued for the background worker (jobs/eval-runner), which runs every case through the
 * inference pipeline as this caller. Audits eval_run.create.
 */
export async function createEvalRun(ports: InferencePorts, ctx: Ctx, raw: unknown): Promise<EvalRunView> {
  const input = parseInput(CreateEvalRun, raw);
  const templated = input.template !== undefined;
  if (!templated && input.model === undefined) throw invalid('model', 'Missing required parameter: model (or template).');
  if (input.model !== undefined) checkModel(ports, ctx, input.model, 'model');
  const ids = new Set<string>();
  input.cases.forEach((c, i) => {
    const at = `cases[${i}]`;
    // A template run renders each case's variables (its messages, if any, follow the template's, as in inference).
    if (!templated && c.variables !== undefined) throw invalid(`${at}.variables`, 'variables go with a template run; a model run takes messages.');
    if (!templated && c.messages === undefined) throw invalid(`${at}.messages`, `Missing required parameter: ${at}.messages.`);
    const caseId = c.id ?? `case_${i + 1}`;
    if (ids.has(caseId)) throw invalid(`${at}.id`, `The case id "${caseId}" is used twice.`);
    ids.add(caseId);
    checkAssert(c.assert, c.expected, `${at}.assert`);
    if (c.assert.type === 'llm_judge') checkModel(ports, ctx, c.assert.judge_model!, `${at}.assert.judge_model`);
  });
  const projectId = await requireProjectId(ctx, input.project_id);
  const template = templated ? await pinTemplate(ports, ctx, projectId, input.template!) : null;
  if (template && input.model === undefined && template.model === null) {
    throw invalid('model', 'Missing required parameter: model (the template sets none).');
  }
  const now = ctx.now();
  const runId = newId('evr', now.getTime());
  const run = await ctx.db.$transaction(async (tx) => {
    const created = await tx.evalRun.create({
      data: {
        id: runId,
        projectId,
        keyId: ctx.caller.keyId,
        name: input.name,
        model: input.model ?? null,
        template: template ? { id: template.id, version: template.version } : undefined,
        concurrency: input.concurrency ?? DEFAULT_CONCURRENCY,
        status: 'queued',
        total: input.cases.length,
        createdAt: now,
      },
    });
    // newId is strictly increasing within a process: the case ids sort in case order.
    await tx.evalCase.createMany({
      data: input.cases.map((c, index) => {
        const { id, ...rest } = c;
        return { id: newId('evc', now.getTime()), runId, index, caseId: id ?? `case_${index + 1}`, input: rest as Prisma.InputJsonObject };
      }),
    });
    await recordAudit(tx, ctx, 'eval_run.create', { projectId, targetId: runId, data: { name: input.name, model: input.model ?? null, template: template ? { id: template.id, version: template.version } : null, cases: input.cases.length } });
    return created;
  });
  return { ...run, summary: { total: run.total, passed: 0, failed: 0, errored: 0, costMicros: 0n, latencyP50Ms: null } };
}

async function withSummary(db: Db | Tx, run: EvalRun): Promise<EvalRunView> {
  return { ...run, summary: await store.summaryOf(db, run) };
}

/** GET /v1/evals: newest first; a key sees its own project's runs. */
export async function listEvalRuns(ctx: Ctx, raw: unknown): Promise<Page<EvalRunView>> {
  const query = parseInput(ListEvalRunsQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where: Prisma.EvalRunWhereInput = { ...(projectId !== undefined ? { projectId } : {}), ...(query.status ? { status: query.status } : {}) };
  const page = await pageById(query, ctx.db.evalRun, where);
  return { ...page, data: await Promise.all(page.data.map((r) => withSummary(ctx.db, r))) };
}

/** Another project's run looks absent (404). */
async function findVisible(ctx: Ctx, runId: string): Promise<EvalRun> {
  const projectId = await visibleProjectId(ctx, null);
  const run = await store.findRun(ctx.db, runId, projectId);
  if (!run) throw new SvcError('not_found', { param: 'eval_id', message: 'No such evaluation run.' });
  addressed(ctx, run.projectId);
  return run;
}

export async function getEvalRun(ctx: Ctx, runId: string): Promise<EvalRunView> {
  return withSummary(ctx.db, await findVisible(ctx, runId));
}

/** GET /v1/evals/{id}/results: one result per case, in case order. */
export async function listEvalResults(ctx: Ctx, runId: string, raw: unknown = {}): Promise<Page<EvalCase>> {
  const query = parseInput(ListEvalResultsQuery, raw ?? {});
  if (query.project_id !== undefined) await visibleProjectId(ctx, query.project_id);
  const run = await findVisible(ctx, runId);
  return store.pageCases(ctx.db, run.id, query);
}

/** eval.run.completed's data (CONTRACT §14). */
export function completedEventData(run: Pick<EvalRun, 'id' | 'status'>, s: EvalSummary): Prisma.InputJsonObject {
  return { eval_id: run.id, status: run.status, passed: s.passed, failed: s.failed, errored: s.errored, cost_usd: microsToUsd(s.costMicros) };
}

/**
 * POST /v1/evals/{id}/cancel: a queued or running run becomes canceled at once; cases not finished are `skipped` (a
 * case already at the provider still records its result, and the worker stops before the next). Canceling a canceled
 * run returns it unchanged; a completed or failed one is 400. Audits eval_run.cancel; emits eval.run.completed with
 * status canceled.
 */
export async function cancelEvalRun(ctx: Ctx, runId: string, raw: unknown = {}): Promise<EvalRunView> {
  const input = parseInput(CancelEvalRun, raw ?? {});
  if (input.project_id) await visibleProjectId(ctx, input.project_id);
  const run = await findVisible(ctx, runId);
  if (run.status === 'canceled') return withSummary(ctx.db, run);
  if (store.isTerminal(run.status)) throw invalid('eval_id', `This evaluation run is already ${run.status}.`);
  const now = ctx.now();
  const updated = await ctx.db.$transaction(async (tx) => {
    const { count } = await tx.evalRun.updateMany({ where: { id: run.id, status: { in: ['queued', 'running'] } }, data: { status: 'canceled', completedAt: now } });
    if (count === 0) return null;
    await tx.evalCase.updateMany({ where: { runId: run.id, status: { in: ['pending', 'started'] } }, data: { status: 'skipped', reason: 'The run was canceled.' } });
    const summary = await store.summarize(tx, run);
    const row = await tx.evalRun.update({ where: { id: run.id }, data: store.summaryColumns(summary) });
    await recordAudit(tx, ctx, 'eval_run.cancel', { projectId: run.projectId, targetId: run.id, data: { status_before: run.status } });
    await enqueueEvent(tx, now, run.projectId, 'eval.run.completed', completedEventData(row, summary));
    return row;
  });
  // The worker finished it meanwhile: show what it is.
  return withSummary(ctx.db, updated ?? (await findVisible(ctx, runId)));
}

/**
 * The worker's end of a run it holds (jobs/eval-runner): the final summary, the status, and eval.run.completed, in one
 * transaction; only while the run is still running under this worker's lease (a cancel or another worker wins).
 */
export async function finishEvalRun(
  db: Db,
  run: Pick<EvalRun, 'id' | 'projectId' | 'total'>,
  owner: string,
  now: Date,
  outcome: { status: Exclude<EvalStatus, 'queued' | 'running' | 'canceled'>; error?: { code: string; message: string } },
): Promise<boolean> {
  return db.$transaction(async (tx) => {
    const summary = await store.summarize(tx, run);
    const ended = await releaseLease(tx, 'eval_runs', { id: run.id, owner }, {
      where: { status: 'running' },
      data: { status: outcome.status, completedAt: now, error: outcome.error ?? undefined, ...store.summaryColumns(summary) },
    });
    if (!ended) return false;
    await enqueueEvent(tx, now, run.projectId, 'eval.run.completed', completedEventData({ id: run.id, status: outcome.status }, summary));
    return true;
  });
}

/** After a cancel: the results that came in from cases already at the provider, counted into the stored figures. */
export async function refreshCanceledSummary(db: Db, run: Pick<EvalRun, 'id' | 'total'>): Promise<void> {
  const summary = await store.summarize(db, run);
  await db.evalRun.updateMany({ where: { id: run.id, status: 'canceled' }, data: store.summaryColumns(summary) });
}
