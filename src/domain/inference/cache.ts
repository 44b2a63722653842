import { hash } from 'node:crypto';
import type { ChatMessage, ChatOptions, Choice, Sampling, ToolCall } from '../../providers/types.ts';
import type { Clock } from '../../kernel/clock.ts';

/** What a hit gives back: the answer and where it came from (a hit itself costs zero tokens). */
export interface CachedAnswer {
  model: string;
  route: string;
  region: string;
  content: string;
  finishReason: string;
  toolCalls?: ToolCall[];
  logprobs?: unknown;
  choices?: Choice[];
}

export type CacheLookup = { status: 'hit'; answer: CachedAnswer } | { status: 'miss' } | { status: 'unavailable' };

/**
 * Exact-match response cache, per project: in process (below) or in Redis (redis/response-cache.ts). Never throws: a
 * broken store reads as `unavailable`.
 */
export interface ResponseCache {
  get(projectId: string, key: string): Promise<CacheLookup>;
  /** False when the store is unavailable. */
  set(projectId: string, key: string, answer: CachedAnswer, ttlS: number): Promise<boolean>;
}

export const DEFAULT_CACHE_TTL_S = 300;
export const MAX_CACHE_TTL_S = 86_400;

/**
 * Exact match: the requested model, the region constraint, the messages (tool calls, tool call ids and names
 * included) and every other request field that shapes the answer (sampling, tools, tool_choice, response_format, n,
 * logprobs, …). Built with a fixed key order, so equal requests hash equally whatever order their top-level JSON had
 * (inside a tool's JSON Schema the client's own order counts: a reordered schema is another entry).
 */
export function cacheKey(parts: {
  model: string;
  region: string | null;
  messages: readonly ChatMessage[];
  maxTokens: number | undefined;
  sampling: Sampling;
  options?: ChatOptions;
}): string {
  const s = parts.sampling;
  const canonical = JSON.stringify([
    parts.model,
    parts.region,
    parts.messages.map((m) =>
      m.tool_calls || m.tool_call_id !== undefined || m.name !== undefined
        ? [m.role, m.content, m.name ?? null, m.tool_calls ?? null, m.tool_call_id ?? null]
        : [m.role, m.content],
    ),
    parts.maxTokens ?? null,
    [s.temperature ?? null, s.top_p ?? null, s.stop ?? null, s.seed ?? null, s.presence_penalty ?? null, s.frequency_penalty ?? null],
    ...(parts.options ? [optionsKey(parts.options)] : []),
  ]);
  return hash('sha256', canonical, 'hex');
}

function optionsKey(o: ChatOptions): unknown[] {
  return [
    o.tools ?? null,
    o.tool_choice ?? null,
    o.parallel_tool_calls ?? null,
    o.response_format ?? null,
    o.n ?? null,
    o.logit_bias ?? null,
    o.logprobs ?? null,
    o.top_logprobs ?? null,
    o.user ?? null,
    o.reasoning_effort ?? null,
  ];
}

/** In process (no REDIS_URL): bounded, expiring on the injected clock, oldest entry evicted first. */
export class MemoryResponseCache implements ResponseCache {
  private readonly entries = new Map<string, { answer: CachedAnswer; expiresAt: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly maxEntries = 10_000,
  ) {}

  async get(projectId: string, key: string): Promise<CacheLookup> {
    const k = `${projectId}:${key}`;
    const e = this.entries.get(k);
    if (!e) return { status: 'miss' };
    if (e.expiresAt <= this.clock.now()) {
      this.entries.delete(k);
      return { status: 'miss' };
    }
    return { status: 'hit', answer: e.answer };
  }

  async set(projectId: string, key: string, answer: CachedAnswer, ttlS: number): Promise<boolean> {
    const k = `${projectId}:${key}`;
    this.entries.delete(k);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(k, { answer, expiresAt: this.clock.now() + ttlS * 1000 });
    return true;
  }
}
