import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import { ProviderError, type ProviderSignal, type StreamPart } from './types.ts';
import { refusedField } from './translate.ts';
import { postWhole, type WholeAnswer } from './whole-answer.ts';

/** Statuses that say the request itself is wrong: the same request would fail on every provider. */
const REJECTED = new Set([400, 413, 422]);

/**
 * What a provider's error text may not pass on to the caller or the logs: the provider's own API key (a provider that
 * echoes the request), and anything shaped like a credential (`Bearer …`, `sk-…`, an svc secret).
 */
export function redactCredentials(text: string, apiKey: string | null): string {
  let out = apiKey ? text.split(apiKey).join('[redacted]') : text;
  out = out.replace(/\b(Bearer|Basic)\s+[^\s"',;]+/gi, '$1 [redacted]');
  out = out.replace(/\b(sk|svc_sk|whsec)[-_][A-Za-z0-9_-]{8,}/g, '[redacted]');
  return out;
}

/** undici's own errors: a deadline it enforced, or a connection that failed. */
export function transportError(err: unknown, provider: string): ProviderError {
  // A provider that does not answer in time. Not answering a connect (ConnectTimeoutError) is a connection error:
  // fallback and, when nothing else answers, 503 model_unavailable (CONTRACT §8), not 408.
  if (err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return new ProviderError('timeout', `${provider}: ${(err as Error).message}`);
  }
  return new ProviderError('connection', `${provider}: ${(err as Error).message ?? 'connection failed'}`);
}

/**
 * One POST through a keep-alive pool, sent again once when the connection it went out on was closed by the provider
 * before any answer ("other side closed": the provider's idle timeout ending just as the pool reused the connection).
 * Only that failure and only once, on a fresh connection; the body is text, so it is sent again as it was.
 */
export async function postThroughPool(pool: Pool, opts: Dispatcher.RequestOptions & { signal: ProviderSignal }): Promise<Dispatcher.ResponseData> {
  try {
    return await pool.request(opts);
  } catch (err) {
    if (!(err instanceof undiciErrors.SocketError) || opts.signal.aborted) throw err;
    return pool.request(opts);
  }
}

/** Shapes of provider credentials beyond redactCredentials' own: Google API keys, AWS access key ids. */
const MORE_CREDENTIALS = [/\bAIza[0-9A-Za-z_-]{30,}/g, /\b(AKIA|ASIA)[0-9A-Z]{16}\b/g];

/** A provider's error text with its secrets, and anything shaped like a credential, replaced by [redacted]. */
export function redactAll(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s) out = out.split(s).join('[redacted]');
  out = redactCredentials(out, null);
  for (const re of MORE_CREDENTIALS) out = out.replace(re, '[redacted]');
  return out;
}

/**
 * The message of a provider's error body: OpenAI, Azure, Anthropic and Gemini put it in `error.message` (or `error`),
 * Bedrock and some OpenAI-compatible servers (vLLM) in `message` (or `Message`); else the body's start.
 */
export function errorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown; Message?: unknown };
    const e = parsed.error;
    if (typeof e === 'string') return e.slice(0, 300);
    if (e && typeof e.message === 'string') return e.message.slice(0, 300);
    if (typeof parsed.message === 'string') return parsed.message.slice(0, 300);
    if (typeof parsed.Message === 'string') return parsed.Message.slice(0, 300);
  } catch {
    // not JSON
  }
  return body.slice(0, 300);
}

/**
 * The request field a provider's refusal names: OpenAI's `error.param` when it is a top-level field, else a field the
 * message names in backticks (translate.ts refusedField: Anthropic's and Bedrock's temperature/top_p refusal).
 */
export function refusedParam(body: string): string | null {
  try {
    const p = (JSON.parse(body) as { error?: { param?: unknown } }).error?.param;
    if (typeof p === 'string' && /^[a-z_]+$/.test(p)) return p;
  } catch {
    // not JSON
  }
  return refusedField(errorMessage(body));
}

/** The hop's own reason when its signal aborted the call (the client left, a deadline), else the error as it came. */
export function abortReason(signal: ProviderSignal, err: unknown): unknown {
  return signal.aborted ? (signal.reason ?? err) : err;
}

