import { pieces, sendJson, sendSse, startFakeHttp, type FakeHttp, type Script } from './fake-http.ts';

export interface FakeAzureOpenAI extends FakeHttp {
  /** The base_url for a providers file (the resource endpoint). */
  url: string;
  set(script: Script): void;
}

/**
 * A local server speaking Azure OpenAI as documented: POST /openai/deployments/{deployment}/chat/completions and
 * /embeddings with `?api-version=` (400 without) and the `api-key` header (401 otherwise); OpenAI's chat-completions
 * answer, or SSE chunks (a first chunk with prompt_filter_results and no choices, as Azure sends, tool_calls deltas,
 * a usage chunk, [DONE]); errors as {error: {code, message}}. Only the deployments given exist (404 DeploymentNotFound).
 * An api-version before 2024-12-01-preview refuses the `developer` role (400 invalid_value on messages[i].role), as
 * those versions do.
 */
export async function startFakeAzureOpenAI(apiKey: string, deployments: string[], initial: Script = { text: 'Hello from Azure.' }): Promise<FakeAzureOpenAI> {
  let script: Script = initial;
  const http = await startFakeHttp((req, res) => {
    const error = (status: number, code: string, message: string) => sendJson(res, status, { error: { code, message } });
    const m = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings)$/.exec(req.pathname);
    if (req.method !== 'POST' || !m) return error(404, '404', 'Resource not found');
    if (req.headers['api-key'] !== apiKey) {
      return error(401, '401', 'Access denied due to invalid subscription key or wrong API endpoint.');
    }
    if (!req.query.get('api-version')) return error(400, 'MissingApiVersionParameter', 'The api-version query parameter (?api-version=) is required for all requests.');
    if (!deployments.includes(decodeURIComponent(m[1]!))) return error(404, 'DeploymentNotFound', 'The API deployment for this resource does not exist.');
    if (script.status) return error(script.status, String(script.status), script.error ?? `fake status ${script.status}`);
    const version = req.query.get('api-version')!;
    const developer = (req.body?.messages ?? []).findIndex((msg: any) => msg?.role === 'developer');
    if (developer !== -1 && /^\d{4}-\d{2}-\d{2}/.test(version) && version.slice(0, 10) < '2024-12-01') {
      return sendJson(res, 400, {
        error: {
          message: "Invalid value: 'developer'. Supported values are: 'system', 'assistant', 'user', 'function', and 'tool'.",
          type: 'invalid_request_error',
          param: `messages[${developer}].role`,
          code: 'invalid_value',
        },
      });
    }
    if (m[2] === 'embeddings') {
      const input: string[] = Array.isArray(req.body?.input) ? req.body.input : [req.body?.input];
      const dims = req.body?.dimensions ?? 3;
      return sendJson(res, 200, {
        object: 'list',
        // In reverse order: the client must sort by index.
        data: input.map((t, index) => ({ object: 'embedding', index, embedding: Array.from({ length: dims }, (_, i) => (t.length + i) / 10) })).reverse(),
        model: 'text-embedding-3-small',
        usage: { prompt_tokens: input.length * 2, total_tokens: input.length * 2 },
      });
    }
    const calls = script.toolCalls ?? [];
    const finish = script.stop ?? (calls.length > 0 ? 'tool_calls' : 'stop');
    const usage = script.usage === undefined ? { input: 11, output: 7 } : script.usage;
    const u = usage ? { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } : undefined;
    const toolCalls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.input) } }));
    if (!req.body?.stream) {
      return sendJson(res, 200, {
        id: 'chatcmpl-fake',
        object: 'chat.completion',
        model: 'gpt-4o',
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: script.text ?? null, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
            finish_reason: finish,
            logprobs: null,
            content_filter_results: {},
          },
        ],
        usage: u,
        prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }],
      });
    }
    const chunk = (delta: Record<string, unknown>, finish_reason: string | null = null) => ({
      data: { id: 'chatcmpl-fake', object: 'chat.completion.chunk', model: 'gpt-4o', choices: [{ index: 0, delta, finish_reason }] },
    });
    const events: Array<{ data: unknown }> = [{ data: { id: '', object: '', model: '', choices: [], prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }] } }];
    events.push(chunk({ role: 'assistant', content: '' }));
    pieces(script.text ?? '').forEach((content, i) => {
      events.push(chunk({ content }));
      if (i === 0 && script.streamError) events.push({ data: { error: { code: 'server_error', message: script.streamError } } });
    });
    const errorAt = events.findIndex((e) => (e.data as any).error);
    if (errorAt !== -1) return sendSse(res, events.slice(0, errorAt + 1));
    calls.forEach((c, index) => {
      events.push(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }));
      for (const args of pieces(JSON.stringify(c.input), 3)) events.push(chunk({ tool_calls: [{ index, function: { arguments: args } }] }));
    });
    events.push(chunk({}, finish));
    if (u && req.body?.stream_options?.include_usage) events.push({ data: { id: 'chatcmpl-fake', object: 'chat.completion.chunk', choices: [], usage: u } });
    events.push({ data: '[DONE]' });
    sendSse(res, events);
  });
  return { ...http, url: http.origin, set: (s) => (script = s) };
}
