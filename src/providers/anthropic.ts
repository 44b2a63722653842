import { DEFAULT_ANTHROPIC_MAX_TOKENS, DEFAULT_ANTHROPIC_VERSION, type ProviderSpec, type SecretValue } from './config-file.ts';
import { sseData } from './sse.ts';
import { argumentsObject, dataUrl, firstUnsupported, mergeTurns, responseTool, systemPrompt, withoutThoughtSignatures, type ResponseTool } from './translate.ts';
import {
  contentText,
  ProviderError,
  type ChatMessage,
  type Completion,
  type Provider,
  type ProviderRequest,
  type ProviderUsage,
  type StreamPart,
  type ThinkingBlock,
  type ToolCall,
  usageParts,
} from './types.ts';
import { basePath, jsonEvent, Upstream, type StreamTranslator } from './upstream.ts';

type Req = Omit<ProviderRequest, 'signal'>;
type Block = Record<string, unknown> & { type: string };
interface Turn {
  role: 'user' | 'assistant' | 'system';
  content: Block[];
}

/** Anthropic's stop_reason as OpenAI's finish_reason. */
export function anthropicFinish(stop: unknown, structured: boolean): string {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      // The forced response tool is the answer itself, not a call for the client to run.
      return structured ? 'stop' : 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      // end_turn, stop_sequence, pause_turn
      return 'stop';
  }
}

function usageOf(u: any): ProviderUsage | null {
  if (typeof u?.input_tokens !== 'number' || typeof u?.output_tokens !== 'number') return null;
  // input_tokens excludes the prompt-cache reads and writes; OpenAI's prompt_tokens counts the whole prompt.
  const cached = (Number(u.cache_creation_input_tokens) || 0) + (Number(u.cache_read_input_tokens) || 0);
  return { promptTokens: u.input_tokens + cached, completionTokens: u.output_tokens, ...usageParts(u.cache_read_input_tokens, u.cache_creation_input_tokens, null) };
}

function userBlocks(m: ChatMessage): Block[] {
  if (typeof m.content === 'string') return m.content === '' ? [] : [{ type: 'text', text: m.content }];
  return (m.content ?? []).map((part): Block => {
    if (part.type === 'text') return { type: 'text', text: part.text };
    const data = dataUrl(part.image_url.url);
    return data
      ? { type: 'image', source: { type: 'base64', media_type: data.mediaType, data: data.data } }
      : { type: 'image', source: { type: 'url', url: part.image_url.url } };
  });
}

/** The Messages API request body (without `stream`). */
export function toAnthropic(req: Req, defaultMaxTokens: number): Record<string, unknown> {
  // A request that came in as Anthropic's (POST /v1/messages) brings back what the chat request cannot hold.
  const x = req.options?.anthropic;
  const turns: Turn[] = [];
  const inline = x?.inline_system;
  // Gemini's thought signatures (in tool call ids of a history Gemini answered) stay out of Anthropic's ids.
  for (const [i, m] of withoutThoughtSignatures(req.messages).entries()) {
    let turn: Turn;
    if (m.role === 'system' && inline?.includes(i)) turn = { role: 'system', content: userBlocks(m) };
    else if (m.role === 'system' || m.role === 'developer') continue;
    else if (m.role === 'user') turn = { role: 'user', content: userBlocks(m) };
    else if (m.role === 'tool') {
      // A tool's answer is a tool_result block in a user turn; several results merge into one turn.
      const result: Block = { type: 'tool_result', tool_use_id: m.tool_call_id, content: contentText(m.content) };
      if (x?.tool_errors?.includes(i)) result.is_error = true;
      turn = { role: 'user', content: [result] };
    } else {
      const blocks: Block[] = (x?.thinking_blocks?.[i] ?? []).map((b) => ({ ...b }) as Block);
      const text = contentText(m.content);
      if (text !== '') blocks.push({ type: 'text', text });
      for (const call of m.tool_calls ?? []) {
        blocks.push({ type: 'tool_use', id: call.id, name: call.function.name, input: argumentsObject(call.function.arguments) ?? {} });
      }
      turn = { role: 'assistant', content: blocks };
    }
    if (x?.cacheControl) turn.content.forEach((b, j) => void (x.cacheControl![`${i}.${j}`] && (b.cache_control = x.cacheControl![`${i}.${j}`])));
    turns.push(turn);
  }
  const o = req.options ?? {};
  const body: Record<string, unknown> = {
    model: req.model,
    max_tokens: req.maxTokens ?? defaultMaxTokens,
    messages: mergeTurns(turns),
  };
  const system = systemPrompt(inline ? req.messages.filter((_, i) => !inline.includes(i)) : req.messages);
  if (x?.cacheControl && Object.keys(x.cacheControl).some((k) => k.startsWith('system.'))) {
    // Cache points on the system prompt: one text block per system message, as the caller sent them.
    body.system = req.messages.flatMap((m, i) =>
      (m.role === 'system' || m.role === 'developer') && !inline?.includes(i) && contentText(m.content) !== ''
        ? [{ type: 'text', text: contentText(m.content), ...(x.cacheControl![`system.${i}`] ? { cache_control: x.cacheControl![`system.${i}`] } : {}) }]
        : [],
    );
  } else if (system !== '') body.system = system;
  if (req.sampling.temperature !== undefined) body.temperature = req.sampling.temperature;
  if (req.sampling.top_p !== undefined) body.top_p = req.sampling.top_p;
  if (x?.fields) Object.assign(body, x.fields);
  if (req.sampling.stop !== undefined) body.stop_sequences = typeof req.sampling.stop === 'string' ? [req.sampling.stop] : req.sampling.stop;
  if (o.user !== undefined) body.metadata = { user_id: o.user };

  const forced = responseTool(req);
  if (forced) {
    body.tools = [{ name: forced.name, description: forced.description, input_schema: forced.schema }];
    body.tool_choice = { type: 'tool', name: forced.name };
  } else if (o.tools && o.tools.length > 0) {
    body.tools = o.tools.map((t, k) => ({
      name: t.function.name,
      ...(t.function.description !== undefined ? { description: t.function.description } : {}),
      input_schema: t.function.parameters ?? { type: 'object', properties: {} },
      ...x?.toolFields?.[k],
    }));
    const choice = o.tool_choice;
    let tc: Record<string, unknown> | undefined;
    if (choice === 'auto') tc = { type: 'auto' };
    else if (choice === 'required') tc = { type: 'any' };
    else if (choice === 'none') tc = { type: 'none' };
    else if (typeof choice === 'object') tc = { type: 'tool', name: choice.function.name };
    if (o.parallel_tool_calls === false && tc?.type !== 'none') tc = { ...(tc ?? { type: 'auto' }), disable_parallel_tool_use: true };
    if (tc) body.tool_choice = tc;
  }
  return body;
}

