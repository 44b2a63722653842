import { pieces, sendJson, sendSse, startFakeHttp, type FakeHttp, type Script } from './fake-http.ts';

export interface FakeGemini extends FakeHttp {
  /** The base_url for a providers file (…/v1beta). */
  url: string;
  set(script: Script): void;
}

const STATUS: Record<number, string> = { 400: 'INVALID_ARGUMENT', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE' };

/** The thought signature the fake gives the first function call of an answer (base64, as Gemini's are). */
export const fakeThoughtSignature = (name: string): string => Buffer.from(`fake-thought:${name}`, 'utf8').toString('base64');

/** The values Gemini documents for a function call it did not make ("skip" the validation). */
const DUMMY_SIGNATURES = new Set(['skip_thought_signature_validator', 'context_engineering_is_the_way_to_go']);

/**
 * Gemini 3's check of a request's history: in the current turn (the contents after the last user text), the first
 * functionCall part of every model step must carry the thoughtSignature Gemini gave it (or a documented dummy);
 * else 400 INVALID_ARGUMENT. Null when the history passes.
 */
export function missingThoughtSignature(contents: any[], issued: ReadonlySet<string>): string | null {
  let start = 0;
  contents.forEach((c, i) => {
    if (c?.role === 'user' && (c.parts ?? []).some((p: any) => typeof p?.text === 'string')) start = i + 1;
  });
  for (let i = start; i < contents.length; i++) {
    const c = contents[i];
    if (c?.role !== 'model') continue;
    const first = (c.parts ?? []).findIndex((p: any) => p?.functionCall);
    if (first === -1) continue;
    const part = c.parts[first];
    const sig = part.thoughtSignature;
    if (typeof sig !== 'string' || !(issued.has(sig) || DUMMY_SIGNATURES.has(sig))) {
      return `Function call \`${part.functionCall.name}\` in the ${i + 1}. content block is missing a \`thought_signature\`. Learn more: https://ai.google.dev/gemini-api/docs/thought-signatures`;
    }
  }
  return null;
}

/**
 * A local server speaking the Gemini API as documented: POST /v1beta/models/{model}:generateContent,
 * :streamGenerateContent?alt=sse (each event a partial GenerateContentResponse) and :batchEmbedContents, the key in
 * `x-goog-api-key` or `?key=` (a wrong key: 400 API_KEY_INVALID, as Gemini answers), errors as {error: {code, message,
 * status}}. Embeddings: a deterministic vector of `outputDimensionality` (default 4) values per input. The first
 * functionCall of an answer carries a thoughtSignature; for `gemini-3…` models a history whose function calls lack
 * theirs is refused (missingThoughtSignature). usageMetadata reports thoughtsTokenCount (apart from
 * candidatesTokenCount) and cachedContentTokenCount (within promptTokenCount) when the script has them; a script's
 * `thinking` is a `thought: true` part opening the answer.
 */
export async function startFakeGemini(apiKey: string, initial: Script = { text: 'Hello from Gemini.' }): Promise<FakeGemini> {
  let script: Script = initial;
  const issued = new Set<string>();
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
    if (m[1]!.startsWith('gemini-3')) {
      const missing = missingThoughtSignature(req.body.contents, issued);
      if (missing) return error(400, missing);
    }
    const calls = script.toolCalls ?? [];
    const usage = script.usage === undefined ? { input: 11, output: 7 } : script.usage;
    const usageMetadata = usage
      ? {
          promptTokenCount: usage.input,
          candidatesTokenCount: usage.output,
          ...(usage.cacheRead ? { cachedContentTokenCount: usage.cacheRead } : {}),
          ...(usage.thoughts ? { thoughtsTokenCount: usage.thoughts } : {}),
          totalTokenCount: usage.input + usage.output + (usage.thoughts ?? 0),
        }
      : undefined;
    const finishReason = script.stop ?? 'STOP';
    const callParts = calls.map((c, k) => {
      if (k > 0) return { functionCall: { name: c.name, args: c.input } };
      // Gemini signs the first function call of a step.
      const thoughtSignature = fakeThoughtSignature(c.name);
      issued.add(thoughtSignature);
      return { functionCall: { name: c.name, args: c.input }, thoughtSignature };
    });
    const thoughtParts = script.thinking ? [{ text: script.thinking, thought: true }] : [];
    if (method === 'generateContent') {
      const parts = [...thoughtParts, ...(script.text ? [{ text: script.text }] : []), ...callParts];
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
    if (thoughtParts.length > 0) events.push({ data: { candidates: [{ content: { role: 'model', parts: thoughtParts }, index: 0 }] } });
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
