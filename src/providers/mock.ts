import type { ProviderSpec } from './config-file.ts';
import { contentText, type ChatMessage, type Completion, type Provider, type ProviderRequest, type StreamPart } from './types.ts';

/** About four characters a token; deterministic, and cheap enough for the hot path. */
export const approxTokens = (text: string): number => (text.length === 0 ? 0 : Math.ceil(text.length / 4));

function echo(messages: ChatMessage[], maxTokens: number | undefined): { content: string; finishReason: string } {
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const text = contentText(lastUser?.content ?? null);
  if (maxTokens !== undefined && text.length > maxTokens * 4) {
    return { content: text.slice(0, maxTokens * 4), finishReason: 'length' };
  }
  return { content: text, finishReason: 'stop' };
}

const promptTokens = (messages: ChatMessage[]) => messages.reduce((n, m) => n + 1 + approxTokens(contentText(m.content)), 0);

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The operation was aborted.', 'AbortError');
}

/**
 * Kind `mock`, built in: answers with the last user message (a deterministic echo, cut to max_tokens × 4 characters),
 * in process, with no network. The default provider when SVC_PROVIDERS_FILE is unset.
 */
export class MockProvider implements Provider {
  readonly kind = 'mock' as const;
  readonly name: string;
  readonly region: string;
  readonly timeoutMs: number;

  constructor(spec: ProviderSpec) {
    this.name = spec.name;
    this.region = spec.region;
    this.timeoutMs = spec.timeoutMs;
  }

  async complete(req: ProviderRequest): Promise<Completion> {
    if (req.signal.aborted) throw abortError(req.signal);
    const { content, finishReason } = echo(req.messages, req.maxTokens);
    return { content, finishReason, usage: { promptTokens: promptTokens(req.messages), completionTokens: approxTokens(content) } };
  }

  async openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>> {
    if (req.signal.aborted) throw abortError(req.signal);
    const { content, finishReason } = echo(req.messages, req.maxTokens);
    const signal = req.signal;
    const prompt = promptTokens(req.messages);
    return (async function* () {
      // Word by word, keeping the spaces, so that the pieces join back to the whole answer.
      for (const piece of content.match(/\S+\s*|\s+/g) ?? []) {
        if (signal.aborted) throw abortError(signal);
        yield { type: 'delta', content: piece } as StreamPart;
      }
      yield { type: 'finish', finishReason };
      yield { type: 'usage', usage: { promptTokens: prompt, completionTokens: approxTokens(content) } };
    })();
  }

  async close(): Promise<void> {}
}
