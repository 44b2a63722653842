import { ApiError } from '../api.ts';
import { session, sso } from '../session.ts';

/**
 * The console's calls to the gateway's /v1 inference routes (the Playground and the Models screen's test): as the
 * console's own sign-in (its key as Bearer, or an SSO session's cookie with its CSRF token), or as a key pasted for
 * this call only, which is never stored. Every call is an ordinary inference: limited, charged and recorded.
 */
export function v1Headers(pastedKey: string | null, project: string | null): Record<string, string> {
  const key = pastedKey ?? session.key();
  const csrf = key ? null : sso.csrf();
  return {
    'content-type': 'application/json',
    ...(key ? { authorization: `Bearer ${key}` } : {}),
    ...(csrf ? { 'x-svc-csrf-token': csrf } : {}),
    // A pasted key addresses its own project; the console's sign-in the project on screen (the operator needs it).
    ...(!pastedKey && project ? { 'x-svc-project': project } : {}),
  };
}

export interface ChatResult {
  id: string | null;
  requestId: string | null;
  model: string | null;
  content: string;
  finishReason: string | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  /** The gateway's `svc` object where the answer carries it (route, cost_usd, cache_hit, attempts, …). */
  extra: Record<string, unknown>;
  ms: number;
}

async function refusal(res: Response): Promise<ApiError> {
  const body = await res.json().catch(() => null);
  const e = body?.error ?? { code: 'internal_error', message: `The gateway answered ${res.status}.`, request_id: null, param: null };
  const reset = res.headers.get('x-svc-ratelimit-reset');
  return new ApiError(e.message, e.code, e.request_id ?? res.headers.get('x-svc-request-id'), res.status, e.param ?? null, reset ? Number(reset) : null);
}

/** The gateway's `svc` object beside OpenAI's fields (route, region, cache_hit, cost_usd, request_id, template, attempts). */
function extrasOf(obj: Record<string, unknown>): Record<string, unknown> {
  const svc = obj.svc;
  return svc && typeof svc === 'object' ? { ...(svc as Record<string, unknown>) } : {};
}

/**
 * POST /v1/chat/completions. With `stream`, `onDelta` gets the text as it arrives (server-sent events, OpenAI's chunk
 * shape); without, once. Resolves with the whole answer; a refusal throws the gateway's error.
 */
export async function chatCompletion(
  body: Record<string, unknown>,
  opts: { pastedKey: string | null; project: string | null; onDelta?: (text: string) => void; signal?: AbortSignal },
): Promise<ChatResult> {
  const started = performance.now();
  const res = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: v1Headers(opts.pastedKey, opts.project),
    body: JSON.stringify(body),
    signal: opts.signal,
  });
  if (!res.ok) throw await refusal(res);
  const requestId = res.headers.get('x-svc-request-id');
  const result: ChatResult = { id: null, requestId, model: null, content: '', finishReason: null, usage: null, extra: {}, ms: 0 };
  if (!body.stream) {
    const json = (await res.json()) as Record<string, any>;
    const choice = json.choices?.[0];
    result.id = json.id ?? null;
    result.model = json.model ?? null;
    result.content = typeof choice?.message?.content === 'string' ? choice.message.content : JSON.stringify(choice?.message ?? null);
    result.finishReason = choice?.finish_reason ?? null;
    result.usage = json.usage ?? null;
    result.extra = extrasOf(json);
    opts.onDelta?.(result.content);
    result.ms = Math.round(performance.now() - started);
    return result;
  }
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += value;
    let cut: number;
    while ((cut = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, cut);
      buffered = buffered.slice(cut + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') continue;
        const chunk = JSON.parse(data) as Record<string, any>;
        if (chunk.error) throw new ApiError(chunk.error.message, chunk.error.code ?? 'internal_error', chunk.error.request_id ?? requestId, 500, chunk.error.param ?? null);
        result.id ??= chunk.id ?? null;
        result.model ??= chunk.model ?? null;
        const choice = chunk.choices?.[0];
        const text = choice?.delta?.content;
        if (typeof text === 'string' && text !== '') {
          result.content += text;
          opts.onDelta?.(result.content);
        }
        if (choice?.finish_reason) result.finishReason = choice.finish_reason;
        if (chunk.usage) result.usage = chunk.usage;
        Object.assign(result.extra, extrasOf(chunk));
      }
    }
  }
  result.ms = Math.round(performance.now() - started);
  return result;
}
