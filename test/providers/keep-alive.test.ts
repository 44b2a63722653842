import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createProvider } from '../../src/providers/registry-factory.ts';
import { ProviderError } from '../../src/providers/types.ts';
import { request, specOf } from './kinds.fixtures.ts';

/**
 * A provider that closes a kept-alive connection just as the gateway reuses it: the request fails with "other side
 * closed" before any answer. Node's own server does this when its keep-alive timeout ends at that moment; here the
 * server does it on purpose, to the requests listed in `cut`.
 */
let server: http.Server | null = null;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = null;
});

async function provider(cut: (n: number) => boolean) {
  let n = 0;
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      n++;
      if (cut(n)) return void req.socket.destroy();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'pong' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 1 } }));
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  const port = (server!.address() as AddressInfo).port;
  const p = createProvider(specOf({ name: 'ka', kind: 'openai', base_url: `http://127.0.0.1:${port}/v1`, region: 'r', timeout_ms: 5000, models: [{ id: 'm', input_per_mtok: 1, output_per_mtok: 1 }] }));
  return { p, requests: () => n };
}

describe('a kept-alive provider connection closed under a request', () => {
  it('sends the request once more on a fresh connection, and answers', async () => {
    const { p, requests } = await provider((n) => n === 2);
    expect((await p.complete(request([{ role: 'user', content: 'one' }]))).content).toBe('pong');
    // The second request goes out on the first one's kept-alive connection, which the provider closes unanswered.
    expect((await p.complete(request([{ role: 'user', content: 'two' }]))).content).toBe('pong');
    expect(requests()).toBe(3);
    await p.close();
  });

  it('sends it again only once: a provider that keeps closing is a connection failure (the router falls back)', async () => {
    const { p, requests } = await provider(() => true);
    const err = await p.complete(request([{ role: 'user', content: 'x' }])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect((err as ProviderError).kind).toBe('connection');
    expect(requests()).toBe(2);
    await p.close();
  });
});
