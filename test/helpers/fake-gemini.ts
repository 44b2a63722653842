import { pieces, sendJson, sendSse, startFakeHttp, type FakeHttp, type Script } from './fake-http.ts';

export interface FakeGemini extends FakeHttp {
  /** The base_url for a providers file (…/v1beta). */
  url: string;
  set(script: Script): void;
}

const STATUS: Record<number, string> = { 400: 'INVALID_ARGUMENT', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE' };

/**
 * A local server speaking the Gemini API as documented: POST /v1beta/models/{model}:generateContent,
 * :streamGenerateContent?alt=sse (each event a partial GenerateContentResponse) and :batchEmbedContents, the key in
 * `x-goog-api-key` or `?key=` (a wrong key: 400 API_KEY_INVALID, as Gemini answers), errors as {error: {code, message,
 * status}}. Embeddings: a deterministic vector of `outputDimensionality` (default 4) values per input.
 */
export async function startFakeGemini(apiKey: string, initial: Script = { text: 'Hello from Gemini.' }): Promise<FakeGemini> {
  let script: Script = initial;
  const http = await startFakeHttp((req, res) => {
    const error = (code: number, message: string, reason?: string) =>
      sendJson(res, code, {
        error: { code, message, status: STATUS[code] ?? 'UNKNOWN', ...(reason ? { details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason }] } : {}) },
      });
    const m = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent|batchEmbedContents)$/.exec(req.pathname);
    if (req.method !== 'POST' || !m) return error(404, `no route ${req.pathname}`);
    const key = req.headers['x-goog-api-key'] ?? req.query.get('key');
    if (key !== apiKey) return error(400, 'API key not valid. Please pass a valid API key.', 'API_KEY_INVALID');
    if (script.status) return error(script.status, script.error ?? `fake status ${script.status}`);
    const [, , method] = m;
    if (method === 'batchEmbedContents') {
      const requests: any[] = req.body?.requests ?? [];
      return sendJson(res, 200, {
        embeddings: requests.map((r) => {
          const text: string = r?.content?.parts?.[0]?.text ?? '';
          const dims = r?.outputDimensionality ?? 4;
          return { values: Array.from({ length: dims }, (_, i) => (text.length + i) / 100) };
        }),
      });
    }
    if (!Array.isArray(req.body?.contents)) return error(400, '* contents: required');
    const calls = script.toolCalls ?? [];
    const usage = script.usage === undefined ? { input: 11, output: 7 } : script.usage;
    const usageMetadata = usage ? { promptTokenCount: usage.input, candidatesTokenCount: usage.output, totalTokenCount: usage.input + usage.output } : undefined;
    const finishReason = script.stop ?? 'STOP';
    const callParts = calls.map((c) => ({ functionCall: { name: c.name, args: c.input } }));
    if (method === 'generateContent') {
      const parts = [...(script.text ? [{ text: script.text }] : []), ...callParts];
      // candidateCount: the other candidates say their index, in reverse order (the client must sort by index).
      const count = req.body?.generationConfig?.candidateCount ?? 1;
      const candidates = Array.from({ length: count }, (_, index) => ({
        content: { role: 'model', parts: index === 0 ? parts : [{ text: `candidate ${index}` }] },
        finishReason,
        index,
      })).reverse();
      return sendJson(res, 200, { candidates, usageMetadata, modelVersion: m[1] });
    }
    if (req.query.get('alt') !== 'sse') return error(400, 'this fake streams only with alt=sse');
    const events: Array<{ data: unknown }> = [];
    const texts = pieces(script.text ?? '');
    texts.forEach((text, i) => {
      events.push({ data: { candidates: [{ content: { role: 'model', parts: [{ text }] }, index: 0 }], usageMetadata: usage ? { promptTokenCount: usage.input } : undefined } });
      if (i === 0 && script.streamError) events.push({ data: { error: { code: 500, message: script.streamError, status: 'INTERNAL' } } });
    });
    const errorAt = events.findIndex((e) => (e.data as any).error);
    if (errorAt !== -1) return sendSse(res, events.slice(0, errorAt + 1));
    events.push({ data: { candidates: [{ content: { role: 'model', parts: callParts.length > 0 ? callParts : [{ text: '' }] }, finishReason, index: 0 }], usageMetadata } });
    sendSse(res, events);
  });
  return { ...http, url: `${http.origin}/v1beta`, set: (s) => (script = s) };
}
