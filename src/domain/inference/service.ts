import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import {
  countPromptTokens,
  countTextTokens,
  DEFAULT_COMPLETION_TOKENS,
  estimateTokens,
  isRequestWindowRefusal,
  type RateLimitTicket,
} from '../../limits/index.ts';
import { estimateTextTokens } from '../../limits/tokens.ts';
import { costMicros } from '../../providers/pricing.ts';
import { isAbortError, routesCarrying, RoutingError, type Route } from '../../providers/router.ts';
import type {
  ChatMessage,
  ChatOptions,
  Choice,
  Completion,
  FunctionTool,
  ProviderUsage,
  ResponseFormat,
  Sampling,
  StreamPart,
  ToolCall,
  ToolChoice,
} from '../../providers/types.ts';
import type { Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import { requireProjectId } from '../tenancy.ts';
import { assertWithinBudget, chargeSpend, type SpendCharge } from '../budgets/service.ts';
import { cacheKey, DEFAULT_CACHE_TTL_S, MAX_CACHE_TTL_S, type CachedAnswer } from './cache.ts';
import { EmbeddingsRequest, InferenceRequest, parseInput } from './schema.ts';
import { applyRag, type Citation } from '../rag/stage.ts';
import { finishPrivacy, planPrivacy, privacyReady, restoreStream, retainedRecord, type PrivacyPlan, type RetainedResult } from '../privacy/stage.ts';
import type { PiiCounts } from '../privacy/pii.ts';
import { applyTemplate, type AppliedTemplate } from '../templates/inference-stage.ts';
import { askUntilValid, failureMessage, NO_TALLY, outputCheck, type OutputCheck, type Tally } from './stages/structured-output.ts';

/** CONTRACT §8/§9's request: OpenAI's chat-completions request plus the svc fields (schema.ts). */
export type InferenceInput = InferenceRequest;

/** `off`: caching not asked for; `unavailable`: asked for, but the store did not answer (the request went on uncached). */
export type CacheStatus = 'off' | 'hit' | 'miss' | 'unavailable';

/** The answer: what its retained record keeps (RetainedResult), and more. */
export interface InferenceResult extends RetainedResult {
  cacheStatus: CacheStatus;
  /** Choice 0's tool calls, when the model called tools. */
  toolCalls?: ToolCall[];
  /** Choice 0's logprobs, as the provider gave them, when asked for. */
  logprobs?: unknown;
  /** Every choice, when the request asked for n > 1. */
  choices?: Choice[];
  /** The `rag` option's sources (CONTRACT §13), when asked for. */
  citations?: Citation[];
  /** CONTRACT §11: what PII redaction replaced, when it ran. */
  pii?: { redacted: PiiCounts };
  /** The prompt template the request used (CONTRACT §10). */
  template?: AppliedTemplate;
  /** With a JSON response_format: how many answers it took (CONTRACT §11). */
  attempts?: number;
}

export type StreamEvent =
  | { type: 'delta'; content: string; choice?: number }
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments: string; choice?: number }
  | { type: 'logprobs'; logprobs: unknown; choice?: number }
  | { type: 'done'; result: InferenceResult }
  | { type: 'error'; error: SvcError };

export interface InferenceStream {
  /** What is known before the first token: enough for response headers and a first SSE event. */
  head: Omit<InferenceResult, 'content' | 'finishReason' | 'promptTokens' | 'completionTokens' | 'costMicros'>;
  /** Deltas, then one `done` (or `error`). Accounting runs however it ends, the consumer stopping early included. */
  events: AsyncGenerator<StreamEvent>;
}

/** How a surface addresses the project: /v1/inference needs project_id (or X-Svc-Project); the OpenAI surface
 *  defaults to the key's own project. */
export interface InferenceSurface {
  projectFromKey?: boolean;
}

