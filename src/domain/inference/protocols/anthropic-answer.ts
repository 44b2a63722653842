import { microsToUsd } from '../../../kernel/money.ts';
import { countPromptTokens, estimateTokens } from '../../../limits/tokens.ts';
import type { ChatMessage } from '../../../providers/types.ts';
import type { InferenceResult, InferenceStream, StreamEvent, ThinkingEvent } from '../types.ts';

/**
 * The answer side of the Anthropic Messages API (CONTRACT §19): the Message object, count_tokens, the stream's event
 * sequence and the error types, from the gateway's inference result (the request side is anthropic.ts).
 */

/** The chat finish_reason as Anthropic's stop_reason. */
export function stopReason(finish: string): string {
  switch (finish) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}

const toolInput = (args: string): unknown => {
  try {
    const v = JSON.parse(args === '' ? '{}' : args);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
};

/** The answer's content blocks: its thinking (anthropic kind), its text (unless the model only called tools), then a
 *  tool_use block per call. */
function contentOf(r: Pick<InferenceResult, 'content' | 'toolCalls' | 'thinking'>) {
  const blocks: Record<string, unknown>[] = [...(r.thinking ?? [])];
  if (r.content !== '' || !r.toolCalls) blocks.push({ type: 'text', text: r.content });
  for (const c of r.toolCalls ?? []) blocks.push({ type: 'tool_use', id: c.id, name: c.function.name, input: toolInput(c.function.arguments) });
  return blocks;
}

/** Where the gateway sent it and what it cost, beside Anthropic's fields (as on /v1/chat/completions). */
export function svcFields(r: InferenceResult) {
  return { route: r.route, region: r.region, cache_hit: r.cacheHit, cost_usd: microsToUsd(r.costMicros), request_id: r.requestId, ...(r.pii ? { pii: r.pii } : {}) };
}

/**
 * Anthropic's usage: input_tokens without the prompt-cache reads and writes, which have their own fields (the gateway's
 * prompt_tokens counts the whole prompt).
 */
export function messageUsage(r: Pick<InferenceResult, 'promptTokens' | 'completionTokens' | 'tokenDetails'>) {
  const read = r.tokenDetails?.cacheReadTokens ?? 0;
  const write = r.tokenDetails?.cacheWriteTokens ?? 0;
  return {
    input_tokens: Math.max(0, r.promptTokens - read - write),
    cache_creation_input_tokens: write,
    cache_read_input_tokens: read,
    output_tokens: r.completionTokens,
  };
}

/** The Message object. */
export function presentMessage(r: InferenceResult) {
  return {
    id: r.id,
    type: 'message' as const,
    role: 'assistant' as const,
    model: r.model,
    content: contentOf(r),
    stop_reason: stopReason(r.finishReason),
    stop_sequence: null,
    usage: messageUsage(r),
    svc: svcFields(r),
  };
}

/** The prompt's tokens as the token reservation estimates them (message_start's input_tokens, before the answer). */
export const estimatedInputTokens = (messages: ChatMessage[], extraTokens: number): number => estimateTokens(messages, 0) + extraTokens;

/** count_tokens: the messages' text counted by the gateway's tokenizer, plus what the text does not show (tool
 *  definitions and calls, images) as the validation counts it. */
export async function countInputTokens(messages: ChatMessage[], extraTokens: number): Promise<number> {
  return (await countPromptTokens(messages)) + extraTokens;
}

// ---- the stream ----

export interface AnthropicEvent {
  event: string;
  data: Record<string, unknown>;
}

/**
 * The stream's events in Anthropic's order: message_start, ping, then per block content_block_start, its deltas
 * (thinking_delta and signature_delta, text_delta, input_json_delta), content_block_stop, and message_delta (stop_reason, usage), message_stop; an
 * `error` event when the provider fails after the first token. Choice 0 only (a Messages request has one).
 */
export class MessageEvents {
  private index = -1;
  private open: 'text' | 'tool' | 'thinking' | null = null;
  private readonly toolBlock = new Map<number, number>();
  private readonly thinkingBlock = new Map<number, number>();

  constructor(private readonly inputTokens: number) {}

  start(head: InferenceStream['head']): AnthropicEvent[] {
    return [
      {
        event: 'message_start',
        data: {
          type: 'message_start',
          message: {
            id: head.id,
            type: 'message',
            role: 'assistant',
            model: head.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: this.inputTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 },
          },
        },
      },
      { event: 'ping', data: { type: 'ping' } },
    ];
  }

  private close(out: AnthropicEvent[]): void {
    if (this.open !== null) out.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index: this.index } });
    this.open = null;
  }

  private begin(out: AnthropicEvent[], kind: 'text' | 'tool' | 'thinking', block: Record<string, unknown>): void {
    this.close(out);
    this.index++;
    this.open = kind;
    out.push({ event: 'content_block_start', data: { type: 'content_block_start', index: this.index, content_block: block } });
  }

  private delta(out: AnthropicEvent[], delta: Record<string, unknown>): void {
    out.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index: this.index, delta } });
  }

  event(e: StreamEvent | ThinkingEvent): AnthropicEvent[] {
    const out: AnthropicEvent[] = [];
    if (e.type === 'thinking') {
      if (e.redacted !== undefined) {
        this.begin(out, 'thinking', { type: 'redacted_thinking', data: e.redacted });
        this.thinkingBlock.set(e.index, this.index);
        return out;
      }
      if (this.open !== 'thinking' || this.thinkingBlock.get(e.index) !== this.index) {
        this.begin(out, 'thinking', { type: 'thinking', thinking: '', signature: '' });
        this.thinkingBlock.set(e.index, this.index);
      }
      if (e.thinking) this.delta(out, { type: 'thinking_delta', thinking: e.thinking });
      if (e.signature) this.delta(out, { type: 'signature_delta', signature: e.signature });
    } else if (e.type === 'delta') {
      if (e.choice || e.content === '') return out;
      if (this.open !== 'text') this.begin(out, 'text', { type: 'text', text: '' });
      this.delta(out, { type: 'text_delta', text: e.content });
    } else if (e.type === 'tool_call') {
      if (e.choice) return out;
      if (e.id !== undefined || e.name !== undefined || !this.toolBlock.has(e.index)) {
        this.begin(out, 'tool', { type: 'tool_use', id: e.id ?? '', name: e.name ?? '', input: {} });
        this.toolBlock.set(e.index, this.index);
      }
      // Pieces of a call whose block has closed cannot be sent in Anthropic's sequence; the kinds send calls in order.
      if (e.arguments !== '' && this.toolBlock.get(e.index) === this.index) {
        this.delta(out, { type: 'input_json_delta', partial_json: e.arguments });
      }
    } else if (e.type === 'done') {
      const r = e.result;
      this.close(out);
      out.push({
        event: 'message_delta',
        data: {
          type: 'message_delta',
          delta: { stop_reason: stopReason(r.finishReason), stop_sequence: null },
          usage: messageUsage(r),
          svc: svcFields(r),
        },
      });
      out.push({ event: 'message_stop', data: { type: 'message_stop' } });
    }
    return out;
  }
}

/** The svc error codes as Anthropic's error types (what its SDKs and Claude Code read). */
export function anthropicErrorType(code: string, status: number): string {
  if (code === 'budget_exceeded') return 'billing_error';
  switch (status) {
    case 400:
    case 409:
    case 422:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 402:
      return 'billing_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 408:
    case 504:
      return 'timeout_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    default:
      return 'api_error';
  }
}