/** A Messages API answer as a Completion. */
export function fromAnthropic(msg: any, forced: ResponseTool | null, name: string): Completion {
  if (!Array.isArray(msg?.content)) throw new ProviderError('protocol', `${name}: the response has no content array`);
  let content = '';
  const toolCalls: ToolCall[] = [];
  const thinking: ThinkingBlock[] = [];
  for (const block of msg.content) {
    if (block?.type === 'text' && typeof block.text === 'string') content += block.text;
    else if (block?.type === 'thinking') thinking.push({ type: 'thinking', thinking: String(block.thinking ?? ''), signature: String(block.signature ?? '') });
    else if (block?.type === 'redacted_thinking') thinking.push({ type: 'redacted_thinking', data: String(block.data ?? '') });
    else if (block?.type === 'tool_use') {
      const args = JSON.stringify(block.input ?? {});
      if (forced && block.name === forced.name) content += args;
      else toolCalls.push({ id: String(block.id), type: 'function', function: { name: String(block.name), arguments: args } });
    }
  }
  return {
    content,
    finishReason: anthropicFinish(msg.stop_reason, forced !== null),
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
    // Thinking is no part of a chat-completions answer; the /v1/messages surface gives it back.
    ...(thinking.length > 0 ? { thinking } : {}),
    usage: usageOf(msg.usage),
  };
}

/**
 * The Messages API stream (message_start, content_block_start/delta/stop, message_delta, message_stop, ping, error)
 * as StreamParts: text_delta as `delta`; a tool_use block as `tool_call` parts (id and name first, then the
 * input_json_delta pieces); the forced response tool's JSON as `delta`; stop_reason as `finish`; usage at the end.
 */
export class AnthropicStream implements StreamTranslator<string> {
  private readonly toolIndex = new Map<number, number>();
  private readonly responseBlocks = new Set<number>();
  private readonly thinkingIndex = new Map<number, number>();
  private tools = 0;
  private prompt: ProviderUsage | null = null;
  private completion: number | null = null;
  private finished = false;

  constructor(
    private readonly forced: ResponseTool | null,
    private readonly name: string,
    private readonly redact: (text: string) => string,
  ) {}