/** A stateful translation of one provider stream's events into StreamParts. */
export interface StreamTranslator<E> {
  push(event: E): Iterable<StreamPart>;
  /** After the last event: what is still owed (the usage, a finish the provider never sent). */
  end(): Iterable<StreamPart>;
}

/**
 * The HTTP side every kind shares: one keep-alive undici Pool per provider (never global fetch), the hop's signal on
 * every request, 400/413/422 as `rejected` and every other status as `status` (the router falls back), undici's
 * failures as `connection`/`timeout`, and the kind's credentials redacted from every error text.
 */
export class Upstream {
  private readonly pool: Pool;

  constructor(
    readonly name: string,
    origin: string,
    timeoutMs: number,
    private readonly secrets: () => string[],
    /** A status the kind classifies itself (Gemini's 400 for a bad key is the provider's problem, not the request's). */
    private readonly classify: (status: number, body: string) => ProviderError['kind'] | null = () => null,
  ) {
    this.pool = new Pool(origin, {
      connections: 256,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      // Backstops; the router's own per-hop and routing deadlines usually fire first.
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connect: { timeout: Math.min(timeoutMs, 10_000) },
    });
  }

  redact(text: string): string {
    return redactAll(text, this.secrets());
  }

  /** A streamed answer (2xx only): the response with its body still to read, for stream(). */
  async post(path: string, headers: Record<string, string>, body: string, signal: ProviderSignal): Promise<Dispatcher.ResponseData> {
    let res: Dispatcher.ResponseData;
    try {
      res = await postThroughPool(this.pool, { method: 'POST', path, headers, body, signal });
    } catch (err) {
      throw abortReason(signal, transportError(err, this.name));
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return res;
    throw this.statusError(res.statusCode, await res.body.text().catch(() => ''));
  }

  /** A whole answer (2xx only), its JSON body parsed (whole-answer.ts: no response stream). */
  async postJson(path: string, headers: Record<string, string>, body: string, signal: ProviderSignal): Promise<any> {
    let answer: WholeAnswer;
    try {
      answer = await postWhole(this.pool, { path, headers, body, signal });
    } catch (err) {
      throw abortReason(signal, transportError(err, this.name));
    }
    if (answer.statusCode < 200 || answer.statusCode >= 300) throw this.statusError(answer.statusCode, answer.text);
    try {
      return JSON.parse(answer.text);
    } catch {
      throw new ProviderError('protocol', `${this.name}: the response is not JSON`);
    }
  }

  private statusError(status: number, text: string): ProviderError {
    const detail = `${this.name} answered ${status}: ${errorMessage(this.redact(text))}`;
    const kind = this.classify(status, text) ?? (REJECTED.has(status) ? 'rejected' : 'status');
    return new ProviderError(kind, detail, status, kind === 'rejected' ? refusedParam(text) : null);
  }

  /**
   * A 2xx streamed answer as StreamParts: `frames` cuts the body into the provider's events, `translator` turns them
   * into parts. Stopped early (client gone), the upstream body is dropped so that undici frees the connection.
   */
  stream<E>(
    res: Dispatcher.ResponseData,
    signal: ProviderSignal,
    frames: (body: AsyncIterable<Uint8Array>) => AsyncIterable<E>,
    translator: StreamTranslator<E>,
  ): AsyncIterable<StreamPart> {
    const name = this.name;
    return (async function* () {
      try {
        for await (const event of frames(res.body)) yield* translator.push(event);
        yield* translator.end();
      } catch (err) {
        if (err instanceof ProviderError) throw err;
        throw abortReason(signal, transportError(err, name));
      } finally {
        if (!res.body.destroyed) res.body.destroy();
      }
    })();
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => this.pool.destroy());
  }
}

/** The path part of a base URL, without its trailing slashes ('' for none). */
export function basePath(baseUrl: string): string {
  return new URL(baseUrl).pathname.replace(/\/+$/, '');
}

/** JSON text parsed, or undefined when it is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A JSON event of a stream, or a protocol error naming the provider. */
export function jsonEvent(data: string, name: string): any {
  const parsed = parseJson(data);
  if (parsed === undefined) throw new ProviderError('protocol', `${name}: a stream event is not JSON`);
  return parsed;
}
