import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { mockAnswer, mockEmbedding } from '../../src/providers/mock.ts';
import { judgeScript } from '../../src/domain/evals/judge.ts';

/** What the mock does with the next chat-completions requests; change it between requests with set(). */
export interface MockBehaviour {
  /** HTTP status; anything but 200 answers `{error: {message}}`. */
  status?: number;
  /** That error's message; default `mock status <status>`. Given the request's Authorization header (to echo it). */
  errorMessage?: (authorization: string | undefined) => string;
  /** Wait before answering (real time). */
  delayMs?: number;
  /** Never answer (until the client gives up). */
  hang?: boolean;
  /** The answer; default: what the built-in mock answers (an echo of the last user message; a tool call or JSON when
   *  the request has tools or a response_format: src/providers/mock.ts mockAnswer). */
  content?: string;
  /** Stream pieces; default: the content word by word. */
  chunks?: string[];
  /** Wait between stream pieces. */
  chunkDelayMs?: number;
  /** Usage to report; default prompt = characters of all messages, completion = characters of the answer. null: none. */
  usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    /** As OpenAI reports prompt-cache reads (part of prompt_tokens). */
    prompt_tokens_details?: { cached_tokens: number };
    /** As OpenAI reports reasoning (part of completion_tokens). */
    completion_tokens_details?: { reasoning_tokens: number };
  } | null;
  finishReason?: string;
  /** Close the connection after this many stream pieces (a provider failing mid-stream). */
  dropAfterChunks?: number;
  /** After the first stream piece, send `data: {"error": {"message": …}}` (given the request's Authorization) and end. */
  streamError?: (authorization: string | undefined) => string;
}

export interface RecordedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
  /** The client closed the connection before the answer was complete (chat completions). */
  aborted?: boolean;
}

/**
 * A local OpenAI-compatible server on node:http for tests: POST <base>/chat/completions (JSON or SSE, tool calls
 * streamed as OpenAI's indexed deltas) and POST <base>/embeddings (float or base64), configurable status, delay, hang,
 * streaming and failures; counts calls and requests cut off by the client.
 */
export interface MockOpenAI {
  /** Base URL, e.g. http://127.0.0.1:PORT/v1 (what a providers file's base_url holds). */
  url: string;
  calls: number;
  /** Requests whose connection the client closed before the answer was complete. */
  aborted: number;
  requests: RecordedRequest[];
  set(b: MockBehaviour): void;
  reset(b?: MockBehaviour): void;
  close(): Promise<void>;
}

/** A message's text: a string as is, text parts joined. */
const textOf = (content: unknown): string =>
  typeof content === 'string' ? content : Array.isArray(content) ? content.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('') : '';

function lastUser(body: any): string {
  const msgs: Array<{ role: string; content: unknown }> = Array.isArray(body?.messages) ? body.messages : [];
  return textOf([...msgs].reverse().find((m) => m.role === 'user')?.content);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startMockOpenAI(initial: MockBehaviour = {}): Promise<MockOpenAI> {
  let behaviour: MockBehaviour = { ...initial };
  const sockets = new Set<Socket>();
  const state: MockOpenAI = {
    url: '',
    calls: 0,
    aborted: 0,
    requests: [],
    set: (b) => {
      behaviour = { ...b };
    },
    reset: (b = {}) => {
      behaviour = { ...b };
      state.calls = 0;
      state.aborted = 0;
      state.requests = [];
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: any = null;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = null;
    }
    if (req.method === 'POST' && req.url?.endsWith('/embeddings')) {
      state.calls += 1;
      state.requests.push({ path: req.url, headers: req.headers, body });
      const inputs: string[] = typeof body?.input === 'string' ? [body.input] : (body?.input ?? []);
      const data = inputs.map((text, index) => {
        const v = mockEmbedding(text, body?.dimensions);
        return { object: 'embedding', index, embedding: body?.encoding_format === 'base64' ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v };
      });
      const tokens = inputs.reduce((n, t) => n + t.length, 0);
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({ object: 'list', data, model: body?.model, usage: { prompt_tokens: tokens, total_tokens: tokens } }),
      );
      return;
    }
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    state.calls += 1;
    const recorded: RecordedRequest = { path: req.url, headers: req.headers, body };
    state.requests.push(recorded);
    const b = behaviour;
    let closed = false;
    res.on('close', () => {
      if (!res.writableFinished) {
        closed = true;
        recorded.aborted = true;
        state.aborted += 1;
      }
    });
    if (b.hang) return;
    if (b.delayMs) await sleep(b.delayMs);
    if (closed) return;
    const status = b.status ?? 200;
    if (status !== 200) {
      const message = b.errorMessage ? b.errorMessage(req.headers.authorization) : `mock status ${status}`;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message } }));
      return;
    }
    const smart = b.content === undefined && (body?.tools || body?.response_format);
    const answer = smart ? mockAnswer(body.messages ?? [], body.max_tokens, body, judgeScript) : null;
    const toolCalls = answer?.toolCalls;
    const content = b.content ?? answer?.content ?? lastUser(body);
    const promptChars = (body?.messages ?? []).reduce((n: number, m: any) => n + textOf(m.content).length, 0);
    const usage = b.usage === undefined ? { prompt_tokens: promptChars, completion_tokens: content.length } : b.usage;
    const finish = b.finishReason ?? answer?.finishReason ?? 'stop';
    const id = `chatcmpl-mock${state.calls}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body?.model ?? 'unknown';

    if (!body?.stream) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [
            {
              index: 0,
              message: toolCalls ? { role: 'assistant', content: null, tool_calls: toolCalls } : { role: 'assistant', content },
              finish_reason: finish,
            },
          ],
          ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
        }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const chunk = (delta: object, finish_reason: string | null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason }],
    });
    send(chunk({ role: 'assistant', content: '' }, null));
    if (b.streamError) {
      send({ error: { message: b.streamError(req.headers.authorization) } });
      res.end();
      return;
    }
    const pieces = b.chunks ?? content.match(/\S+\s*|\s+/g) ?? [];
    let n = 0;
    for (const piece of pieces) {
      if (closed) return;
      if (b.dropAfterChunks !== undefined && n >= b.dropAfterChunks) {
        res.socket?.destroy();
        return;
      }
      send(chunk({ content: piece }, null));
      n += 1;
      if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
    }
    if (closed) return;
    for (const [index, c] of (toolCalls ?? []).entries()) {
      send(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.function.name, arguments: '' } }] }, null));
      send(chunk({ tool_calls: [{ index, function: { arguments: c.function.arguments } }] }, null));
    }
    send(chunk({}, finish));
    if (usage && body?.stream_options?.include_usage) {
      send({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } });
    }
    res.end('data: [DONE]\n\n');
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  // Longer than node's 5 s: an idle pooled connection (a resumed job waits out SVC_ROUTING_TIMEOUT_MS) is not closed
  // just as the gateway reuses it, which on a loaded machine fails the call ("other side closed", model_unavailable).
  server.keepAliveTimeout = 60_000;
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('mock server has no port');
  state.url = `http://127.0.0.1:${addr.port}/v1`;
  return state;
}

/** Polls (real time) until `check` holds: for effects that land after the response, such as a disconnect's record. */
export async function eventually<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 5_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > until) throw new Error('condition not met in time');
    await sleep(20);
  }
}
