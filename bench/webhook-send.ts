import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import type { Claimed } from '../src/jobs/webhook-delivery/claim.ts';
import { DeliverySender } from '../src/jobs/webhook-delivery/send.ts';
import { EgressPolicy } from '../src/kernel/egress.ts';
import { eventEnvelopeJson } from '../src/domain/webhooks/envelope.ts';
import { AesGcmSecretBox } from '../src/kernel/secret-box.ts';
import { signatureHeader } from '../src/domain/webhooks/signing.ts';

/**
 * node --import tsx bench/webhook-send.ts: the worker's CPU per webhook attempt, the way DeliverySender sends now
 * (undici's dispatch API, one timer per attempt) and the way it did before (undici `request` with an
 * `AbortSignal.timeout`, then `body.dump()`), alternately, 16 at a time, against a plain HTTP receiver in a child
 * process that answers 200 at once. Both sign the same envelope; the first round is a warm-up and not printed.
 */
if (process.argv[2] === 'server') {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-length': '2' });
      res.end('ok');
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => process.send!((server.address() as { port: number }).port));
} else {
  const child = fork(fileURLToPath(import.meta.url), ['server'], { execArgv: ['--import', 'tsx'] });
  const port = await new Promise<number>((r) => child.once('message', (m) => r(m as number)));
  const box = new AesGcmSecretBox(randomBytes(32));
  const row: Claimed = {
    id: 'del_bench',
    webhookId: 'wh_bench',
    webhookStatus: 'active',
    projectId: 'prj_bench',
    url: `http://127.0.0.1:${port}/hooks`,
    secretEncrypted: box.seal('whsec_bench', 'wh_bench'),
    eventId: 'evt_bench',
    type: 'inference.completed',
    dataJson: JSON.stringify({ request_id: 'req_bench', route: 'mock/bench-model', cache_hit: false, cost_usd: '0.000011', region: 'us' }),
    eventCreatedAt: new Date(),
  };
  const timeoutMs = 10_000;
  const sender = new DeliverySender({ secretBox: box, egress: new EgressPolicy(['127.0.0.1']) }, timeoutMs);
  const agent = new Agent({ keepAliveTimeout: 30_000, connections: 32 });
  const url = new URL(row.url);
  /** What DeliverySender.send did before (2026-11-27): request() with a per-attempt AbortSignal.timeout, body drained. */
  const before = async () => {
    const body = eventEnvelopeJson({ id: row.eventId, type: row.type, createdAt: row.eventCreatedAt, projectId: row.projectId, data: JSON.parse(row.dataJson) });
    const res = await request(url, {
      method: 'POST',
      dispatcher: agent,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'svc-webhooks/1',
        'x-svc-signature': signatureHeader('whsec_bench', body, Math.floor(Date.now() / 1000)),
        'x-svc-event': row.type,
        'x-svc-delivery-id': row.id,
        'x-svc-webhook-id': row.webhookId,
      },
      body,
      signal: AbortSignal.timeout(timeoutMs),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    await res.body.dump({ limit: 64 * 1024 });
    if (res.statusCode !== 200) throw new Error(`answered ${res.statusCode}`);
  };
  const now = async () => {
    const r = await sender.send(row, new Date());
    if (r.error) throw new Error(r.error);
  };
  const N = Number(process.env.BENCH_CALLS ?? 8_000);
  for (let round = 0; round < 5; round++) {
    for (const [name, send] of [['before: request() + AbortSignal.timeout', before], ['now: DeliverySender.send (dispatch)', now]] as const) {
      let left = N;
      const started = process.cpuUsage();
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (left-- > 0) await send();
        }),
      );
      const used = process.cpuUsage(started);
      if (round > 0) console.log(`${name.padEnd(42)} ${((used.user + used.system) / N).toFixed(1)} µs per attempt`);
    }
  }
  await sender.close();
  await agent.close();
  child.kill();
}
