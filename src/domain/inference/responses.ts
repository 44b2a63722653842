import { invalid } from '../../errors/svc-error.ts';
import type { ChatMessage, ContentPart, FunctionTool, ResponseFormat, ToolCall, ToolChoice } from '../../providers/types.ts';
import { InferenceRequest, type ResponsesRequest } from './schema.ts';
import { markChecked } from './validate.ts';

/** A content part of a Responses input item (schema.ts: input_text, output_text, input_image, refusal). */
type InputContent =
  | { type: 'input_text' | 'output_text'; text: string }
  | { type: 'input_image'; image_url: string; detail?: 'auto' | 'low' | 'high' }
  | { type: 'refusal'; refusal: string };

const partText = (parts: readonly { type: string; text?: string; refusal?: string }[]): string =>
  parts.map((p) => p.text ?? p.refusal ?? '').join('');

function chatParts(parts: readonly InputContent[]): ContentPart[] {
  return parts.map((p): ContentPart => {
    if (p.type === 'input_image') return { type: 'image_url', image_url: { url: p.image_url, ...(p.detail ? { detail: p.detail } : {}) } };
    return { type: 'text', text: p.type === 'refusal' ? p.refusal : p.text };
  });
}

/**
 * POST /v1/responses (CONTRACT §9, the stateless subset) as the internal chat request, so that it runs on the same
 * pipeline and through every provider kind: `instructions` first as a system message, message items as messages,
 * function_call items as the assistant's tool_calls (consecutive calls in one message), function_call_output items
 * as tool messages, reasoning items dropped; function tools, tool_choice and text.format translated to their
 * chat-completions names. `prior`: the conversation of `previous_response_id` (domain/privacy/responses.ts, which
 * also checks `store`), placed after the instructions and before the input.
 */
export function chatRequestOfResponse(r: ResponsesRequest, prior: readonly ChatMessage[] = []): InferenceRequest {
  const messages: ChatMessage[] = [];
  if (r.instructions) messages.push({ role: 'system', content: r.instructions });
  messages.push(...prior);
  if (typeof r.input === 'string') messages.push({ role: 'user', content: r.input });
  else if (r.input === undefined) {
    if (!r.template) throw invalid('input', 'Missing required parameter: input.');
  } else {
    for (const item of r.input) {
      if (item.type === 'reasoning') continue;
      if (item.type === 'function_call') {
        const call: ToolCall = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
        const last = messages[messages.length - 1];
        if (last?.role === 'assistant') (last.tool_calls ??= []).push(call);
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      } else if (item.type === 'function_call_output') {
        messages.push({ role: 'tool', tool_call_id: item.call_id, content: typeof item.output === 'string' ? item.output : partText(item.output as InputContent[]) });
      } else {
        const content = item.content;
        if (typeof content === 'string') messages.push({ role: item.role, content });
        // Only user messages carry images; the others' parts are their text.
        else messages.push({ role: item.role, content: item.role === 'user' ? chatParts(content as InputContent[]) : partText(content as InputContent[]) });
      }
    }
  }
  if (!r.template && (messages.length === 0 || messages.every((m) => m.role === 'system'))) {
    throw invalid('input', 'input holds no message to answer.');
  }

  const out: InferenceRequest = { model: r.model, ...(messages.length > 0 ? { messages: messages as InferenceRequest['messages'] } : {}) };
  // CONTRACT §10: the template's messages come first, then these (templates/inference-stage.ts).
  if (r.template) out.template = r.template;
  if (r.tools && r.tools.length > 0) {
    out.tools = r.tools.map(
      (t): FunctionTool => ({
        type: 'function',
        function: {
          name: t.name,
          ...(t.description != null ? { description: t.description } : {}),
          ...(t.parameters != null ? { parameters: t.parameters } : {}),
          ...(t.strict != null ? { strict: t.strict } : {}),
        },
      }),
    ) as InferenceRequest['tools'];
  }
  if (r.tool_choice !== undefined) {
    const c = r.tool_choice;
    const choice: ToolChoice = typeof c === 'string' ? c : { type: 'function', function: { name: c.name } };
    if (out.tools || choice === 'none') out.tool_choice = choice;
  }
  if (r.parallel_tool_calls != null) out.parallel_tool_calls = r.parallel_tool_calls;
  const f = r.text?.format;
  if (f) {
    const format: ResponseFormat =
      f.type === 'json_schema'
        ? {
            type: 'json_schema',
            json_schema: {
              name: f.name,
              schema: f.schema,
              ...(f.description !== undefined ? { description: f.description } : {}),
              ...(f.strict != null ? { strict: f.strict } : {}),
            },
          }
        : { type: f.type };
    out.response_format = format as InferenceRequest['response_format'];
  }
  if (r.max_output_tokens != null) out.max_tokens = r.max_output_tokens;
  if (r.temperature != null) out.temperature = r.temperature;
  if (r.top_p != null) out.top_p = r.top_p;
  const user = r.user ?? r.safety_identifier;
  if (user != null) out.user = user;
  if (r.reasoning?.effort != null) out.reasoning_effort = r.reasoning.effort;
  if (r.project_id != null) out.project_id = r.project_id;
  if (r.cache !== undefined) out.cache = r.cache;
  if (r.region != null) out.region = r.region;
  if (r.metadata != null) out.metadata = r.metadata;
  // Built from a checked request, field by field into the chat request's shape: no second walk over it.
  return markChecked(InferenceRequest, out);
}
