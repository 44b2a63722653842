import { unixSeconds } from '../../context.ts';
import type { ResponsesRequest } from '../schema.ts';
import type { InferenceResult, InferenceStream } from '../types.ts';
import { svcOf } from './openai.ts';

/**
 * OpenAI's Response object as the gateway answers it: on /v1/responses (api/routes/responses.ts, whose stream uses the
 * item ids below) and in a batch's output lines (jobs/batch-runner), which must be the live bodies.
 */

export type Head = InferenceStream['head'];
type Usage = { input_tokens: number; input_tokens_details: { cached_tokens: number }; output_tokens: number; output_tokens_details: { reasoning_tokens: number }; total_tokens: number };

export const messageId = (id: string) => `msg_${id.replace(/^inf_/, '')}`;
export const callItemId = (callId: string) => `fc_${callId.replace(/^call_/, '')}`;

export function outputText(text: string) {
  return { type: 'output_text' as const, text, annotations: [] as unknown[], logprobs: [] as unknown[] };
}

/** The answer as output items: a message with its text (unless the model only called tools), then each function call. */
function outputItems(r: InferenceResult) {
  const items: unknown[] = [];
  if (r.content !== '' || !r.toolCalls) {
    items.push({ type: 'message', id: messageId(r.id), status: 'completed', role: 'assistant', content: [outputText(r.content)] });
  }
  for (const c of r.toolCalls ?? []) {
    items.push({ type: 'function_call', id: callItemId(c.id), call_id: c.id, name: c.function.name, arguments: c.function.arguments, status: 'completed' });
  }
  return items;
}

/** The Response object: the request's settings echoed as OpenAI does, the output, the usage; `svc` beside them (a batch's output lines too). */
export function presentResponse(body: ResponsesRequest, head: Head, result: InferenceResult | null, status = result ? statusOf(result) : 'in_progress') {
  let usage: Usage | null = null;
  if (result) {
    usage = {
      input_tokens: result.promptTokens,
      input_tokens_details: { cached_tokens: result.tokenDetails?.cacheReadTokens ?? 0 },
      output_tokens: result.completionTokens,
      output_tokens_details: { reasoning_tokens: result.tokenDetails?.reasoningTokens ?? 0 },
      total_tokens: result.promptTokens + result.completionTokens,
    };
  }
  return {
    id: head.id,
    object: 'response' as const,
    created_at: unixSeconds(head.createdAt),
    status,
    background: false,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: head.model,
    output: result ? outputItems(result) : [],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: null },
    store: body.store === true,
    temperature: body.temperature ?? 1,
    text: { format: body.text?.format ?? { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: (body.tools ?? []).map((t) => ({
      type: 'function' as const,
      name: t.name,
      description: t.description ?? null,
      parameters: t.parameters ?? null,
      strict: t.strict ?? true,
    })),
    top_p: body.top_p ?? 1,
    truncation: 'disabled' as const,
    usage,
    user: body.user ?? null,
    metadata: body.metadata ?? {},
    ...(result ? { svc: svcOf(result) } : {}),
  };
}

export const statusOf = (r: InferenceResult) => (r.finishReason === 'length' ? 'incomplete' : 'completed');