interface Validated {
  /** Chat routes may refuse fields (Provider.unsupported); embedding routes serve /v1/embeddings only. */
  kind: 'chat' | 'embedding';
  model: string;
  messages: ChatMessage[];
  maxTokens: number | undefined;
  sampling: Sampling;
  /** The rest of the chat-completions request; undefined for a plain request. */
  options: ChatOptions | undefined;
  /** Tokens the messages' text does not show (tool definitions, tool-call arguments, images, a response schema,
   *  the completions of n > 1): added to the reservation and to a count the provider did not report. */
  extraTokens: number;
  /** null: not asked (the routing policy may still cache); 0: never; else a TTL in seconds. */
  cacheTtlS: number | null;
  region: string | null;
  /** CONTRACT §11: the request's pii option (domain/privacy). */
  pii?: InferenceRequest['pii'];
  /** The answer's check for a JSON response_format (stages/structured-output.ts); null: none asked. */
  output?: OutputCheck | null;
}

/** OpenAI's own figure for an image part at low detail; a provider's reported usage settles it. */
const IMAGE_TOKENS = 85;

function refuseMessage(i: number, field: string, message: string): never {
  throw invalid(`messages[${i}]${field}`, message);
}

/**
 * What the schema cannot say about messages: which fields each role takes. Returns the extra tokens of tool calls
 * and images (0 for plain text). The messages are used as given (the schema's shape is the provider request's).
 */
function checkMessages(messages: ChatMessage[]): number {
  let extra = 0;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    const content = m.content;
    if (m.role === 'assistant') {
      if ((content === undefined || content === null) && !m.tool_calls) {
        refuseMessage(i, '.content', 'An assistant message needs content or tool_calls.');
      }
      if (m.tool_calls) for (const c of m.tool_calls) extra += estimateTextTokens(c.function.name) + estimateTextTokens(c.function.arguments) + 3;
    } else {
      if (content === undefined || content === null) refuseMessage(i, '.content', `A ${m.role} message needs content.`);
      if (m.tool_calls) refuseMessage(i, '.tool_calls', 'Only assistant messages carry tool_calls.');
    }
    if (m.role === 'tool') {
      if (m.tool_call_id === undefined) refuseMessage(i, '.tool_call_id', 'A tool message needs the tool_call_id of the call it answers.');
    } else if (m.tool_call_id !== undefined) refuseMessage(i, '.tool_call_id', 'Only tool messages carry tool_call_id.');
    if (typeof content !== 'string' && content) {
      for (let j = 0; j < content.length; j++) {
        if (content[j]!.type !== 'image_url') continue;
        if (m.role !== 'user') refuseMessage(i, `.content[${j}]`, 'Image parts are only allowed in user messages.');
        extra += IMAGE_TOKENS;
      }
    }
  }
  return extra;
}

/**
 * Everything a request can get wrong by itself; the errors name the parameter (`messages[2].role`). The shape was
 * checked against the schema (by the route's validator, or here); this adds the rules between fields.
 */
