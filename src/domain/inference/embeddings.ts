import { invalid } from '../../errors/svc-error.ts';
import { countTextTokens, type RateLimitTicket } from '../../limits/index.ts';
import { requireProjectId, type Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import { EmbeddingsRequest } from './schema.ts';
import { parseInput } from './validate.ts';
import { account } from './account.ts';
import { admit, plan } from './admit.ts';
import { refuseOrRecord, Tracker } from './tracker.ts';
import type { InferenceResult, Validated } from './types.ts';
import { bindCustomer } from '../customers/inference-stage.ts';
import { assertModelAllowed } from '../auth/actions.ts';

export interface EmbeddingsOutcome {
  result: InferenceResult;
  /** One vector per input, in input order. */
  vectors: number[][];
}

/**
 * POST /v1/embeddings (CONTRACT §9): a model of type embedding, on the same pipeline as chat (project state,
 * residency, budget, token reservation, fallback, spend, usage record and inference.completed); cost on input tokens.
 * Never cached.
 */
export async function createEmbeddings(
  ports: InferencePorts,
  ctx: Ctx,
  ticket: RateLimitTicket,
  raw: EmbeddingsRequest,
): Promise<EmbeddingsOutcome> {
  const input = parseInput(EmbeddingsRequest, raw);
  const type = ports.providers.modelType(input.model);
  if (type === undefined) throw invalid('model', `Unknown model "${input.model.slice(0, 200)}". GET /v1/models lists the models.`);
  if (type !== 'embedding') throw invalid('model', `${input.model.slice(0, 200)} is a chat model: POST /v1/embeddings needs a model of type embedding.`);
  // CONTRACT §22: a key without a model list may use every model.
  if (ctx.caller.models) assertModelAllowed(ctx.caller.models, input.model, ports.providers.routesForModel(input.model));
  const texts = typeof input.input === 'string' ? [input.input] : input.input;
  texts.forEach((text, i) => {
    if (text === '') throw invalid(typeof input.input === 'string' ? 'input' : `input[${i}]`, 'input must not be empty.');
  });
  if (input.metadata && Object.keys(input.metadata).length > 50) throw invalid('metadata', 'metadata may hold at most 50 keys.');
  const v: Validated = {
    kind: 'embedding',
    model: input.model,
    // For the reservation's estimate: the inputs as texts, nothing to complete.
    messages: texts.map((content) => ({ role: 'user', content })),
    maxTokens: 0,
    sampling: {},
    options: undefined,
    extraTokens: 0,
    cacheTtlS: 0,
    region: input.region ?? null,
  };
  const projectId = await requireProjectId(ctx, input.project_id ?? ctx.caller.projectId);
  ticket.address(projectId);
  const customer = await bindCustomer(ports.budgets.customers, ctx, ticket, projectId, input.user);
  const t = new Tracker(ports, ctx, ticket, projectId, v.model);
  t.customer = customer;
  try {
    const p = await plan(ctx, t, v);
    await admit(ctx, t, v, p);
    t.admittedAt = performance.now();
    let routed;
    try {
      routed = await ports.providers.embed(p.routes, {
        input: texts,
        ...(input.dimensions !== undefined ? { dimensions: input.dimensions } : {}),
        ...(input.user != null ? { user: input.user } : {}),
      }, undefined, t.hopLog());
    } catch (err) {
      await ticket.refund();
      throw err;
    }
    t.tried(routed.route);
    let promptTokens = routed.value.usage?.promptTokens;
    if (promptTokens === undefined) {
      promptTokens = 0;
      for (const text of texts) promptTokens += await countTextTokens(text);
    }
    const result = await account(t, v, p, routed.route, { content: '', finishReason: 'stop', usage: { promptTokens, completionTokens: 0 } }, 'off', {
      status: 'succeeded',
    });
    return { result, vectors: routed.value.vectors };
  } catch (err) {
    await refuseOrRecord(t, err);
    throw err;
  }
}
