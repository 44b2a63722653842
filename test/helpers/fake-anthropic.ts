import { pieces, sendJson, sendSse, startFakeHttp, type FakeHttp, type Script } from './fake-http.ts';

export interface FakeAnthropic extends FakeHttp {
  /** The base_url for a providers file. */
  url: string;
  set(script: Script): void;
}

/**
 * A local server speaking Anthropic's Messages API as documented: POST /v1/messages with `x-api-key` and
 * `anthropic-version` (401 authentication_error / 400 otherwise), answering a Message object, or with `stream: true`
 * the SSE events message_start, content_block_start/delta/stop (text_delta, input_json_delta), ping, message_delta
 * (stop_reason, usage), message_stop, and `error` events; a thinking block (thinking_delta, signature_delta) first when
 * the script has one. Claude 4.5-generation models (`claude-…-4-5…`) refuse `temperature` together with `top_p` as the
 * API does; usage reports the prompt-cache reads and writes (cache_read_input_tokens, cache_creation_input_tokens,
 * apart from input_tokens) when the script has them.
 */

/** Claude's 4.5 generation (claude-sonnet-4-5, claude-haiku-4-5-20251001, claude-opus-4-5…), which takes one of temperature and top_p. */
export const ONE_SAMPLING_PARAMETER = /claude-(?:[a-z]+-)?4-5/;
export const BOTH_SAMPLING_MESSAGE = '`temperature` and `top_p` cannot both be specified for this model. Please use only one.';
const usageOf = (u: NonNullable<Script['usage']>) => ({
  input_tokens: u.input,
  cache_creation_input_tokens: u.cacheWrite ?? 0,
  cache_read_input_tokens: u.cacheRead ?? 0,
  output_tokens: u.output,
});

export async function startFakeAnthropic(apiKey: string, initial: Script = { text: 'Hello from Claude.' }): Promise<FakeAnthropic> {
  let script: Script = initial;
  const http = await startFakeHttp((req, res) => {
    const error = (status: number, type: string, message: string) => sendJson(res, status, { type: 'error', error: { type, message } });
    if (req.method !== 'POST' || req.pathname !== '/v1/messages') return error(404, 'not_found_error', `no route ${req.pathname}`);
    if (req.headers['x-api-key'] !== apiKey) return error(401, 'authentication_error', 'invalid x-api-key');
    if (!req.headers['anthropic-version']) return error(400, 'invalid_request_error', 'anthropic-version header is required');
    if (typeof req.body?.max_tokens !== 'number') return error(400, 'invalid_request_error', 'max_tokens: Field required');
    if (ONE_SAMPLING_PARAMETER.test(String(req.body.model)) && req.body.temperature !== undefined && req.body.top_p !== undefined) {
      return error(400, 'invalid_request_error', BOTH_SAMPLING_MESSAGE);
    }
    if (script.status) {
      const type = script.status === 429 ? 'rate_limit_error' : script.status >= 500 ? 'api_error' : 'invalid_request_error';
      return error(script.status, type, script.error ?? `fake status ${script.status}`);
    }
    const calls = script.toolCalls ?? [];
    const stop = script.stop ?? (calls.length > 0 ? 'tool_use' : 'end_turn');
    const usage = script.usage === undefined ? { input: 11, output: 7 } : script.usage;
    const blocks: any[] = [];
    if (script.thinking) blocks.push({ type: 'thinking', thinking: script.thinking, signature: `sig-${script.thinking.length}` });
    if (script.text) blocks.push({ type: 'text', text: script.text });
    for (const c of calls) blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: c.input });
    if (!req.body.stream) {
      return sendJson(res, 200, {
        id: 'msg_fake',
        type: 'message',
        role: 'assistant',
        model: req.body.model,
        content: blocks,
        stop_reason: stop,
        stop_sequence: null,
        usage: usage ? usageOf(usage) : undefined,
      });
    }
    const events: Array<{ event: string; data: unknown }> = [];
    const ev = (type: string, data: Record<string, unknown> = {}) => events.push({ event: type, data: { type, ...data } });
    ev('message_start', {
      message: { id: 'msg_fake', type: 'message', role: 'assistant', model: req.body.model, content: [], stop_reason: null, usage: usage ? { ...usageOf(usage), output_tokens: 1 } : undefined },
    });
    ev('ping');
    blocks.forEach((b, index) => {
      if (b.type === 'thinking') {
        ev('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
        for (const thinking of pieces(b.thinking)) ev('content_block_delta', { index, delta: { type: 'thinking_delta', thinking } });
        ev('content_block_delta', { index, delta: { type: 'signature_delta', signature: b.signature } });
      } else if (b.type === 'text') {
        ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
        pieces(b.text).forEach((text, i) => {
          ev('content_block_delta', { index, delta: { type: 'text_delta', text } });
          if (i === 0 && script.streamError) ev('error', { error: { type: 'overloaded_error', message: script.streamError } });
        });
      } else {
        ev('content_block_start', { index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
        for (const partial_json of pieces(JSON.stringify(b.input), 3)) ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json } });
      }
      ev('content_block_stop', { index });
    });
    if (script.streamError && !blocks.some((b) => b.type === 'text')) ev('error', { error: { type: 'overloaded_error', message: script.streamError } });
    const errorAt = events.findIndex((e) => e.event === 'error');
    if (errorAt !== -1) return sendSse(res, events.slice(0, errorAt + 1));
    ev('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: usage?.output ?? 0 } });
    ev('message_stop');
    sendSse(res, events);
  });
  return { ...http, url: http.origin, set: (s) => (script = s) };
}
