import type { Message } from '@smithy/core/event-streams';
import { onceAsync } from '../kernel/once.ts';
import type { AwsSpec, ProviderSpec } from './config-file.ts';
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
  type ToolCall,
  usageParts,
} from './types.ts';
import { basePath, jsonEvent, Upstream, type StreamTranslator } from './upstream.ts';

type Req = Omit<ProviderRequest, 'signal'>;
type Block = Record<string, unknown>;
interface Turn {
  role: 'user' | 'assistant';
  content: Block[];
}

/** Bedrock's stopReason as OpenAI's finish_reason. */
export function bedrockFinish(stop: unknown, structured: boolean): string {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return structured ? 'stop' : 'tool_calls';
    case 'guardrail_intervened':
    case 'content_filtered':
      return 'content_filter';
    default:
      // end_turn, stop_sequence
      return 'stop';
  }
}

function usageOf(u: any): ProviderUsage | null {
  if (typeof u?.inputTokens !== 'number' || typeof u?.outputTokens !== 'number') return null;
  // inputTokens leaves out the prompt-cache reads and writes; OpenAI's prompt_tokens counts the whole prompt.
  const cached = (Number(u.cacheReadInputTokens) || 0) + (Number(u.cacheWriteInputTokens) || 0);
  return { promptTokens: u.inputTokens + cached, completionTokens: u.outputTokens, ...usageParts(u.cacheReadInputTokens, u.cacheWriteInputTokens, null) };
}

const hasToolBlocks = (messages: readonly ChatMessage[]) => messages.some((m) => m.role === 'tool' || (m.tool_calls?.length ?? 0) > 0);

function userBlocks(m: ChatMessage): Block[] {
  if (typeof m.content === 'string') return m.content === '' ? [] : [{ text: m.content }];
  return (m.content ?? []).flatMap((part): Block[] => {
    if (part.type === 'text') return part.text === '' ? [] : [{ text: part.text }];
    const data = dataUrl(part.image_url.url)!;
    return [{ image: { format: data.mediaType.slice('image/'.length), source: { bytes: data.data } } }];
  });
}

/** Converse's prompt-cache marker: what comes before it may be cached. */
const CACHE_POINT: Block = { cachePoint: { type: 'default' } };

/** The Converse request body (the model is in the URL). */
export function toBedrock(req: Req): Record<string, unknown> {
  // An Anthropic request's cache_control (POST /v1/messages) becomes a cache point after the block it marked.
  const cache = req.options?.anthropic?.cacheControl;
  const turns: Turn[] = [];
  // Bedrock caps a toolUseId at 64 characters: Gemini's thought signatures stay out (translate.ts).
  for (const [i, m] of withoutThoughtSignatures(req.messages).entries()) {
    if (m.role === 'system' || m.role === 'developer') continue;
    let turn: Turn;
    if (m.role === 'user') turn = { role: 'user', content: userBlocks(m) };
    else if (m.role === 'tool') {
      turn = { role: 'user', content: [{ toolResult: { toolUseId: m.tool_call_id, content: [{ text: contentText(m.content) }] } }] };
    } else {
      const blocks: Block[] = [];
      const text = contentText(m.content);
      if (text !== '') blocks.push({ text });
      for (const call of m.tool_calls ?? []) {
        blocks.push({ toolUse: { toolUseId: call.id, name: call.function.name, input: argumentsObject(call.function.arguments) ?? {} } });
      }
      turn = { role: 'assistant', content: blocks };
    }
    if (cache) {
      // The places count the anthropic kind's blocks, whose assistant turns open with their thinking blocks.
      const skip = m.role === 'assistant' ? (req.options?.anthropic?.thinking_blocks?.[i]?.length ?? 0) : 0;
      turn.content = turn.content.flatMap((b, j) => (cache[`${i}.${j + skip}`] ? [b, CACHE_POINT] : [b]));
    }
    turns.push(turn);
  }
  const body: Record<string, unknown> = { messages: mergeTurns(turns) };
  const system = systemPrompt(req.messages);
  if (system !== '') body.system = cache && Object.keys(cache).some((k) => k.startsWith('system.')) ? [{ text: system }, CACHE_POINT] : [{ text: system }];
  const inference: Record<string, unknown> = {};
  if (req.maxTokens !== undefined) inference.maxTokens = req.maxTokens;
  if (req.sampling.temperature !== undefined) inference.temperature = req.sampling.temperature;
  if (req.sampling.top_p !== undefined) inference.topP = req.sampling.top_p;
  if (req.sampling.stop !== undefined) inference.stopSequences = typeof req.sampling.stop === 'string' ? [req.sampling.stop] : req.sampling.stop;
  if (Object.keys(inference).length > 0) body.inferenceConfig = inference;

  const o = req.options ?? {};
  const spec = (name: string, description: string | undefined, schema: Record<string, unknown> | undefined) => ({
    toolSpec: { name, ...(description !== undefined ? { description } : {}), inputSchema: { json: schema ?? { type: 'object', properties: {} } } },
  });
  const forced = responseTool(req);
  if (forced) {
    body.toolConfig = { tools: [spec(forced.name, forced.description, forced.schema)], toolChoice: { tool: { name: forced.name } } };
  } else if (o.tools && o.tools.length > 0 && (o.tool_choice !== 'none' || hasToolBlocks(req.messages))) {
    // Converse has no tool_choice none: without tool blocks in the conversation the tools are left out instead.
    const fields = o.anthropic?.toolFields;
    const config: Record<string, unknown> = {
      tools: o.tools.flatMap((t, k) => {
        const tool = spec(t.function.name, t.function.description, t.function.parameters);
        return fields?.[k]?.cache_control ? [tool, CACHE_POINT] : [tool];
      }),
    };
    const choice = o.tool_choice;
    if (choice === 'auto') config.toolChoice = { auto: {} };
    else if (choice === 'required') config.toolChoice = { any: {} };
    else if (typeof choice === 'object') config.toolChoice = { tool: { name: choice.function.name } };
    body.toolConfig = config;
  }
  return body;
}

