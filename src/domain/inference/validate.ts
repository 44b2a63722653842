import { invalid } from '../../errors/svc-error.ts';
import { DEFAULT_COMPLETION_TOKENS, type RateLimitTicket } from '../../limits/index.ts';
import { estimateTextTokens } from '../../limits/tokens.ts';
import type { ChatMessage, ChatOptions, FunctionTool, ResponseFormat, Sampling, ToolChoice } from '../../providers/types.ts';
import type { Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import { requireProjectId } from '../tenancy.ts';
import { MAX_CACHE_TTL_S } from './cache.ts';
import { InferenceRequest } from './schema.ts';
import { parseInput } from './validator.ts';
import { applyRag } from '../rag/stage.ts';
import { applyTemplate } from '../templates/inference-stage.ts';
import { outputCheck } from './stages/structured-output.ts';
import { Tracker } from './tracker.ts';
import { bindCustomer } from '../customers/inference-stage.ts';
import { assertModelAllowed } from '../keys/models.ts';
import type { InferenceInput, InferenceSurface, Validated } from './types.ts';

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
    // CONTRACT §22, here so that every protocol (count_tokens and countTokens included) refuses it; plan() narrows routes.
    assertModelAllowed(ctx.caller, input.model, ports.providers.routesForModel(input.model));
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

export async function begin(
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
  if (surface.anthropic) (v.options ??= {}).anthropic = surface.anthropic;
  v.output = outputCheck(v.options);
  const projectId = await projectOf();
  // The operator's inference draws on the project's windows from here on (CONTRACT §7).
  ticket.address(projectId);
  // CONTRACT §22: the end customer (user, metadata.user_id or X-Svc-Customer), its windows on the ticket.
  const customer = await bindCustomer(ports.budgets.customers, ctx, ticket, projectId, input.user);
  const t = new Tracker(ports, ctx, ticket, projectId, v.model);
  t.customer = customer;
  if (input.rag) {
    if (!ports.rag) throw invalid('rag', 'The rag option is not available here.');
    ({ messages: v.messages, citations: t.citations } = await applyRag(ports.rag, ctx, projectId, input.rag, v.messages));
  }
  if (templated) t.template = templated.template;
  return { v, t };
}