export function validateInference(ports: InferencePorts, ctx: Ctx, raw: InferenceInput): Validated {
  const input = parseInput(InferenceRequest, raw);
  if (input.model === undefined) throw invalid('model', 'Missing required parameter: model.');
  if (input.messages === undefined) throw invalid('messages', 'Missing required parameter: messages.');
  if (input.model === '') throw invalid('model', 'model is required: a model id or "auto".');
  if (input.model !== 'auto') {
    const type = ports.providers.modelType(input.model);
    if (type === undefined) {
      throw invalid('model', `Unknown model "${input.model.slice(0, 200)}". GET /v1/models lists the models; "auto" routes by policy.`);
    }
    if (type !== 'chat') throw invalid('model', `${input.model.slice(0, 200)} is an embedding model: use POST /v1/embeddings.`);
  }
  const messages = input.messages as ChatMessage[];
  let extraTokens = checkMessages(messages);

  const maxTokens = input.max_completion_tokens ?? input.max_tokens ?? undefined;
  const sampling: Sampling = {};
  if (input.temperature != null) sampling.temperature = input.temperature;
  if (input.top_p != null) sampling.top_p = input.top_p;
  if (input.presence_penalty != null) sampling.presence_penalty = input.presence_penalty;
  if (input.frequency_penalty != null) sampling.frequency_penalty = input.frequency_penalty;
  if (input.seed != null) sampling.seed = input.seed;
  if (input.stop != null) sampling.stop = input.stop;
  if (input.stream_options != null && input.stream !== true) {
    throw invalid('stream_options', 'stream_options is only allowed when stream is true.');
  }

  let options: ChatOptions | undefined;
  const tools = input.tools as FunctionTool[] | undefined;
  if (tools !== undefined) {
    options = { tools };
    const names = new Set<string>();
    tools.forEach((t, i) => {
      if (names.has(t.function.name)) throw invalid(`tools[${i}].function.name`, `Tool name "${t.function.name}" is used twice.`);
      names.add(t.function.name);
    });
    extraTokens += estimateTextTokens(JSON.stringify(tools));
  }
  if (input.tool_choice !== undefined) {
    const choice = input.tool_choice as ToolChoice;
    if (tools === undefined && choice !== 'none') throw invalid('tool_choice', 'tool_choice is only allowed when tools are given.');
    if (typeof choice === 'object' && !tools!.some((t) => t.function.name === choice.function.name)) {
      throw invalid('tool_choice', `tool_choice names "${choice.function.name}", which is not among the tools.`);
    }
    (options ??= {}).tool_choice = choice;
  }
  if (input.parallel_tool_calls != null) (options ??= {}).parallel_tool_calls = input.parallel_tool_calls;
  if (input.response_format !== undefined) {
    const format = input.response_format as ResponseFormat;
    (options ??= {}).response_format = format;
    if (format.type === 'json_schema' && format.json_schema.schema) extraTokens += estimateTextTokens(JSON.stringify(format.json_schema.schema));
  }
  if (input.n != null) {
    (options ??= {}).n = input.n;
    extraTokens += (input.n - 1) * (maxTokens ?? DEFAULT_COMPLETION_TOKENS);
  }
  if (input.logit_bias != null) (options ??= {}).logit_bias = input.logit_bias;
  if (input.logprobs != null) (options ??= {}).logprobs = input.logprobs;
  if (input.top_logprobs != null) {
    if (input.logprobs !== true) throw invalid('top_logprobs', 'top_logprobs needs logprobs: true.');
    (options ??= {}).top_logprobs = input.top_logprobs;
  }
  if (input.user != null) (options ??= {}).user = input.user;
  if (input.reasoning_effort != null) (options ??= {}).reasoning_effort = input.reasoning_effort;

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

  const metadata = input.metadata;
  if (metadata !== undefined && metadata !== null) {
    const keys = Object.keys(metadata);
    if (keys.length > 50) throw invalid('metadata', 'metadata may hold at most 50 keys.');
    for (const k of keys) if (k.length < 1 || k.length > 40) throw invalid('metadata', 'metadata keys must be 1 to 40 characters.');
  }
  return { kind: 'chat', model: input.model, messages, maxTokens, sampling, options, extraTokens, cacheTtlS, region: input.region ?? null, pii: input.pii };
}

/** Tokens to reserve before the provider call: the messages' estimate, plus what their text does not show. */
function reservationOf(v: Validated): number {
  return estimateTokens(v.messages, v.maxTokens) + v.extraTokens;
}

