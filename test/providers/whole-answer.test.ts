import { EventEmitter } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool, errors as undiciErrors } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { postWhole } from '../../src/providers/whole-answer.ts';

/** The router's signal shape (providers/router.ts HopSignal): an EventEmitter with aborted and reason. */
class Signal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;
  abort(reason: unknown) {
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

let server: http.Server | null = null;
let pool: Pool | null = null;
afterEach(async () => {
  await pool?.destroy();
  pool = null;
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = null;
});

/** A provider answering each request with `answer`; returns the pool and what the provider saw. */
async function provider(answer: (req: http.IncomingMessage, res: http.ServerResponse, n: number) => void) {
  const seen = { requests: 0, bodies: [] as string[], closed: 0 };
  server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      seen.requests++;
      seen.bodies.push(body);
      res.on('close', () => {
        if (!res.writableFinished) seen.closed++;
      });
      answer(req, res, seen.requests);
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  pool = new Pool(`http://127.0.0.1:${(server!.address() as AddressInfo).port}`, { connections: 4, pipelining: 1 });
  return { pool, seen };
}

const post = (p: Pool, signal: Signal | AbortSignal = new Signal()) =>
  postWhole(p, { path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body: '{"model":"m"}', signal });

describe('postWhole: a provider answer read whole on the dispatch API', () => {
  it('gives the status and the body text, whatever the status, across chunks and multi-byte characters', async () => {
    const long = 'é€'.repeat(40_000);
    const { pool, seen } = await provider((_req, res, n) => {
      if (n === 1) {
        res.writeHead(200, { 'content-type': 'application/json' });
        // Written in pieces that split a multi-byte character between chunks.
        const bytes = Buffer.from(JSON.stringify({ content: long }));
        res.write(bytes.subarray(0, 1001));
        setImmediate(() => res.end(bytes.subarray(1001)));
      } else {
        res.writeHead(429, { 'content-type': 'application/json' });
        res.end('\ufeff{"error":{"message":"slow down"}}');
      }
    });
    const ok = await post(pool);
    expect(ok.statusCode).toBe(200);
    expect(JSON.parse(ok.text)).toEqual({ content: long });
    expect(seen.bodies[0]).toBe('{"model":"m"}');
    const limited = await post(pool);
    // The byte-order mark is dropped, as undici's body.text() drops it.
    expect(limited).toEqual({ statusCode: 429, text: '{"error":{"message":"slow down"}}' });
  });

  it('is aborted by the hop signal while the provider holds the answer: the signal\'s reason, the connection closed', async () => {
    const { pool, seen } = await provider(() => {
      // never answers
    });
    const signal = new Signal();
    const pending = post(pool, signal);
    await expect.poll(() => seen.requests).toBe(1);
    const reason = new DOMException('provider call aborted (hop)', 'AbortError');
    signal.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await expect.poll(() => seen.closed).toBe(1);
    expect(signal.listenerCount('abort')).toBe(0);
  });

  it('with an AbortSignal too, and sends nothing when the signal is already aborted', async () => {
    const { pool, seen } = await provider((_req, res) => res.end('{}'));
    const controller = new AbortController();
    controller.abort(new Error('client left'));
    await expect(post(pool, controller.signal)).rejects.toThrow('client left');
    expect(seen.requests).toBe(0);
    const live = new AbortController();
    expect((await post(pool, live.signal)).text).toBe('{}');
  });

  it('does not send again an answer cut after it started: that is the provider\'s failure', async () => {
    const { pool, seen } = await provider((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"partial":');
      setImmediate(() => req.socket.destroy());
    });
    const err = await post(pool).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(undiciErrors.SocketError);
    expect(seen.requests).toBe(1);
  });
});