  *push(data: string): Iterable<StreamPart> {
    const ev = jsonEvent(data, this.name);
    switch (ev.type) {
      case 'message_start': {
        const u = ev.message?.usage;
        if (u) {
          const usage = usageOf({ output_tokens: 0, ...u });
          if (usage) [this.prompt, this.completion] = [usage, usage.completionTokens];
        }
        return;
      }
      case 'content_block_start': {
        const block = ev.content_block ?? {};
        if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') yield { type: 'delta', content: block.text };
        if (block.type === 'thinking' || block.type === 'redacted_thinking') {
          const index = this.thinkingIndex.size;
          this.thinkingIndex.set(ev.index, index);
          yield block.type === 'thinking' ? { type: 'thinking', index, thinking: String(block.thinking ?? '') } : { type: 'thinking', index, redacted: String(block.data ?? '') };
        }
        if (block.type === 'tool_use') {
          if (this.forced && block.name === this.forced.name) {
            this.responseBlocks.add(ev.index);
            return;
          }
          const index = this.tools++;
          this.toolIndex.set(ev.index, index);
          yield { type: 'tool_call', index, id: String(block.id), name: String(block.name), arguments: '' };
        }
        return;
      }
      case 'content_block_delta': {
        const d = ev.delta ?? {};
        if (d.type === 'text_delta' && typeof d.text === 'string' && d.text !== '') yield { type: 'delta', content: d.text };
        else if ((d.type === 'thinking_delta' || d.type === 'signature_delta') && this.thinkingIndex.has(ev.index)) {
          const index = this.thinkingIndex.get(ev.index)!;
          yield d.type === 'thinking_delta' ? { type: 'thinking', index, thinking: String(d.thinking ?? '') } : { type: 'thinking', index, signature: String(d.signature ?? '') };
        }
        else if (d.type === 'input_json_delta' && typeof d.partial_json === 'string' && d.partial_json !== '') {
          if (this.responseBlocks.has(ev.index)) yield { type: 'delta', content: d.partial_json };
          else {
            const index = this.toolIndex.get(ev.index);
            if (index !== undefined) yield { type: 'tool_call', index, arguments: d.partial_json };
          }
        }
        return;
      }
      case 'message_delta': {
        if (typeof ev.usage?.output_tokens === 'number') this.completion = ev.usage.output_tokens;
        if (typeof ev.usage?.input_tokens === 'number') this.prompt = usageOf({ output_tokens: 0, ...ev.usage });
        if (ev.delta?.stop_reason) {
          this.finished = true;
          yield { type: 'finish', finishReason: anthropicFinish(ev.delta.stop_reason, this.forced !== null) };
        }
        return;
      }
      case 'error':
        throw new ProviderError('status', `${this.name}: error in stream: ${this.redact(String(ev.error?.message ?? ev.error?.type ?? 'unknown'))}`);
      default:
        // ping, content_block_stop, message_stop, and event types added later.
        return;
    }
  }

  *end(): Iterable<StreamPart> {
    if (!this.finished) throw new ProviderError('protocol', `${this.name}: the stream ended without a stop_reason`);
    if (this.prompt !== null && this.completion !== null) {
      const { completionTokens: _, ...prompt } = this.prompt;
      yield { type: 'usage', usage: { ...prompt, completionTokens: this.completion } };
    }
  }
}

/**
 * Kind `anthropic`: the Messages API (`POST <base_url>/v1/messages`, default base_url https://api.anthropic.com) with
 * `x-api-key` and `anthropic-version`. System and developer messages become `system`; tools, tool calls and tool
 * results become tool_use / tool_result blocks; structured output is a forced tool.
 */
export class AnthropicProvider implements Provider {
  readonly kind = 'anthropic' as const;
  readonly name: string;
  readonly region: string;
  readonly timeoutMs: number;
  private readonly http: Upstream;
  private readonly path: string;
  private readonly apiKey: SecretValue | null;
  private readonly version: string;
  private readonly defaultMaxTokens: number;

  constructor(spec: ProviderSpec) {
    this.name = spec.name;
    this.region = spec.region;
    this.timeoutMs = spec.timeoutMs;
    this.apiKey = spec.apiKey;
    this.version = spec.apiVersion ?? DEFAULT_ANTHROPIC_VERSION;
    this.defaultMaxTokens = spec.defaultMaxTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS;
    this.path = `${basePath(spec.baseUrl!)}/v1/messages`;
    this.http = new Upstream(spec.name, new URL(spec.baseUrl!).origin, spec.timeoutMs, () => (this.apiKey ? [this.apiKey.reveal()] : []));
  }

  unsupported(req: Req): string | null {
    return firstUnsupported(req, {
      serialToolCalls: true,
      forcedToolFormat: true,
      imageUrl: (url) => dataUrl(url) !== null || /^https?:\/\//.test(url),
    });
  }

  async complete(req: ProviderRequest): Promise<Completion> {
    const { path, headers, body } = this.request(req, false);
    return fromAnthropic(await this.http.postJson(path, headers, body, req.signal), responseTool(req), this.name);
  }

  async openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>> {
    const { path, headers, body } = this.request(req, true);
    const res = await this.http.post(path, headers, body, req.signal);
    return this.http.stream(res, req.signal, sseData, new AnthropicStream(responseTool(req), this.name, (t) => this.http.redact(t)));
  }

  private request(req: ProviderRequest, stream: boolean) {
    const field = this.unsupported(req);
    if (field) throw new ProviderError('rejected', `${this.name}: kind anthropic cannot carry ${field}`, 400);
    const body = { ...toAnthropic(req, this.defaultMaxTokens), ...(stream ? { stream: true } : {}) };
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
      'anthropic-version': this.version,
    };
    if (this.apiKey) headers['x-api-key'] = this.apiKey.reveal();
    const beta = req.options?.anthropic?.beta;
    if (beta) headers['anthropic-beta'] = beta;
    return { path: this.path, headers, body: JSON.stringify(body) };
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