/** One inference from start to its usage record: what is known so far about where it went and how it ended. */
class Tracker {
  readonly startedAt = performance.now();
  readonly createdAt: Date;
  readonly id: string;
  model: string;
  /** The `rag` option's sources, carried into the result. */
  citations: Citation[] | undefined;
  route: string | null = null;
  region: string | null = null;
  /** Redaction and retention (domain/privacy/stage.ts), from the plan step on. */
  privacy: PrivacyPlan | null = null;
  template: AppliedTemplate | null = null;
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
    result?: RetainedResult;
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
      retained: this.privacy ? retainedRecord(this.privacy, this.id, this.createdAt, o.status, o.result ?? null) : null,
      ...(this.template ? { templateId: this.template.id, templateVersion: this.template.version } : {}),
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
  if (v.kind === 'chat') {
    const ready = privacyReady(project, v.pii);
    if (ready) await ready;
    ({ plan: t.privacy, messages: v.messages } = planPrivacy(t.ports.privacy, ctx, project, v.model, v.messages, v.pii));
  }
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
  // A field a provider kind cannot carry skips its routes; none left: the field is the caller's to drop (CONTRACT §9).
  const carried = v.kind === 'chat' ? routesCarrying(routes, v) : { routes, refused: null };
  if (carried.routes.length === 0) {
    const kinds = [...new Set(routes.map((r) => r.provider.kind))].join(', ');
    throw invalid(carried.refused, `${carried.refused} is not supported by the provider kind (${kinds}) serving ${v.model}.`);
  }
  routes = carried.routes;
  let ttlS: number | null = v.cacheTtlS === -1 ? (policyTtlS ?? DEFAULT_CACHE_TTL_S) : v.cacheTtlS === null ? policyTtlS : v.cacheTtlS;
  if (ttlS === 0) ttlS = null;
  const cache =
    ttlS === null || t.privacy?.zero
      ? null
      : { key: cacheKey({ model: v.model, region, messages: v.messages, maxTokens: v.maxTokens, sampling: v.sampling, options: v.options }), ttlS };
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
    ticket.reserve(reservationOf(v)),
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

async function tokensOf(v: Validated, content: string, usage: ProviderUsage | null, toolCalls?: ToolCall[], messages = v.messages): Promise<ProviderUsage> {
  if (usage) return usage;
  let completion = await countTextTokens(content);
  if (toolCalls) for (const c of toolCalls) completion += (await countTextTokens(c.function.name + c.function.arguments)) + 3;
  return { promptTokens: (await countPromptTokens(messages)) + v.extraTokens, completionTokens: completion };
}

async function begin(
  ports: InferencePorts,
  ctx: Ctx,
  ticket: RateLimitTicket,
  input: InferenceInput,
  surface: InferenceSurface,
): Promise<{ v: Validated; t: Tracker }> {
  // The OpenAI surface: the key's own project unless the caller names one (the operator must: project_id or X-Svc-Project).
  let resolved: Promise<string> | undefined;
  const projectOf = () => (resolved ??= requireProjectId(ctx, input.project_id ?? (surface.projectFromKey ? ctx.caller.projectId : undefined)));
  // CONTRACT §10: a template becomes the request's messages, model and params (templates/inference-stage.ts).
  const templated = input.template != null ? await applyTemplate(ports.templates, await projectOf(), parseInput(InferenceRequest, input)) : null;
  if (templated) input = templated.request;
  const v = validateInference(ports, ctx, input);
  v.output = outputCheck(v.options);
  const projectId = await projectOf();
  // The operator's inference draws on the project's windows from here on (CONTRACT §7).
  ticket.address(projectId);
  const t = new Tracker(ports, ctx, ticket, projectId, v.model);
  if (input.rag) {
    if (!ports.rag) throw invalid('rag', 'The rag option is not available here.');
    ({ messages: v.messages, citations: t.citations } = await applyRag(ports.rag, ctx, projectId, input.rag, v.messages));
  }
  if (templated) t.template = templated.template;
  return { v, t };
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
    toolCalls: answer.toolCalls,
    logprobs: answer.logprobs,
    choices: answer.choices,
    promptTokens: 0,
    completionTokens: 0,
    costMicros: 0n,
    ...(t.citations ? { citations: t.citations } : {}),
    ...(t.template ? { template: t.template } : {}),
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
  const result = hitResult(t.ctx, t, answer);
  await Promise.all([t.ticket.keepRequestOnly(), t.record({ status: 'succeeded', errorCode: null, cacheHit: true, result })]);
  return result;
}

/** What a provider answered, with its tokens (counted by the gateway when the provider reported none). */
type Answer = Pick<Completion, 'content' | 'finishReason' | 'toolCalls' | 'logprobs' | 'choices'> & { usage: ProviderUsage };

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
  answer: Answer,
  cacheStatus: CacheStatus,
  outcome: { status: 'succeeded' } | { status: 'failed'; errorCode: string },
  /** Earlier attempts of a structured-output request: charged and recorded with this one (CONTRACT §11). */
  prior: Tally = NO_TALLY,
): Promise<InferenceResult> {
  const ctx = t.ctx;
  const promptTokens = answer.usage.promptTokens + prior.promptTokens;
  const completionTokens = answer.usage.completionTokens + prior.completionTokens;
  const cost = costMicros(answer.usage.promptTokens, answer.usage.completionTokens, route.model) + prior.costMicros;
  const spend = chargeSpend(t.ports.budgets, ctx, t.projectId, cost, p.projectBudgetMicros);
  const settled = t.ticket.settle(promptTokens + completionTokens);
  const stored =
    outcome.status === 'succeeded' && p.cache && cacheStatus === 'miss'
      ? t.ports.responseCache.set(
          t.projectId,
          p.cache.key,
          {
            model: route.model.id,
            route: route.id,
            region: route.provider.region,
            content: answer.content,
            finishReason: answer.finishReason,
            toolCalls: answer.toolCalls,
            logprobs: answer.logprobs,
            choices: answer.choices,
          },
          p.cache.ttlS,
        )
      : null;
  const result: InferenceResult = {
    id: t.id,
    requestId: ctx.requestId,
    createdAt: t.createdAt,
    model: route.model.id,
    route: route.id,
    region: route.provider.region,
    cacheHit: false,
    cacheStatus,
    content: answer.content,
    finishReason: answer.finishReason,
    toolCalls: answer.toolCalls,
    logprobs: answer.logprobs,
    choices: answer.choices,
    promptTokens,
    completionTokens,
    costMicros: cost,
    ...(t.citations ? { citations: t.citations } : {}),
    ...(t.template ? { template: t.template } : {}),
  };
  const recorded = t.record({
    status: outcome.status,
    errorCode: outcome.status === 'failed' ? outcome.errorCode : null,
    promptTokens,
    completionTokens,
    costMicros: cost,
    spend: spend.charge,
    result,
  });
  const [, , , wasStored] = await Promise.all([settled, spend.added, recorded, stored]);
  return wasStored === false ? { ...result, cacheStatus: 'unavailable' } : result;
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
export async function createInference(
  ports: InferencePorts,
  ctx: Ctx,
  ticket: RateLimitTicket,
  input: InferenceInput,
  surface: InferenceSurface = {},
): Promise<InferenceResult> {
  const { v, t } = await begin(ports, ctx, ticket, input, surface);
  try {
    const p = await plan(ctx, t, v);
    const { cached, reserved } = await admit(ctx, t, v, p);
    if (cached.answer || !reserved) return finishPrivacy(t.privacy, withAttempts(v, await serveHit(t, cached.answer!), 0));
    const ask = async (messages: ChatMessage[]) => {
      const routed = await ports.providers.complete(p.routes, providerRequest(v, messages));
      t.tried(routed.route);
      const c: Completion = routed.value;
      // The provider's usage as it came (no await: the gateway counts only when the provider reported none).
      const usage = c.usage ?? (await tokensOf(v, c.content, null, c.toolCalls, messages));
      return {
        content: c.content,
        finishReason: c.finishReason,
        toolCalls: c.toolCalls,
        logprobs: c.logprobs,
        choices: c.choices,
        usage,
        route: routed.route,
        costMicros: costMicros(usage.promptTokens, usage.completionTokens, routed.route.model),
      };
    };
    let first;
    try {
      first = await ask(v.messages);
    } catch (err) {
      await ticket.refund();
      throw err;
    }
    if (!v.output) return finishPrivacy(t.privacy, await account(t, v, p, first.route, first, cached.status, { status: 'succeeded' }));
    // CONTRACT §11: re-asks while the answer does not validate; every attempt is charged in the one usage record.
    const run = await askUntilValid(v.output, v.messages, first, ask);
    const failed = run.error !== undefined ? errorCodeOf(run.error) : run.errors ? 'structured_output_failed' : null;
    const result = await account(t, v, p, run.answer.route, run.answer, cached.status, failed ? { status: 'failed', errorCode: failed } : { status: 'succeeded' }, run.prior);
    if (run.error !== undefined) throw run.error;
    if (run.errors) throw new SvcError('structured_output_failed', { param: 'response_format', message: failureMessage(run.attempts, run.errors) });
    result.attempts = run.attempts;
    return finishPrivacy(t.privacy, result);
  } catch (err) {
    await refuseOrRecord(t, err);
    throw err;
  }
}

/** CONTRACT §11: a JSON response_format's answer says how many it took (0: from the response cache). */
function withAttempts(v: Validated, result: InferenceResult, attempts: number): InferenceResult {
  if (v.output) result.attempts = attempts;
  return result;
}

/** The provider request: options only when the request had any, so a plain request is what it always was. */
function providerRequest(v: Validated, messages: ChatMessage[] = v.messages) {
  return v.options
    ? { messages, maxTokens: v.maxTokens, sampling: v.sampling, options: v.options }
    : { messages, maxTokens: v.maxTokens, sampling: v.sampling };
}

/** A cached answer as stream events: its text, its tool calls. */
async function* replayHit(result: InferenceResult): AsyncGenerator<StreamEvent> {
  if (result.content !== '' || !result.toolCalls) yield { type: 'delta', content: result.content };
  for (const [index, c] of (result.toolCalls ?? []).entries()) {
    yield { type: 'tool_call', index, id: c.id, name: c.function.name, arguments: c.function.arguments };
  }
  yield { type: 'done', result };
}

/** One choice's answer as it streams in (choice 0 and, for n > 1, the others). */
class ChoiceBuilder {
  content = '';
  finishReason = 'stop';
  toolCalls: ToolCall[] | undefined;
  logprobs: unknown[] | undefined;

  toolCall(part: { index: number; id?: string; name?: string; arguments: string }): void {
    this.toolCalls ??= [];
    const call = (this.toolCalls[part.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
    if (part.id) call.id = part.id;
    if (part.name) call.function.name = part.name;
    call.function.arguments += part.arguments;
  }

  addLogprobs(lp: unknown): void {
    const content = (lp as { content?: unknown } | null)?.content;
    if (Array.isArray(content)) (this.logprobs ??= []).push(...content);
  }

  get calls(): ToolCall[] | undefined {
    return this.toolCalls?.filter(Boolean);
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
  surface: InferenceSurface = {},
): Promise<InferenceStream> {
  const { v, t } = await begin(ports, ctx, ticket, input, surface);
  let p: Plan;
  let cached: Lookup;
  let routed;
  try {
    p = await plan(ctx, t, v);
    const admitted = await admit(ctx, t, v, p);
    cached = admitted.cached;
    if (cached.answer || !admitted.reserved) {
      const result = withAttempts(v, await serveHit(t, cached.answer!), 0);
      const { content: _c, finishReason: _f, promptTokens: _p, completionTokens: _ct, costMicros: _m, ...head } = result;
      return { head, events: restoreStream(t.privacy, replayHit(result)) };
    }
    try {
      routed = await ports.providers.openStream(p.routes, providerRequest(v), signal);
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
    // Choice 0 beyond its text (tool calls, logprobs), and the other choices of n > 1: only when they occur.
    let first: ChoiceBuilder | undefined;
    let others: Map<number, ChoiceBuilder> | undefined;
    const builder = (choice: number | undefined): ChoiceBuilder => {
      if (!choice) return (first ??= new ChoiceBuilder());
      others ??= new Map();
      let b = others.get(choice);
      if (!b) others.set(choice, (b = new ChoiceBuilder()));
      return b;
    };
    try {
      for await (const part of parts) {
        if (part.type === 'delta') {
          if (part.choice) builder(part.choice).content += part.content;
          else content += part.content;
          yield part.choice ? { type: 'delta', content: part.content, choice: part.choice } : { type: 'delta', content: part.content };
        } else if (part.type === 'finish') {
          if (part.choice) builder(part.choice).finishReason = part.finishReason;
          else finishReason = part.finishReason;
        } else if (part.type === 'usage') usage = part.usage;
        else if (part.type === 'tool_call') {
          builder(part.choice).toolCall(part);
          yield { type: 'tool_call', index: part.index, id: part.id, name: part.name, arguments: part.arguments, choice: part.choice };
        } else if (part.type === 'logprobs') {
          builder(part.choice).addLogprobs(part.logprobs);
          yield { type: 'logprobs', logprobs: part.logprobs, choice: part.choice };
        }
      }
      ended = 'ok';
    } catch (err) {
      ended = signal.aborted || isAbortError(err)
        ? 'aborted'
        : new SvcError('model_unavailable', { message: 'The model provider failed in the middle of the response.' });
    } finally {
      // Also reached when the consumer stops iterating (return() at a yield): that is the client leaving.
      ended ??= 'aborted';
      const toolCalls = first?.calls;
      const logprobs = first?.logprobs ? { content: first.logprobs } : undefined;
      let choices: Choice[] | undefined;
      if (others) {
        choices = [{ index: 0, content, finishReason, toolCalls, logprobs }];
        for (const [index, b] of [...others].sort((a, b) => a[0] - b[0])) {
          choices.push({ index, content: b.content, finishReason: b.finishReason, toolCalls: b.calls, logprobs: b.logprobs ? { content: b.logprobs } : undefined });
        }
      }
      // CONTRACT §11 on a stream: checked once it has ended, without re-asks (the text has already been sent).
      const invalidOutput = ended === 'ok' && v.output && !first?.calls?.length ? v.output(content) : null;
      if (invalidOutput) ended = new SvcError('structured_output_failed', { param: 'response_format', message: failureMessage(1, invalidOutput) });
      const counted = choices ? choices.map((c) => c.content ?? '').join('') : content;
      result = await account(
        t,
        v,
        p,
        route,
        { content, finishReason, toolCalls, logprobs, choices, usage: await tokensOf(v, counted, usage, choices ? choices.flatMap((c) => c.toolCalls ?? []) : toolCalls) },
        cacheStatus,
        ended === 'ok'
          ? { status: 'succeeded' }
          : { status: 'failed', errorCode: ended === 'aborted' ? 'client_disconnected' : ended.code },
      );
    }
    if (ended === 'ok' && v.output) result.attempts = 1;
    if (ended === 'ok') yield { type: 'done', result };
    else if (ended instanceof SvcError) yield { type: 'error', error: ended };
  }
  return { head, events: restoreStream(t.privacy, relay()) };
}

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
  const t = new Tracker(ports, ctx, ticket, projectId, v.model);
  try {
    const p = await plan(ctx, t, v);
    await admit(ctx, t, v, p);
    let routed;
    try {
      routed = await ports.providers.embed(p.routes, {
        input: texts,
        ...(input.dimensions !== undefined ? { dimensions: input.dimensions } : {}),
        ...(input.user != null ? { user: input.user } : {}),
      });
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
