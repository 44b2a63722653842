import { unixSeconds } from '../../context.ts';
import { microsToUsd } from '../../../kernel/money.ts';
import type { Choice, ToolCall } from '../../../providers/types.ts';
import type { InferenceResult } from '../types.ts';

/**
 * OpenAI's chat completion object as the gateway answers it: on /v1/chat/completions (api/routes/openai.ts) and in a
 * batch's output lines (jobs/batch-runner), which must be the live bodies.
 */

/** OpenAI's usage; prompt_tokens_details / completion_tokens_details when the provider reported cache reads / reasoning. */
export const usageOf = (r: InferenceResult) => {
  const u = { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens };
  const d = r.tokenDetails;
  if (!d) return u;
  return {
    ...u,
    ...(d.cacheReadTokens !== undefined ? { prompt_tokens_details: { cached_tokens: d.cacheReadTokens } } : {}),
    ...(d.reasoningTokens !== undefined ? { completion_tokens_details: { reasoning_tokens: d.reasoningTokens } } : {}),
  };
};

/** Where the gateway sent it and what it cost, beside OpenAI's fields. */
export const svcOf = (r: InferenceResult) => ({
  route: r.route,
  region: r.region,
  cache_hit: r.cacheHit,
  cost_usd: microsToUsd(r.costMicros),
  request_id: r.requestId,
  // CONTRACT §10/§11: only when a template was used / a JSON response_format was asked for.
  ...(r.template ? { template_id: r.template.id, template_version: r.template.version } : {}),
  ...(r.attempts !== undefined ? { attempts: r.attempts } : {}),
});

/** OpenAI's assistant message: content null when the model only called tools. */
function presentMessage(content: string | null, toolCalls: ToolCall[] | undefined, refusal?: string | null) {
  if (!toolCalls) return { role: 'assistant' as const, content: content ?? '', refusal: refusal ?? null };
  return { role: 'assistant' as const, content: content === '' ? null : content, refusal: refusal ?? null, tool_calls: toolCalls };
}

function presentChoice(c: Choice) {
  return { index: c.index, message: presentMessage(c.content, c.toolCalls, c.refusal), logprobs: c.logprobs ?? null, finish_reason: c.finishReason };
}

export function presentChatCompletion(r: InferenceResult) {
  return {
    id: r.id,
    object: 'chat.completion' as const,
    created: unixSeconds(r.createdAt),
    model: r.model,
    choices: r.choices
      ? r.choices.map(presentChoice)
      : [{ index: 0, message: presentMessage(r.content, r.toolCalls), logprobs: r.logprobs ?? null, finish_reason: r.finishReason }],
    usage: usageOf(r),
    system_fingerprint: null,
    svc: svcOf(r),
    ...(r.citations ? { citations: r.citations } : {}),
    // CONTRACT §11: what PII redaction replaced, when it ran.
    ...(r.pii ? { pii: r.pii } : {}),
  };
}
