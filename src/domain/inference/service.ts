import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import {
  countPromptTokens,
  countTextTokens,
  estimateTokens,
  isRequestWindowRefusal,
  type RateLimitTicket,
} from '../../limits/index.ts';
import { costMicros } from '../../providers/pricing.ts';
import { isAbortError, RoutingError, type Route } from '../../providers/router.ts';
import type { ChatMessage, ChatRole, Completion, ProviderUsage, Sampling, StreamPart } from '../../providers/types.ts';
import type { Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import { requireProjectId } from '../tenancy.ts';
import { assertWithinBudget, chargeSpend, type SpendCharge } from '../budgets/service.ts';
import { cacheKey, DEFAULT_CACHE_TTL_S, MAX_CACHE_TTL_S, type CachedAnswer } from './cache.ts';

/** CONTRACT §8's request, plus the OpenAI sampling parameters /v1/chat/completions passes through. */
export interface InferenceInput extends Sampling {
  model: string;
  project_id?: string | null;
  messages: unknown;
  max_tokens?: number | null;
  stream?: boolean | null;
  /** true: cache with the policy's TTL (or 300 s); a number: cache for that many seconds; false: never. */
  cache?: boolean | number | null;
  region?: string | null;
  metadata?: Record<string, unknown> | null;
}

/** `off`: caching not asked for; `unavailable`: asked for, but the store did not answer (the request went on uncached). */
export type CacheStatus = 'off' | 'hit' | 'miss' | 'unavailable';

export interface InferenceResult {
  id: string;
  requestId: string;
  createdAt: Date;
  model: string;
  route: string;
  region: string;
  cacheHit: boolean;
  cacheStatus: CacheStatus;
  content: string;
  finishReason: string;
  promptTokens: number;
  completionTokens: number;
  costMicros: bigint;
}

export type StreamEvent =
  | { type: 'delta'; content: string }
  | { type: 'done'; result: InferenceResult }
  | { type: 'error'; error: SvcError };

export interface InferenceStream {
  /** What is known before the first token: enough for response headers and a first SSE event. */
  head: Omit<InferenceResult, 'content' | 'finishReason' | 'promptTokens' | 'completionTokens' | 'costMicros'>;
  /** Deltas, then one `done` (or `error`). Accounting runs however it ends, the consumer stopping early included. */
  events: AsyncGenerator<StreamEvent>;
}

const ROLES: readonly ChatRole[] = ['system', 'user', 'assistant'];
const REGION_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
const MAX_MESSAGES = 2_000;

interface Validated {
  model: string;
  messages: ChatMessage[];
  maxTokens: number | undefined;
  sampling: Sampling;
  /** null: not asked (the routing policy may still cache); 0: never; else a TTL in seconds. */
  cacheTtlS: number | null;
  region: string | null;
}

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** max_tokens (or OpenAI's max_completion_tokens, named by `param`): an integer from 1 to 1,000,000 when given. */
export function assertMaxTokens(value: number | null | undefined, param: string): void {
  if (value !== undefined && value !== null && (!Number.isInteger(value) || value < 1 || value > 1_000_000)) {
    throw invalid(param, `${param} must be an integer from 1 to 1000000.`);
  }
}

/** Everything a request can get wrong by itself; the errors name the parameter (`messages[2].role`). */
export function validateInference(ports: InferencePorts, ctx: Ctx, input: InferenceInput): Validated {
  if (typeof input.model !== 'string' || input.model === '') throw invalid('model', 'model is required: a model id or "auto".');
  if (input.model !== 'auto' && !ports.providers.isKnownModel(input.model)) {
    throw invalid('model', `Unknown model "${input.model.slice(0, 200)}". GET /v1/models lists the models; "auto" routes by policy.`);
  }
  const raw = input.messages;
  if (!Array.isArray(raw) || raw.length === 0) throw invalid('messages', 'messages must be a non-empty array.');
  if (raw.length > MAX_MESSAGES) throw invalid('messages', `messages may hold at most ${MAX_MESSAGES} entries.`);
  const messages = raw.map((m, i): ChatMessage => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw invalid(`messages[${i}]`, 'Each message must be an object {role, content}.');
    const msg = m as Record<string, unknown>;
    for (const k of Object.keys(msg)) {
      if (k !== 'role' && k !== 'content') throw invalid(`messages[${i}].${k}`, `Unknown parameter: messages[${i}].${k}.`);
    }
    if (typeof msg.role !== 'string' || !ROLES.includes(msg.role as ChatRole)) {
      throw invalid(`messages[${i}].role`, 'role must be one of system, user, assistant.');
    }
    if (typeof msg.content !== 'string') throw invalid(`messages[${i}].content`, 'content must be a string.');
    return { role: msg.role as ChatRole, content: msg.content };
  });

  const maxTokens = input.max_tokens ?? undefined;
  assertMaxTokens(maxTokens, 'max_tokens');
  const sampling: Sampling = {};
  const range = (name: keyof Sampling, lo: number, hi: number) => {
    const v = input[name];
    if (v === undefined || v === null) return;
    if (!isNum(v) || v < lo || v > hi) throw invalid(name, `${name} must be a number from ${lo} to ${hi}.`);
    (sampling as Record<string, unknown>)[name] = v;
  };
  range('temperature', 0, 2);
  range('top_p', 0, 1);
  range('presence_penalty', -2, 2);
  range('frequency_penalty', -2, 2);
  if (input.seed !== undefined && input.seed !== null) {
    if (!Number.isInteger(input.seed)) throw invalid('seed', 'seed must be an integer.');
    sampling.seed = input.seed;
  }
  if (input.stop !== undefined && input.stop !== null) {
    const stop = input.stop;
    const ok = typeof stop === 'string' || (Array.isArray(stop) && stop.length <= 4 && stop.every((s) => typeof s === 'string'));
    if (!ok) throw invalid('stop', 'stop must be a string or an array of at most 4 strings.');
    sampling.stop = stop;
  }

  let cacheTtlS: number | null = null;
  const cache = input.cache;
  if (cache === true) cacheTtlS = -1; // resolved against the policy below
  else if (cache === false) cacheTtlS = 0;
  else if (cache !== undefined && cache !== null) {
    if (!Number.isInteger(cache) || cache < 1 || cache > MAX_CACHE_TTL_S) {
      throw invalid('cache', `cache must be true, false, or a TTL in whole seconds from 1 to ${MAX_CACHE_TTL_S}.`);
    }
    cacheTtlS = cache;
  }

  const region = input.region ?? null;
  if (region !== null && (typeof region !== 'string' || !REGION_RE.test(region))) {
    throw invalid('region', 'region must be a lower-case region name such as eu-west-1.');
  }
  const metadata = input.metadata;
  if (metadata !== undefined && metadata !== null) {
    const entries = Object.entries(metadata);
    if (entries.length > 50) throw invalid('metadata', 'metadata may hold at most 50 keys.');
    for (const [k, v] of entries) {
      if (k.length < 1 || k.length > 40) throw invalid('metadata', 'metadata keys must be 1 to 40 characters.');
      if (typeof v !== 'string' || v.length > 500) throw invalid(`metadata.${k}`, 'metadata values must be strings of at most 500 characters.');
    }
  }
  return { model: input.model, messages, maxTokens, sampling, cacheTtlS, region };
}

/** One inference from start to its usage record: what is known so far about where it went and how it ended. */
class Tracker {
  readonly startedAt = performance.now();
  readonly createdAt: Date;
  readonly id: string;
  model: string;
  route: string | null = null;
  region: string | null = null;
  private recorded = false;

  constructor(
    readonly ports: InferencePorts,
    readonly ctx: Ctx,
    /** The request's rate-limit ticket: this inference owns it (reserve, settle, take the deferred request). */
    readonly ticket: RateLimitTicket,
    readonly projectId: string,
    requestedModel: string,
  ) {
    this.createdAt = ctx.now();
    this.id = newId('inf', this.createdAt.getTime());
    this.model = requestedModel;
  }

  tried(route: Route | null): void {
    if (!route) return;
    this.route = route.id;
    this.model = route.model.id;
    this.region = route.provider.region;
  }

  /**
   * Exactly once per inference (CONTRACT §8): hands the outcome to the outcome writer, which has it durably when this
   * resolves (a Redis stream entry or the in-process batch; written to PostgreSQL in a batch off the request path).
   * A failed write is logged by the writer, never the caller's error.
   */
  async record(o: {
    status: 'succeeded' | 'failed';
    errorCode: string | null;
    cacheHit?: boolean;
    promptTokens?: number;
    completionTokens?: number;
    costMicros?: bigint;
    spend?: SpendCharge | null;
  }): Promise<void> {
    if (this.recorded) return;
    this.recorded = true;
    await this.ports.outcomes.record({
      requestId: this.ctx.requestId,
      projectId: this.projectId,
      keyId: this.ctx.caller.keyId,
      model: this.model,
      route: this.route,
      region: this.region,
      cacheHit: o.cacheHit ?? false,
      status: o.status,
      errorCode: o.errorCode,
      promptTokens: o.promptTokens ?? 0,
      completionTokens: o.completionTokens ?? 0,
      costMicros: o.costMicros ?? 0n,
      latencyMs: Math.round(performance.now() - this.startedAt),
      createdAt: this.createdAt,
      eventId: newId('evt', this.createdAt.getTime()),
      spend: o.spend ?? null,
    });
  }

  async fail(err: unknown): Promise<void> {
    if (err instanceof RoutingError) this.tried(err.route);
    await this.record({ status: 'failed', errorCode: errorCodeOf(err) });
  }
}

/** The usage record's error_code: the spec's code, or `client_disconnected` when the caller went away. */
function errorCodeOf(err: unknown): string {
  if (err instanceof SvcError) return err.code;
  if (isAbortError(err)) return 'client_disconnected';
  return 'internal_error';
}

interface Plan {
  routes: Route[];
  /** Region constraint: the project's pin, else the request's region, else none. */
  region: string | null;
  cache: { key: string; ttlS: number } | null;
  /** The project's monthly budget, from the project cache (the budget check needs no other read for it). */
  projectBudgetMicros: bigint | null;
}

/**
 * Project state and residency, then the routes (named model: its providers, cheapest first; "auto": the project's
 * default routing policy, else every route cheapest first). A pinned project is only routed to providers of its
 * region; a request naming another region is a residency_violation. The project and its policy come from the project
 * cache (no SQL in the steady state); the budget is checked next, in admit().
 */
async function plan(ctx: Ctx, t: Tracker, v: Validated): Promise<Plan> {
  const project = await t.ports.projects.get(t.projectId);
  if (!project) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
  t.region = project.region ?? v.region;
  if (project.status === 'archived') throw new SvcError('project_archived', { param: 'project_id' });
  if (project.region !== null && v.region !== null && v.region !== project.region) {
    throw new SvcError('residency_violation', {
      param: 'region',
      message: `The project is pinned to region ${project.region}; the request asked for ${v.region}.`,
    });
  }
  const region = project.region ?? v.region;
  const registry = t.ports.providers;
  let routes: Route[];
  let policyTtlS: number | null = null;
  if (v.model === 'auto') {
    const policy = project.defaultPolicy;
    routes = policy ? registry.planRoutes(policy.strategy, policy.targets) : registry.cheapestRoutes();
    policyTtlS = policy?.cacheTtlS ?? null;
  } else {
    routes = registry.routesForModel(v.model);
  }
  if (region !== null) routes = routes.filter((r) => r.provider.region === region);
  if (routes.length === 0) {
    const what = v.model === 'auto' ? 'the routing policy\'s targets' : v.model;
    throw new RoutingError('model_unavailable', null, `No configured provider serves ${what}${region ? ` in region ${region}` : ''}.`);
  }
  let ttlS: number | null = v.cacheTtlS === -1 ? (policyTtlS ?? DEFAULT_CACHE_TTL_S) : v.cacheTtlS === null ? policyTtlS : v.cacheTtlS;
  if (ttlS === 0) ttlS = null;
  const cache =
    ttlS === null
      ? null
      : { key: cacheKey({ model: v.model, region, messages: v.messages, maxTokens: v.maxTokens, sampling: v.sampling }), ttlS };
  return { routes, region, cache, projectBudgetMicros: project.budgetMicros };
}

type Lookup = { status: CacheStatus; answer?: CachedAnswer };

async function lookup(ports: InferencePorts, projectId: string, p: Plan): Promise<Lookup> {
  if (!p.cache) return { status: 'off' };
  const found = await ports.responseCache.get(projectId, p.cache.key);
  return found.status === 'hit' ? { status: 'hit', answer: found.answer } : { status: found.status };
}

const NO_CACHE: Lookup = { status: 'off' };

/**
 * The budget check, the response cache lookup (when caching) and the token reservation, which also takes the request
 * deferred by the rate-limit hook. They are asked in the same turn of the event loop, so their Redis operations
 * travel in ONE script call (limits/redis-batch.ts): the budget counters' read, the cache's get and the limiter's
 * windows. The reservation is asked for before the lookup is known: a hit takes no tokens, so it gives them back with
 * its outcome, after (serveHit); a hit whose reservation was refused for tokens had its request taken alone, as a hit
 * needs. A request over budget gets 429 budget_exceeded (never rate_limit_exceeded, unless its request window was
 * exhausted: that check came first before the deferral) and any tokens taken meanwhile are given back.
 */
async function admit(ctx: Ctx, t: Tracker, v: Validated, p: Plan): Promise<{ cached: Lookup; reserved: boolean }> {
  const ticket = t.ticket;
  const [budget, reserved, cached] = await Promise.allSettled([
    assertWithinBudget(t.ports.budgets, ctx, p.projectBudgetMicros),
    ticket.reserve(estimateTokens(v.messages, v.maxTokens)),
    p.cache ? lookup(t.ports, t.projectId, p) : NO_CACHE,
  ]);
  if (budget.status === 'rejected' || cached.status === 'rejected') {
    if (reserved.status === 'rejected' && isRequestWindowRefusal(reserved.reason)) throw reserved.reason;
    // As if the budget had been checked alone: the response describes the windows with no tokens taken (the
    // withdrawal's state, or the request window's when the hook took the request).
    await ticket.withdraw();
    throw budget.status === 'rejected' ? budget.reason : (cached as PromiseRejectedResult).reason;
  }
  if (cached.value.answer) {
    // A hit needs only its request: a request window refusal stands, a token window refusal does not.
    if (reserved.status === 'rejected' && isRequestWindowRefusal(reserved.reason)) throw reserved.reason;
    return { cached: cached.value, reserved: false };
  }
  if (reserved.status === 'rejected') throw reserved.reason;
  return { cached: cached.value, reserved: true };
}

async function tokensOf(v: Validated, content: string, usage: ProviderUsage | null): Promise<ProviderUsage> {
  if (usage) return usage;
  return { promptTokens: await countPromptTokens(v.messages), completionTokens: await countTextTokens(content) };
}

async function begin(ports: InferencePorts, ctx: Ctx, ticket: RateLimitTicket, input: InferenceInput): Promise<{ v: Validated; t: Tracker }> {
  const v = validateInference(ports, ctx, input);
  const projectId = await requireProjectId(ctx, input.project_id);
  // The operator's inference draws on the project's windows from here on (CONTRACT §7).
  ticket.address(projectId);
  return { v, t: new Tracker(ports, ctx, ticket, projectId, v.model) };
}

function hitResult(ctx: Ctx, t: Tracker, answer: CachedAnswer): InferenceResult {
  return {
    id: t.id,
    requestId: ctx.requestId,
    createdAt: t.createdAt,
    model: answer.model,
    route: answer.route,
    region: answer.region,
    cacheHit: true,
    cacheStatus: 'hit',
    content: answer.content,
    finishReason: answer.finishReason,
    promptTokens: 0,
    completionTokens: 0,
    costMicros: 0n,
  };
}

/**
 * A cache hit: one request, zero tokens, zero cost (spec 8.1.3). The speculative reservation's tokens go back in the
 * same script call as the outcome's stream entry.
 */
async function serveHit(t: Tracker, answer: CachedAnswer): Promise<InferenceResult> {
  t.model = answer.model;
  t.route = answer.route;
  t.region = answer.region;
  await Promise.all([t.ticket.keepRequestOnly(), t.record({ status: 'succeeded', errorCode: null, cacheHit: true })]);
  return hitResult(t.ctx, t, answer);
}

/**
 * Settle the token reservation to what was used, charge the cost to the month counters, remember the answer, hand
 * the outcome (usage record and inference.completed) to the writer. Their Redis commands (the limiter's settle, the
 * counters' add, the stream's XADD, the cache's SET) leave together: one round trip, and no SQL.
 */
async function account(
  t: Tracker,
  v: Validated,
  p: Plan,
  route: Route,
  answer: { content: string; finishReason: string; usage: ProviderUsage },
  cacheStatus: CacheStatus,
  outcome: { status: 'succeeded' } | { status: 'failed'; errorCode: string },
): Promise<InferenceResult> {
  const ctx = t.ctx;
  const { promptTokens, completionTokens } = answer.usage;
  const cost = costMicros(promptTokens, completionTokens, route.model);
  const spend = chargeSpend(t.ports.budgets, ctx, t.projectId, cost, p.projectBudgetMicros);
  const settled = t.ticket.settle(promptTokens + completionTokens);
  const stored =
    outcome.status === 'succeeded' && p.cache && cacheStatus === 'miss'
      ? t.ports.responseCache.set(
          t.projectId,
          p.cache.key,
          { model: route.model.id, route: route.id, region: route.provider.region, content: answer.content, finishReason: answer.finishReason },
          p.cache.ttlS,
        )
      : null;
  const recorded = t.record({
    status: outcome.status,
    errorCode: outcome.status === 'failed' ? outcome.errorCode : null,
    promptTokens,
    completionTokens,
    costMicros: cost,
    spend: spend.charge,
  });
  const [, , , wasStored] = await Promise.all([settled, spend.added, recorded, stored]);
  const status = wasStored === false ? 'unavailable' : cacheStatus;
  return {
    id: t.id,
    requestId: ctx.requestId,
    createdAt: t.createdAt,
    model: route.model.id,
    route: route.id,
    region: route.provider.region,
    cacheHit: false,
    cacheStatus: status,
    content: answer.content,
    finishReason: answer.finishReason,
    promptTokens,
    completionTokens,
    costMicros: cost,
  };
}

/**
 * An inference that failed: its usage record, unless its request window refused it, which is the check that comes
 * before the inference (the deferred request is taken here if it is still pending, and throws that 429 instead).
 */
async function refuseOrRecord(t: Tracker, err: unknown): Promise<void> {
  await t.ticket.takeDeferred();
  if (isRequestWindowRefusal(err)) return;
  await t.fail(err);
}

/**
 * POST /v1/inference. Order: validation → project state and residency → budget → cache → token reservation →
 * provider (with fallback) → settle tokens, spend, usage record and inference.completed. Every inference that gets
 * past validation writes one usage record and emits one inference.completed, success or error. In the steady state
 * no SQL runs on the way: see admit() and account() for the Redis round trips (two besides the auth hook's).
 */
export async function createInference(ports: InferencePorts, ctx: Ctx, ticket: RateLimitTicket, input: InferenceInput): Promise<InferenceResult> {
  const { v, t } = await begin(ports, ctx, ticket, input);
  try {
    const p = await plan(ctx, t, v);
    const { cached, reserved } = await admit(ctx, t, v, p);
    if (cached.answer || !reserved) return await serveHit(t, cached.answer!);
    let routed;
    try {
      routed = await ports.providers.complete(p.routes, { messages: v.messages, maxTokens: v.maxTokens, sampling: v.sampling });
    } catch (err) {
      await ticket.refund();
      throw err;
    }
    t.tried(routed.route);
    const c: Completion = routed.value;
    const usage = await tokensOf(v, c.content, c.usage);
    return await account(t, v, p, routed.route, { ...c, usage }, cached.status, { status: 'succeeded' });
  } catch (err) {
    await refuseOrRecord(t, err);
    throw err;
  }
}

/**
 * `stream: true`. Errors before the first token are thrown (the caller answers with a normal error); afterwards the
 * events carry them. A consumer that stops early (client gone: `signal` aborts the provider call) still gets the usage
 * recorded, as failed with error_code client_disconnected, charging the tokens streamed so far.
 */
export async function streamInference(
  ports: InferencePorts,
  ctx: Ctx,
  ticket: RateLimitTicket,
  input: InferenceInput,
  signal: AbortSignal,
): Promise<InferenceStream> {
  const { v, t } = await begin(ports, ctx, ticket, input);
  let p: Plan;
  let cached: Lookup;
  let routed;
  try {
    p = await plan(ctx, t, v);
    const admitted = await admit(ctx, t, v, p);
    cached = admitted.cached;
    if (cached.answer || !admitted.reserved) {
      const result = await serveHit(t, cached.answer!);
      const { content: _c, finishReason: _f, promptTokens: _p, completionTokens: _ct, costMicros: _m, ...head } = result;
      return {
        head,
        events: (async function* () {
          yield { type: 'delta', content: result.content } as StreamEvent;
          yield { type: 'done', result };
        })(),
      };
    }
    try {
      routed = await ports.providers.openStream(p.routes, { messages: v.messages, maxTokens: v.maxTokens, sampling: v.sampling }, signal);
    } catch (err) {
      await ticket.refund();
      throw err;
    }
  } catch (err) {
    await refuseOrRecord(t, err);
    throw err;
  }
  t.tried(routed.route);
  const route = routed.route;
  const parts: AsyncIterable<StreamPart> = routed.value;
  const cacheStatus = cached.status;
  const head = {
    id: t.id,
    requestId: ctx.requestId,
    createdAt: t.createdAt,
    model: route.model.id,
    route: route.id,
    region: route.provider.region,
    cacheHit: false,
    cacheStatus,
  };

  async function* relay(): AsyncGenerator<StreamEvent> {
    let content = '';
    let finishReason = 'stop';
    let usage: ProviderUsage | null = null;
    let ended: 'ok' | 'aborted' | SvcError | null = null;
    let result: InferenceResult | null = null;
    try {
      for await (const part of parts) {
        if (part.type === 'delta') {
          content += part.content;
          yield { type: 'delta', content: part.content };
        } else if (part.type === 'finish') finishReason = part.finishReason;
        else usage = part.usage;
      }
      ended = 'ok';
    } catch (err) {
      ended = signal.aborted || isAbortError(err)
        ? 'aborted'
        : new SvcError('model_unavailable', { message: 'The model provider failed in the middle of the response.' });
    } finally {
      // Also reached when the consumer stops iterating (return() at a yield): that is the client leaving.
      ended ??= 'aborted';
      result = await account(
        t,
        v,
        p,
        route,
        { content, finishReason, usage: await tokensOf(v, content, usage) },
        cacheStatus,
        ended === 'ok'
          ? { status: 'succeeded' }
          : { status: 'failed', errorCode: ended === 'aborted' ? 'client_disconnected' : ended.code },
      );
    }
    if (ended === 'ok') yield { type: 'done', result };
    else if (ended instanceof SvcError) yield { type: 'error', error: ended };
  }
  return { head, events: relay() };
}
