import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** A request as a fake provider received it. */
export interface Received {
  method: string;
  /** Path and query as sent. */
  url: string;
  pathname: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  raw: Buffer;
  /** The JSON body, or undefined. */
  body: any;
}

export interface FakeHttp {
  /** http://127.0.0.1:PORT (no path). */
  origin: string;
  requests: Received[];
  last(): Received;
  close(): Promise<void>;
}

/**
 * A local node:http server for the provider-kind fakes: records every request (path, query, headers, raw and parsed
 * body) and hands it to `handle`, which answers in the provider's wire format.
 */
export async function startFakeHttp(handle: (req: Received, res: ServerResponse) => void | Promise<void>): Promise<FakeHttp> {
  const sockets = new Set<Socket>();
  const requests: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: any;
      try {
        body = raw.length > 0 ? JSON.parse(raw.toString('utf8')) : undefined;
      } catch {
        body = undefined;
      }
      const u = new URL(req.url ?? '/', 'http://fake');
      const received: Received = { method: req.method ?? '', url: req.url ?? '', pathname: u.pathname, query: u.searchParams, headers: req.headers, raw, body };
      requests.push(received);
      Promise.resolve(handle(received, res)).catch((err) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `fake failed: ${(err as Error).message}` } }));
      });
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    last: () => {
      const r = requests.at(-1);
      if (!r) throw new Error('the fake received no request');
      return r;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** Server-sent events: `event:` (when given) and `data:` lines, a blank line after each. */
export function sendSse(res: ServerResponse, events: Array<{ event?: string; data: unknown }>): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) {
    res.write(`${e.event ? `event: ${e.event}\n` : ''}data: ${typeof e.data === 'string' ? e.data : JSON.stringify(e.data)}\n\n`);
  }
  res.end();
}

/** Text cut into `n` pieces (at least one character each), so that a stream has several deltas. */
export function pieces(text: string, n = 3): string[] {
  if (text.length === 0) return [];
  const size = Math.max(1, Math.ceil(text.length / n));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** What a fake answers: text and/or tool calls, a stop reason in the provider's words, usage, or an error. */
export interface Script {
  text?: string;
  toolCalls?: Array<{ id: string; name: string; input: Record<string, unknown> }>;
  /** The provider's own stop reason; default: its "end of turn", or its "tool use" when there are tool calls. */
  stop?: string;
  /**
   * Default { input: 11, output: 7 }; null: the provider reports none. `input` is the uncached prompt (Anthropic's
   * input_tokens, Bedrock's inputTokens) or the whole prompt where the provider counts so (Gemini's promptTokenCount);
   * `thoughts`: Gemini's thoughtsTokenCount; `cacheRead` / `cacheWrite`: the prompt-cache counts in the provider's names.
   */
  usage?: { input: number; output: number; thoughts?: number; cacheRead?: number; cacheWrite?: number } | null;
  /** An HTTP error status, answered with the provider's error body. */
  status?: number;
  /** That error's message. */
  error?: string;
  /** Streams: after the first piece, the provider's in-stream error event with this message. */
  streamError?: string;
  /** Anthropic: a thinking block (this text, signature "sig-<length>") opening the answer; Gemini: a thought part. */
  thinking?: string;
}