/** A Converse answer as a Completion. */
export function fromBedrock(res: any, forced: ResponseTool | null, name: string): Completion {
  const blocks = res?.output?.message?.content;
  if (!Array.isArray(blocks)) throw new ProviderError('protocol', `${name}: the response has no output.message.content`);
  let content = '';
  const toolCalls: ToolCall[] = [];
  for (const b of blocks) {
    if (typeof b?.text === 'string') content += b.text;
    else if (b?.toolUse) {
      const args = JSON.stringify(b.toolUse.input ?? {});
      if (forced && b.toolUse.name === forced.name) content += args;
      else toolCalls.push({ id: String(b.toolUse.toolUseId), type: 'function', function: { name: String(b.toolUse.name), arguments: args } });
    }
  }
  return {
    content,
    finishReason: bedrockFinish(res.stopReason, forced !== null),
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
    usage: usageOf(res.usage),
  };
}

/**
 * AWS's signing and event-stream code, loaded with the first Bedrock request: a deployment without a Bedrock provider
 * never holds it (about 1.5 MB of heap).
 */
const loadAwsCode = onceAsync(async () => {
  const [streams, aws4] = await Promise.all([import('@smithy/core/event-streams'), import('aws4')]);
  const codec = new streams.EventStreamCodec(
    (bytes) => Buffer.from(bytes).toString('utf8'),
    (text) => Buffer.from(text, 'utf8'),
  );
  return { aws4: aws4.default, codec, getChunkedStream: streams.getChunkedStream };
});

/**
 * AWS event-stream framing (application/vnd.amazon.eventstream): each message is a prelude (total and header lengths,
 * CRC32), typed headers, a payload and a CRC32 of the whole. getChunkedStream cuts the byte stream into messages and
 * the codec checks both CRCs and parses the headers (AWS's own @smithy code).
 */
export async function* eventStreamMessages(body: AsyncIterable<Uint8Array>): AsyncGenerator<Message> {
  const { codec, getChunkedStream } = await loadAwsCode();
  for await (const raw of getChunkedStream(body)) yield codec.decode(raw);
}

const header = (m: Message, name: string): string | undefined => {
  const h = m.headers[name];
  return h && h.type === 'string' ? h.value : undefined;
};

/**
 * ConverseStream's events (messageStart, contentBlockStart/Delta/Stop, messageStop, metadata) as StreamParts: text as
 * `delta`, a toolUse block as `tool_call` parts (id and name at its start, then the input pieces), the forced response
 * tool's input as `delta`, stopReason as `finish`, metadata's usage at the end. An exception message fails the stream.
 */
export class BedrockStream implements StreamTranslator<Message> {
  private readonly toolIndex = new Map<number, number>();
  private readonly responseBlocks = new Set<number>();
  private tools = 0;
  private usage: ProviderUsage | null = null;
  private finished = false;

  constructor(
    private readonly forced: ResponseTool | null,
    private readonly name: string,
    private readonly redact: (text: string) => string,
  ) {}

  *push(m: Message): Iterable<StreamPart> {
    const type = header(m, ':message-type');
    const text = Buffer.from(m.body).toString('utf8');
    if (type === 'exception' || type === 'error') {
      const what = header(m, ':exception-type') ?? header(m, ':error-code') ?? 'error';
      let message = header(m, ':error-message') ?? text;
      try {
        message = String(JSON.parse(text).message ?? message);
      } catch {
        // not JSON
      }
      throw new ProviderError('status', `${this.name}: ${what} in stream: ${this.redact(message).slice(0, 300)}`);
    }
    const ev = jsonEvent(text, this.name);
    const block = typeof ev?.contentBlockIndex === 'number' ? ev.contentBlockIndex : 0;
    switch (header(m, ':event-type')) {
      case 'contentBlockStart': {
        const use = ev?.start?.toolUse;
        if (!use) return;
        if (this.forced && use.name === this.forced.name) {
          this.responseBlocks.add(block);
          return;
        }
        const index = this.tools++;
        this.toolIndex.set(block, index);
        yield { type: 'tool_call', index, id: String(use.toolUseId), name: String(use.name), arguments: '' };
        return;
      }
      case 'contentBlockDelta': {
        const d = ev?.delta ?? {};
        if (typeof d.text === 'string' && d.text !== '') yield { type: 'delta', content: d.text };
        else if (typeof d.toolUse?.input === 'string' && d.toolUse.input !== '') {
          if (this.responseBlocks.has(block)) yield { type: 'delta', content: d.toolUse.input };
          else {
            const index = this.toolIndex.get(block);
            if (index !== undefined) yield { type: 'tool_call', index, arguments: d.toolUse.input };
          }
        }
        return;
      }
      case 'messageStop':
        this.finished = true;
        yield { type: 'finish', finishReason: bedrockFinish(ev?.stopReason, this.forced !== null) };
        return;
      case 'metadata':
        this.usage = usageOf(ev?.usage) ?? this.usage;
        return;
      default:
        // messageStart, contentBlockStop, and event types added later.
        return;
    }
  }

