import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DeliverySender } from '../../src/jobs/webhook-delivery/send.ts';
import type { Claimed } from '../../src/jobs/webhook-delivery/claim.ts';
import { EgressPolicy } from '../../src/kernel/egress.ts';
import { AesGcmSecretBox } from '../../src/kernel/secret-box.ts';

/** One attempt against a plain HTTP receiver, what it answered, and how its connections ended. */
const box = new AesGcmSecretBox(randomBytes(32));
let server: http.Server | null = null;
let sender: DeliverySender | null = null;
afterEach(async () => {
  await sender?.close();
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = sender = null;
});

async function receiver(answer: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const seen = { requests: 0, connections: 0, closedSockets: 0 };
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.requests++;
      answer(req, res);
    });
  });
  server.on('connection', (socket) => {
    seen.connections++;
    socket.on('close', () => seen.closedSockets++);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}/hooks?x=1`, seen };
}

function row(url: string): Claimed {
  return {
    id: 'del_1',
    webhookId: 'wh_1',
    webhookStatus: 'active',
    projectId: 'prj_1',
    url,
    secretEncrypted: box.seal('whsec_test', 'wh_1'),
    eventId: 'evt_1',
    type: 'inference.completed',
    dataJson: '{"request_id":"req_1"}',
    eventCreatedAt: new Date(0),
  };
}

const newSender = (timeoutMs = 2_000) => (sender = new DeliverySender({ secretBox: box, egress: new EgressPolicy(['127.0.0.1']) }, timeoutMs));

describe('one delivery attempt', () => {
  it('reads a receiver\'s long answer only up to the drain limit: its status stands, the connection is closed', async () => {
    const { url, seen } = await receiver((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('x'.repeat(1024 * 1024));
    });
    const s = newSender();
    expect(await s.send(row(url), new Date())).toMatchObject({ responseStatus: 200, error: null });
    await expect.poll(() => seen.closedSockets).toBeGreaterThanOrEqual(1);
    expect(await s.send(row(url), new Date())).toMatchObject({ responseStatus: 200, error: null });
    expect(seen.requests).toBe(2);
  });

  it('keeps the connection of a short answer and sends the path with its query', async () => {
    const paths: string[] = [];
    const { url, seen } = await receiver((req, res) => {
      paths.push(req.url!);
      res.writeHead(204);
      res.end();
    });
    const s = newSender();
    for (let i = 0; i < 6; i++) expect(await s.send(row(url), new Date())).toMatchObject({ responseStatus: 204, error: null });
    // undici opens a second connection for a request sent as the previous one completes; none is closed.
    expect(seen.connections).toBeLessThanOrEqual(2);
    expect(seen.closedSockets).toBe(0);
    expect(paths).toEqual(Array(6).fill('/hooks?x=1'));
  });

  it('counts a status line followed by a cut or stalled body as the receiver\'s answer', async () => {
    const { url } = await receiver((req, res) => {
      res.writeHead(500, { 'content-length': '100' });
      res.write('partial');
      setImmediate(() => req.socket.destroy());
    });
    const s = newSender(300);
    expect(await s.send(row(url), new Date())).toMatchObject({ responseStatus: 500, error: 'receiver answered 500' });
  });

  it('times out a receiver that never answers, within its deadline', async () => {
    const { url } = await receiver(() => {
      // no answer
    });
    const s = newSender(300);
    const result = await s.send(row(url), new Date());
    expect(result).toMatchObject({ responseStatus: null, error: 'timeout: no response within the deadline' });
    expect(result.durationMs).toBeGreaterThanOrEqual(290);
    expect(result.durationMs).toBeLessThan(2_000);
  });
});
