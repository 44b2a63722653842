import type { Static, TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import type { TLocalizedValidationError } from 'typebox/error';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { DEFAULT_COMPLETION_TOKENS, type RateLimitTicket } from '../../limits/index.ts';
import { estimateTextTokens } from '../../limits/tokens.ts';
import type { ChatMessage, ChatOptions, FunctionTool, ResponseFormat, Sampling, ToolChoice } from '../../providers/types.ts';
import { requireProjectId, type Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import { MAX_CACHE_TTL_S } from './cache.ts';
import { InferenceRequest } from './schema.ts';
import { applyRag } from '../rag/stage.ts';
import { applyTemplate } from '../templates/inference-stage.ts';
import { outputCheck } from './stages/structured-output.ts';
import { Tracker } from './tracker.ts';
import { bindCustomer } from '../customers/inference-stage.ts';
import { assertModelAllowed } from '../auth/actions.ts';
import type { InferenceInput, InferenceSurface, Validated } from './types.ts';

/**
 * Validating an inference request: its shape against schema.ts's schemas (validatorOf and parseInput: the fastify
 * validator of the inference routes and the services' check), the rules between its fields (validateInference), then
 * what it names (begin: its project, end customer, template and RAG).
 *
 * The shape check is not domain/validation.ts's parseInput: for the same schema the two answer differently (this one
 * picks the union branch a value was meant for and names the field inside it, `input[0].content[0].text`; keeps a
 * list index on lists of plain values, `stop[1]`; uses a node's own wording, not its union's; says `body` for the
 * root), and the inference tests pin those answers.
 */

// ---- the shape: one compiled check per schema, errors naming the field ----

type Check = (value: unknown) => { value: unknown } | { error: SvcError };
const compiled = new WeakMap<object, Check>();
/** Inputs already checked against their schema (by the route's validator): the service does not walk them again. */
const checked = new WeakMap<object, TSchema>();

/** A fastify-style validator (`{value}` or `{error}`) for a schema: the compiled check, and on failure the named error. */
export function validatorOf(schema: TSchema): Check {
  let check = compiled.get(schema);
  if (!check) {
    const validator = Compile(schema);
    check = (value) => {
      if (!validator.Check(value)) return { error: refusal(schema, validator.Errors(value), value) };
      if (typeof value === 'object' && value !== null) checked.set(value, schema);
      return { value };
    };
    compiled.set(schema, check);
  }
  return check;
}

/** The value, checked against its schema (once: a value the route's validator passed is not checked again); else 400
 *  invalid_request naming the field. */
export function parseInput<T extends TSchema>(schema: T, value: unknown): Static<T> {
  if (typeof value === 'object' && value !== null && checked.get(value) === schema) return value as Static<T>;
  const r = validatorOf(schema)(value);
  if ('error' in r) throw r.error;
  return r.value as Static<T>;
}

/** A value built from checked input that satisfies `schema` by construction (a translated Responses request). */
export function markChecked<T extends TSchema>(schema: T, value: Static<T>): Static<T> {
  checked.set(value as object, schema);
  return value;
}

const pointer = (p: string): string[] =>
  p === '' || p === '#' ? [] : p.replace(/^#/, '').slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
const at = (root: any, segments: string[]): any => segments.reduce((node, s) => node?.[s], root);
const show = (v: unknown): string => (typeof v === 'string' ? `"${v.slice(0, 100)}"` : (JSON.stringify(v) ?? String(v)).slice(0, 100));

/** `messages[2].content[0].type`: array indexes in brackets. */
function fieldPath(segments: string[], doc: unknown): string {
  let out = '';
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    out += Array.isArray(at(doc, segments.slice(0, i))) ? `[${s}]` : out === '' ? s : `.${s}`;
  }
  return out;
}

const TYPE_OF = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

/** Whether a value is of the kind a union branch describes (its type, its literal), ignoring the branch's details. */
function kindMatches(branch: any, v: unknown): boolean {
  if (branch.anyOf) return (branch.anyOf as any[]).some((b) => kindMatches(b, v));
  if ('const' in branch) return branch.const === v;
  if (Array.isArray(branch.enum)) return typeof v === typeof branch.enum[0];
  const t = branch.type;
  if (t === undefined) return true;
  const k = TYPE_OF(v);
  return (Array.isArray(t) ? t : [t]).some((x: string) => x === k || (x === 'integer' && k === 'number'));
}

/** The branch of a union a value was meant for: by kind, then by its `type` (or `role`) discriminator. */
function branchFor(anyOf: any[], v: unknown): number {
  let candidates = anyOf.map((b, i) => ({ b, i })).filter(({ b }) => kindMatches(b, v));
  if (candidates.length > 1 && TYPE_OF(v) === 'object') {
    const obj = v as Record<string, unknown>;
    for (const key of ['type', 'role']) {
      const narrowed = candidates.filter(({ b }) => {
        const p = b.properties?.[key];
        if (!p) return false;
        if (obj[key] === undefined) return !(b.required ?? []).includes(key);
        return 'const' in p ? p.const === obj[key] : Array.isArray(p.enum) ? p.enum.includes(obj[key]) : true;
      });
      if (narrowed.length >= 1) candidates = narrowed;
      if (candidates.length === 1) break;
    }
  }
  if (candidates.length === 1) return candidates[0]!.i;
  // A nullable field holding something else: the non-null branch says what is wrong.
  const nonNull = anyOf.map((b, i) => ({ b, i })).filter(({ b }) => b.type !== 'null');
  return candidates.length === 0 && nonNull.length === 1 ? nonNull[0]!.i : -1;
}

const KEYWORD_PROBLEM: Record<string, string> = {
  minItems: 'must not have fewer than {minItems} items',
  maxItems: 'must not have more than {maxItems} items',
};

function problem(node: any, keyword: string, fallback: string, value: unknown): string {
  const said: string | undefined = node?.['x-problem'];
  let text = said ?? KEYWORD_PROBLEM[keyword]?.replace(/\{(\w+)\}/g, (_, k: string) => String(node?.[k])) ?? fallback;
  if (!said && keyword === 'enum' && Array.isArray(node?.enum)) text = `must be one of ${node.enum.join(', ')}, got {value}`;
  return text.replace('{value}', () => show(value));
}

/**
 * The first error as a client should read it: the field's path and what is wrong with it. A union's errors are
 * those of the branch the value was meant for (a `null` on a nullable field, a part's `type`); when no branch fits,
 * the union itself is named with its own wording.
 */
function refusal(root: TSchema, errors: TLocalizedValidationError[], doc: unknown): SvcError {
  let scope = errors;
  let prefix = '#';
  for (let depth = 0; depth < 32; depth++) {
    // A wrong `type` (a tool of another kind, an unknown part) says more than the fields that kind would need.
    const first =
      scope.find((e) => e.keyword === 'const' && e.instancePath.endsWith('/type')) ?? scope.find((e) => e.keyword !== 'anyOf') ?? scope[0];
    if (!first) break;
    const rest = first.schemaPath.slice(prefix.length);
    const u = rest.indexOf('/anyOf/');
    if (u === -1) return named(root, first, doc);
    const unionPath = prefix + rest.slice(0, u);
    const union = at(root, pointer(unionPath));
    const where = instanceAt(pointer(unionPath), pointer(first.schemaPath), pointer(first.instancePath));
    const value = at(doc, where);
    const k = branchFor(union?.anyOf ?? [], value);
    const field = fieldPath(where, doc) || 'body';
    if (k === -1) {
      return invalidField(field, problem(union, 'anyOf', 'has an invalid value', value));
    }
    prefix = `${unionPath}/anyOf/${k}`;
    const inBranch = scope.filter((e) => e.schemaPath === prefix || e.schemaPath.startsWith(`${prefix}/`));
    if (inBranch.length === 0) return invalidField(field, problem(union, 'anyOf', 'has an invalid value', value));
    scope = inBranch;
  }
  return new SvcError('invalid_request', { message: 'The request body is invalid.' });
}

/** The instance path at a schema node on an error's way: `properties/x` and `items` step into the value, `anyOf/k` does not. */
function instanceAt(upto: string[], schema: string[], instance: string[]): string[] {
  const out: string[] = [];
  let j = 0;
  for (let i = 0; i < upto.length; i++) {
    const s = schema[i];
    if (s === 'properties' || s === 'patternProperties' || s === 'anyOf' || s === 'prefixItems') {
      if (s !== 'anyOf' && i + 1 < upto.length) out.push(instance[j++]!);
      i++;
    } else if (s === 'items' || s === 'additionalProperties') out.push(instance[j++]!);
  }
  return out;
}

function named(root: TSchema, e: TLocalizedValidationError, doc: unknown): SvcError {
  const segments = pointer(e.instancePath);
  const schemaSegments = pointer(e.schemaPath);
  if (e.keyword === 'boolean' && schemaSegments.at(-1) === 'additionalProperties') {
    const field = fieldPath(segments, doc);
    return invalidField(field, null, `Unknown parameter: ${field}.`);
  }
  if (e.keyword === 'additionalProperties') {
    const field = fieldPath([...segments, (e.params as { additionalProperties: string[] }).additionalProperties[0]!], doc);
    return invalidField(field, null, `Unknown parameter: ${field}.`);
  }
  if (e.keyword === 'required') {
    const field = fieldPath([...segments, (e.params as { requiredProperties: string[] }).requiredProperties[0]!], doc);
    return invalidField(field, null, `Missing required parameter: ${field}.`);
  }
  const node = at(root, schemaSegments.at(-1) === e.keyword ? schemaSegments.slice(0, -1) : schemaSegments);
  const field = fieldPath(segments, doc) || 'body';
  return invalidField(field, problem(node, e.keyword, e.message, at(doc, segments)));
}

function invalidField(field: string, problemText: string | null, message?: string): SvcError {
  const param = field === 'body' ? null : field;
  return new SvcError('invalid_request', { param, message: message ?? `${field} ${problemText}.` });
}

// ---- the rules between fields, then the request's project, customer, template and RAG ----

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
    // A key without a model list may use every model: nothing to check.
    if (ctx.caller.models) assertModelAllowed(ctx.caller.models, input.model, ports.providers.routesForModel(input.model));
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
  // CONTRACT §11: the answer's check, when a response format is asked (stages/structured-output.ts).
  if (v.options?.response_format) v.output = outputCheck(v.options);
  const projectId = await projectOf();
  // The operator's inference draws on the project's windows from here on (CONTRACT §7).
  ticket.address(projectId);
  // CONTRACT §22: the end customer, when the request names one (X-Svc-Customer, user or metadata.user_id): its windows
  // on the ticket.
  const named = ctx.customerHeader !== undefined || input.user != null;
  const customer = named ? await bindCustomer(ports.budgets.customers, ctx, ticket, projectId, input.user) : null;
  const t = new Tracker(ports, ctx, ticket, projectId, v.model);
  t.customer = customer;
  if (input.rag) {
    if (!ports.rag) throw invalid('rag', 'The rag option is not available here.');
    ({ messages: v.messages, citations: t.citations } = await applyRag(ports.rag, ctx, projectId, input.rag, v.messages));
  }
  if (templated) t.template = templated.template;
  return { v, t };
}
