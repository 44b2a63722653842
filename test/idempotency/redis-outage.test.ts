import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RedisIdempotencyStore } from '../../src/redis/idempotency-store.ts';
import { SvcError } from '../../src/errors/svc-error.ts';
import { redisHealthOf } from '../../src/redis/health.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { NO_SERVICES, NO_SERVICES_REASON, PrivateRedis } from '../helpers/private-services.ts';
import { user, writeProvidersFile } from '../inference/fixtures.ts';

/** The gateway's Redis command timeout in these tests (SVC_REDIS_COMMAND_TIMEOUT_MS). */
const COMMAND_TIMEOUT_MS = 500;
const idem = (key: string) => ({ headers: { 'idempotency-key': key } });

/**
 * Idempotency-Key while Redis is frozen (SIGSTOP: its socket open, nothing answers): a private Redis, never the shared
 * one. Real time passes here: the client's command timeout is what detects the freeze.
 */
describe.skipIf(NO_SERVICES)(NO_SERVICES ? `Idempotency-Key and a frozen Redis (${NO_SERVICES_REASON})` : 'Idempotency-Key and a frozen Redis', () => {
  let redis: PrivateRedis;
  let provider: MockOpenAI;
  let t: TestApp;
  let api: Client;
  let projectId: string;

  beforeAll(async () => {
    [redis, provider] = await Promise.all([PrivateRedis.start(), startMockOpenAI()]);
    const file = writeProvidersFile({
      providers: [
        { name: 'slow', kind: 'openai', base_url: provider.url, region: 'eu-west-1', timeout_ms: 5_000, models: [{ id: 'gpt-test', input_per_mtok: 1, output_per_mtok: 2 }] },
      ],
    });
    t = await buildTestApp({
      env: { REDIS_URL: redis.url, SVC_REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS), SVC_PROVIDERS_FILE: file, SVC_ROUTING_TIMEOUT_MS: '5000' },
    });
    const seeded = await seedProject(client(t.app));
    projectId = seeded.projectId;
    api = client(t.app, seeded.secret);
  }, 60_000);
  afterAll(async () => {
    redis?.unfreeze();
    await t?.close();
    await Promise.all([redis?.destroy(), provider?.close()]);
  });

  /** Freezes Redis and waits until the gateway knows (/readyz 503), as the first requests after a freeze would find out. */
  async function freeze(): Promise<void> {
    redis.freeze();
    await vi.waitFor(async () => expect((await api.get('/readyz', { key: null })).status).toBe(503), { timeout: 5_000, interval: 50 });
  }

  async function unfreeze(): Promise<void> {
    redis.unfreeze();
    await vi.waitFor(async () => expect((await api.get('/readyz', { key: null })).status).toBe(200), { timeout: 5_000, interval: 50 });
  }

  it('refuses a request with an Idempotency-Key at once (retryable 500, nothing run) and runs it once Redis answers', async () => {
    const body = { project_id: projectId, name: 'frozen-idem', scopes: ['keys:manage'] };
    await freeze();
    try {
      const started = performance.now();
      const refused = await api.post('/v1/keys', body, idem('frozen-1'));
      expect(performance.now() - started).toBeLessThan(COMMAND_TIMEOUT_MS);
      expectError(refused, 500, 'internal_error', 'Idempotency-Key');
      expect(refused.body.error.message).toMatch(/not run.*same Idempotency-Key/);
      expect(await t.deps.db.apiKey.count({ where: { projectId, name: 'frozen-idem' } })).toBe(0);
      // Without the header the request does not need the store: served (degraded).
      const plain = await api.post('/v1/keys', { ...body, name: 'frozen-plain' });
      expect(plain.status).toBe(200);
    } finally {
      await unfreeze();
    }
    const ran = await api.post('/v1/keys', body, idem('frozen-1'));
    expect(ran.status).toBe(200);
    expect(ran.headers['idempotent-replayed']).toBeUndefined();
    const replay = await api.post('/v1/keys', body, idem('frozen-1'));
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(ran.body.id);
    expect(await t.deps.db.apiKey.count({ where: { projectId, name: 'frozen-idem' } })).toBe(1);
  });

  it('an inference that ran while Redis froze under it is replayed once Redis answers, never run twice', async () => {
    provider.reset({ delayMs: 200 });
    const body = { project_id: projectId, model: 'gpt-test', messages: user('charged once') };
    const first = api.post('/v1/inference', body, idem('ran-frozen'));
    // The key is claimed (Redis answered); the provider is working on it when Redis freezes.
    await vi.waitFor(() => expect(provider.calls).toBe(1), { timeout: 5_000, interval: 5 });
    redis.freeze();
    let answered: Awaited<typeof first>;
    try {
      answered = await first;
      expect(answered.status).toBe(200);
      // Its stored response could not be written yet: a retry now cannot be checked, so it is refused, not run.
      expectError(await api.post('/v1/inference', body, idem('ran-frozen')), 500, 'internal_error', 'Idempotency-Key');
      expect(provider.calls).toBe(1);
    } finally {
      await unfreeze();
    }
    // Written as soon as Redis answered again: the retry gets the first response, not 409 "still running".
    const retry = await api.post('/v1/inference', body, idem('ran-frozen'));
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(answered.body);
    expect(provider.calls).toBe(1);
  });

  it('releases a claim that Redis took only after the request gave up on it, so that a retry is not refused for the lease', async () => {
    // The store alone, on its own client: a claim sent into a frozen Redis lands when it thaws.
    const conn = new Redis(redis.url, { commandTimeout: COMMAND_TIMEOUT_MS, enableAutoPipelining: true, autoPipeliningIgnoredCommands: ['ping'] });
    try {
      await conn.ping();
      const store = new RedisIdempotencyStore(conn, 'claims:');
      redis.freeze();
      let refused: unknown;
      try {
        refused = await store.begin('prj_x', 'in-flight', 'hash-1', Date.now()).catch((err: unknown) => err);
      } finally {
        redis.unfreeze();
      }
      expect(refused).toBeInstanceOf(SvcError);
      expect(refused).toMatchObject({ code: 'internal_error', param: 'Idempotency-Key' });
      expect(store.owedWrites).toBe(1);
      // Redis answers again (a PING, as /readyz sends): the claim that landed after all is removed.
      expect(await redisHealthOf(conn).check()).toBe(true);
      expect(await store.begin('prj_x', 'in-flight', 'hash-1', Date.now())).toEqual({ kind: 'started' });
      expect(store.owedWrites).toBe(0);
    } finally {
      conn.disconnect();
    }
  });
});