  *end(): Iterable<StreamPart> {
    if (!this.finished) throw new ProviderError('protocol', `${this.name}: the stream ended without messageStop`);
    if (this.usage) yield { type: 'usage', usage: this.usage };
  }
}

/**
 * The headers of one POST signed with SigV4 (aws4 signs every header given, host, x-amz-date, and the body's hash;
 * an `x-amz-date` given is used as the signing time). Bedrock's signing name is `bedrock`.
 */
export async function signedHeaders(
  aws: Pick<AwsSpec, 'region' | 'accessKeyId' | 'secretAccessKey' | 'sessionToken'>,
  host: string,
  path: string,
  headers: Record<string, string>,
  body: string,
  service = 'bedrock',
): Promise<Record<string, string>> {
  const { aws4 } = await loadAwsCode();
  const request = { host, path, method: 'POST', service, region: aws.region, headers: { ...headers }, body };
  aws4.sign(request, {
    accessKeyId: aws.accessKeyId.reveal(),
    secretAccessKey: aws.secretAccessKey.reveal(),
    ...(aws.sessionToken ? { sessionToken: aws.sessionToken.reveal() } : {}),
  });
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(request.headers)) if (k.toLowerCase() !== 'host') out[k.toLowerCase()] = String(v);
  return out;
}

/**
 * Kind `bedrock`: Amazon Bedrock's Converse API (`POST <base_url>/model/{modelId}/converse`, `/converse-stream`;
 * default base_url https://bedrock-runtime.{aws_region}.amazonaws.com), every request signed with SigV4 (aws4, service
 * `bedrock`) with the credentials of the variables the providers file names. Tools become toolConfig/toolUse/toolResult;
 * structured output is a forced tool.
 */
export class BedrockProvider implements Provider {
  readonly kind = 'bedrock' as const;
  readonly name: string;
  readonly region: string;
  readonly timeoutMs: number;
  private readonly http: Upstream;
  private readonly base: string;
  private readonly host: string;
  private readonly aws: AwsSpec;

  constructor(spec: ProviderSpec) {
    this.name = spec.name;
    this.region = spec.region;
    this.timeoutMs = spec.timeoutMs;
    this.aws = spec.aws!;
    const url = new URL(spec.baseUrl!);
    this.host = url.host;
    this.base = basePath(spec.baseUrl!);
    const secrets = () => [this.aws.accessKeyId.reveal(), this.aws.secretAccessKey.reveal(), this.aws.sessionToken?.reveal() ?? ''];
    this.http = new Upstream(spec.name, url.origin, spec.timeoutMs, secrets);
  }

  unsupported(req: Req): string | null {
    const field = firstUnsupported(req, { forcedToolFormat: true, imageUrl: (url) => dataUrl(url) !== null });
    if (field) return field;
    // Converse has no "none" choice, and a conversation with tool blocks needs the tools.
    if (req.options?.tool_choice === 'none' && (req.options.tools?.length ?? 0) > 0 && hasToolBlocks(req.messages)) return 'tool_choice';
    return null;
  }

  async complete(req: ProviderRequest): Promise<Completion> {
    const { path, headers, body } = await this.request(req, false);
    return fromBedrock(await this.http.postJson(path, headers, body, req.signal), responseTool(req), this.name);
  }

  async openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>> {
    const { path, headers, body } = await this.request(req, true);
    const res = await this.http.post(path, headers, body, req.signal);
    return this.http.stream(res, req.signal, eventStreamMessages, new BedrockStream(responseTool(req), this.name, (t) => this.http.redact(t)));
  }

  private async request(req: ProviderRequest, stream: boolean) {
    const field = this.unsupported(req);
    if (field) throw new ProviderError('rejected', `${this.name}: kind bedrock cannot carry ${field}`, 400);
    const path = `${this.base}/model/${encodeURIComponent(req.model)}/${stream ? 'converse-stream' : 'converse'}`;
    const body = JSON.stringify(toBedrock(req));
    const headers = await signedHeaders(
      this.aws,
      this.host,
      path,
      { 'content-type': 'application/json', accept: stream ? 'application/vnd.amazon.eventstream' : 'application/json' },
      body,
    );
    return { path, headers, body };
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
