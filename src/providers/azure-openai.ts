import type { ProviderSpec, SecretValue } from './config-file.ts';
import { chatBody, ChatChunkStream, fromChatCompletion } from './openai-wire.ts';
import { sseData } from './sse.ts';
import { ProviderError, type Completion, type EmbeddingRequest, type EmbeddingResult, type Provider, type ProviderRequest, type StreamPart } from './types.ts';
import { basePath, Upstream } from './upstream.ts';

/**
 * The first api-version that takes the `developer` role (it came with o1 in 2024-12-01-preview); earlier versions,
 * 2024-10-21 GA among them, refuse it, so the adapter sends such messages as `system`. Versions without a date (`v1`,
 * `preview`, `latest`) are the current API and take it.
 */
export const AZURE_DEVELOPER_ROLE_SINCE = '2024-12-01';

export function azureTakesDeveloperRole(apiVersion: string): boolean {
  const date = /^(\d{4}-\d{2}-\d{2})/.exec(apiVersion)?.[1];
  return date === undefined || date >= AZURE_DEVELOPER_ROLE_SINCE;
}

/**
 * Kind `azure_openai`: Azure OpenAI's chat completions and embeddings, one deployment per model
 * (`POST <base_url>/openai/deployments/{deployment}/chat/completions?api-version=…`, `/embeddings`), the key in the
 * `api-key` header. The wire format is OpenAI's, so it carries every field of the request.
 */
export class AzureOpenAIProvider implements Provider {
  readonly kind = 'azure_openai' as const;
  readonly name: string;
  readonly region: string;
  readonly timeoutMs: number;
  private readonly http: Upstream;
  private readonly base: string;
  private readonly apiKey: SecretValue | null;
  private readonly apiVersion: string;
  private readonly deployments: Map<string, string>;
  private readonly developerAsSystem: boolean;

  constructor(spec: ProviderSpec) {
    this.name = spec.name;
    this.region = spec.region;
    this.timeoutMs = spec.timeoutMs;
    this.apiKey = spec.apiKey;
    this.apiVersion = spec.apiVersion!;
    this.developerAsSystem = !azureTakesDeveloperRole(this.apiVersion);
    this.deployments = new Map(spec.models.map((m) => [m.id, m.deployment ?? m.id]));
    this.base = basePath(spec.baseUrl!);
    this.http = new Upstream(spec.name, new URL(spec.baseUrl!).origin, spec.timeoutMs, () => (this.apiKey ? [this.apiKey.reveal()] : []));
  }

  async complete(req: ProviderRequest): Promise<Completion> {
    const { path, headers, body } = this.request(req.model, 'chat/completions', chatBody(req, false, undefined, this.developerAsSystem), false);
    return fromChatCompletion(await this.http.postJson(path, headers, body, req.signal), this.name);
  }

  async openStream(req: ProviderRequest): Promise<AsyncIterable<StreamPart>> {
    const { path, headers, body } = this.request(req.model, 'chat/completions', chatBody(req, true, undefined, this.developerAsSystem), true);
    const res = await this.http.post(path, headers, body, req.signal);
    return this.http.stream(res, req.signal, sseData, new ChatChunkStream(this.name, (t) => this.http.redact(t)));
  }

  async embed(req: EmbeddingRequest): Promise<EmbeddingResult> {
    const body = {
      input: req.input,
      encoding_format: 'float',
      ...(req.dimensions !== undefined ? { dimensions: req.dimensions } : {}),
      ...(req.user !== undefined ? { user: req.user } : {}),
    };
    const call = this.request(req.model, 'embeddings', body, false);
    const parsed = await this.http.postJson(call.path, call.headers, call.body, req.signal);
    const data: any[] = Array.isArray(parsed?.data) ? [...parsed.data] : [];
    data.sort((a, b) => (a?.index ?? 0) - (b?.index ?? 0));
    const vectors = data.map((d) => d?.embedding);
    if (vectors.length !== req.input.length || !vectors.every((v) => Array.isArray(v) && v.every((x: unknown) => typeof x === 'number'))) {
      throw new ProviderError('protocol', `${this.name}: the response has no data[].embedding for every input`);
    }
    const prompt = parsed?.usage?.prompt_tokens;
    return { vectors, usage: Number.isInteger(prompt) && prompt >= 0 ? { promptTokens: prompt } : null };
  }

  private request(model: string, operation: string, body: unknown, stream: boolean) {
    const deployment = encodeURIComponent(this.deployments.get(model) ?? model);
    const path = `${this.base}/openai/deployments/${deployment}/${operation}?api-version=${encodeURIComponent(this.apiVersion)}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json' };
    if (this.apiKey) headers['api-key'] = this.apiKey.reveal();
    return { path, headers, body: JSON.stringify(body) };
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
