import http from 'node:http';

/**
 * A zero-latency OpenAI-compatible provider for the benchmark: answers POST …/chat/completions at once with a fixed
 * completion (streamed as OpenAI's chunks when the request asks for a stream). Run as its own process so it does not share an event loop with the gateway or the load generator.
 */
const port = Number(process.env.PORT ?? 0);
const body = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 0,
  model: 'bench-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'pong' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 8, completion_tokens: 1, total_tokens: 9 },
});

// A streamed answer (`"stream": true` in the request): the same completion as OpenAI's chunks, its usage last.
const chunk = (delta: object, finish: string | null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 0, model: 'bench-model', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const streamed =
  chunk({ role: 'assistant', content: '' }, null) +
  chunk({ content: 'pong' }, null) +
  chunk({}, 'stop') +
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 0, model: 'bench-model', choices: [], usage: { prompt_tokens: 8, completion_tokens: 1, total_tokens: 9 } })}\n\n` +
  'data: [DONE]\n\n';

const server = http.createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    if (req.method === 'GET' && req.url?.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'bench-model', object: 'model' }] }));
      return;
    }
    // A byte search, not a JSON parse: the mock's own CPU per request stays what it was for whole answers.
    if (Buffer.concat(parts).includes('"stream":true')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.end(streamed);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(port, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`LISTENING ${typeof addr === 'object' && addr ? addr.port : port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
