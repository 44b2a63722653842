import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { REDIS_URL } from '../helpers/services.ts';

/** A TCP relay in front of the real Redis that the test can cut and restore on the same port: a Redis outage. */
class RedisRelay {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;
  constructor(private readonly target: URL) {}

  async start(): Promise<void> {
    this.server = net.createServer((inbound) => {
      const outbound = net.connect(Number(this.target.port || 6379), this.target.hostname);
      for (const s of [inbound, outbound]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {});
      }
      inbound.pipe(outbound).pipe(inbound);
      inbound.on('close', () => outbound.destroy());
      outbound.on('close', () => inbound.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}

const rl = (res: Awaited<ReturnType<Client['get']>>) => ({
  limit: Number(res.headers['x-svc-ratelimit-limit']),
  remaining: Number(res.headers['x-svc-ratelimit-remaining']),
});

describe.skipIf(!REDIS_URL)('when Redis becomes unreachable', () => {
  let relay: RedisRelay;
  let t: TestApp;

  beforeAll(async () => {
    relay = new RedisRelay(new URL(REDIS_URL!));
    await relay.start();
    t = await buildTestApp({ env: { REDIS_URL: `redis://127.0.0.1:${relay.port}` } });
  });
  afterAll(async () => {
    await t.close();
    await relay.stop();
  });

  it('keeps serving with in-process limits, says so once and on /readyz, and returns to Redis by itself', async () => {
    const operator = client(t.app);
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    const anon = { get: (url: string) => operator.get(url, { key: null }) };
    for (let i = 1; i <= 3; i++) expect(rl(await api.get(`/v1/projects/${projectId}`))).toEqual({ limit: 60, remaining: 60 - i });
    expect((await anon.get('/readyz')).body.checks).toMatchObject({ redis: 'ok', limits: 'ok' });

    await relay.stop();
    await vi.waitFor(() => expect(t.deps.redis!.status).not.toBe('ready'), { timeout: 5_000 });

    // Served from this replica's own windows, which start where the shared ones were (3 of 60 used), not full.
    const during = [];
    for (let i = 0; i < 5; i++) during.push(await api.get(`/v1/projects/${projectId}`));
    expect(during.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(during.map((r) => rl(r).remaining)).toEqual([56, 55, 54, 53, 52]);
    const ready = await anon.get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.checks).toMatchObject({ redis: 'unavailable', limits: 'degraded' });
    const announced = t.logs.lines.filter((l) => l.includes('rate limits fall back to per-replica in-process windows'));
    expect(announced).toHaveLength(1);
    expect(JSON.parse(announced[0]!).level).toBe(50);

    await relay.start();
    await vi.waitFor(
      async () => {
        const res = await anon.get('/readyz');
        expect(res.status).toBe(200);
        expect(res.body.checks).toMatchObject({ redis: 'ok', limits: 'ok' });
      },
      { timeout: 10_000, interval: 100 },
    );
    // Back on the shared windows in Redis, where 3 of 60 were used before the outage and the 5 taken meanwhile are
    // applied once it answers (owed): the outage handed out no extra window.
    expect(rl(await api.get(`/v1/projects/${projectId}`))).toEqual({ limit: 60, remaining: 51 });
    expect(t.logs.lines.filter((l) => l.includes('rate limits are shared across replicas again'))).toHaveLength(1);
    expect(t.logs.lines.filter((l) => l.includes('rate limits fall back'))).toHaveLength(1);
  });
});
