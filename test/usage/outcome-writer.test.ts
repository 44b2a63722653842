import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { newId } from '../../src/db/ids.ts';
import { periodOf } from '../../src/domain/budgets/service.ts';
import { testOutcome } from '../helpers/outcomes.ts';
import { MemoryOutcomeWriter } from '../../src/jobs/outcomes/memory-queue.ts';
import { RedisOutcomeWriter } from '../../src/jobs/outcomes/redis-stream.ts';
import { encodeOutcome, encodeOutcomeBatch } from '../../src/jobs/outcomes/codec.ts';
import type { InferenceOutcome } from '../../src/domain/usage/outcome.ts';
import { AesGcmSecretBox } from '../../src/kernel/secret-box.ts';
import { persistOutcomes } from '../../src/jobs/outcomes/persist-outcomes.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { REDIS_URL, uniqueName } from '../helpers/services.ts';
import { user, writeProvidersFile } from '../inference/fixtures.ts';

let t: TestApp;
/** persistOutcomes' ports as the app's outcome writer has them: the driver and the sealer of retained content. */
const persistPorts = () => ({ sql: t.deps.database.sql, sealer: t.deps.webhooks.secretBox });
let operator: Client;

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [{ name: 'priced', kind: 'mock', region: 'local', models: [{ id: 'mock-priced', input_per_mtok: 1, output_per_mtok: 2 }] }],
  });
  // A short lease, so that taking over a dead replica's entries fits in a test.
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_OUTCOME_LEASE_MS: '500' } });
  operator = client(t.app);
});
afterAll(() => t.close());

/** A project with a webhook on inference.completed and a key with a budget. */
async function setUp(budgetUsd = 10) {
  const { projectId } = await seedProject(operator);
  const key = await operator.post('/v1/keys', { project_id: projectId, name: uniqueName('k'), scopes: ['inference:write'], budget_usd: budgetUsd });
  const webhookId = newId('wh');
  await t.deps.db.webhook.create({
    data: {
      id: webhookId,
      projectId,
      url: 'https://hooks.example.com/x',
      events: ['inference.completed', 'budget.threshold', 'budget.exceeded'],
      status: 'active',
      secretEncrypted: 'not-used-here',
      createdAt: new Date(t.clock.now()),
    },
  });
  return { projectId, webhookId, keyId: key.body.id as string, api: client(t.app, key.body.secret as string) };
}

const outcome = (projectId: string, keyId: string, costMicros: bigint) => testOutcome(projectId, keyId, new Date(t.clock.now()), costMicros);

/** The outcome with a retained record whose content (in clear, as the request path hands it over) carries `marker`. */
const withContent = (o: InferenceOutcome, marker: string): InferenceOutcome => ({
  ...o,
  retained: {
    inferenceId: newId('inf'),
    status: 'succeeded',
    content: { request: { model: 'mock-priced', messages: [{ role: 'user', content: marker }] }, response: null },
    retainedUntil: t.clock.now() + 86_400_000,
  },
});

async function written(projectId: string, webhookId: string, keyId: string) {
  const period = periodOf(new Date(t.clock.now()));
  const spend = await t.deps.db.budgetSpend.findMany({ where: { projectId, period } });
  return {
    records: await t.deps.db.usageRecord.count({ where: { projectId } }),
    events: await t.deps.db.event.count({ where: { projectId, type: 'inference.completed' } }),
    deliveries: await t.deps.db.webhookDelivery.count({ where: { webhookId, eventType: 'inference.completed' } }),
    keySpent: spend.find((s) => s.scope === `key:${keyId}`)?.spentMicros ?? 0n,
    projectSpent: spend.find((s) => s.scope === `project:${projectId}`)?.spentMicros ?? 0n,
    thresholds: (await t.deps.db.event.findMany({ where: { projectId, type: { in: ['budget.threshold', 'budget.exceeded'] } } })).map(
      (e) => (e.data as { threshold: number }).threshold,
    ),
  };
}

describe('a batch of outcomes', () => {
  it('is written once even when written again (an entry re-read after a crash): no second record, event, delivery or charge', async () => {
    const { projectId, webhookId, keyId } = await setUp();
    const batch = [outcome(projectId, keyId, 1_000_000n), outcome(projectId, keyId, 2_000_000n)];
    const now = new Date(t.clock.now());
    await persistOutcomes(persistPorts(), batch, now);
    await persistOutcomes(persistPorts(), [...batch, outcome(projectId, keyId, 5_000_000n)], now);
    await persistOutcomes(persistPorts(), batch, now);
    expect(await written(projectId, webhookId, keyId)).toEqual({
      records: 3,
      events: 3,
      deliveries: 3,
      keySpent: 8_000_000n,
      projectSpent: 8_000_000n,
      thresholds: [0.8],
    });
  });

  it('fires each budget threshold once when batches from two replicas cross it together', async () => {
    const { projectId, webhookId, keyId } = await setUp(10);
    const now = new Date(t.clock.now());
    const batches = Array.from({ length: 4 }, () => Array.from({ length: 5 }, () => outcome(projectId, keyId, 600_000n)));
    await Promise.all(batches.map((b) => persistOutcomes(persistPorts(), b, now)));
    const w = await written(projectId, webhookId, keyId);
    expect(w.keySpent).toBe(12_000_000n);
    expect(w.thresholds.sort()).toEqual([0.8, 0.95, 1]);
    expect(await t.deps.db.webhookDelivery.count({ where: { webhookId, eventType: { in: ['budget.threshold', 'budget.exceeded'] } } })).toBe(3);
  });
});

describe('the outcome writer', () => {
  it('writes every accepted outcome when closed (SIGTERM), without being flushed first', async () => {
    const own = await buildTestApp();
    const seeded = await seedProject(client(own.app));
    const api = client(own.app, seeded.secret);
    own.deps.outcomes.pause();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await api.post('/v1/inference', { model: 'mock-1', project_id: seeded.projectId, messages: user(`close ${i}`) });
      expect(res.status).toBe(200);
      ids.push(res.body.request_id);
    }
    expect(await own.deps.db.usageRecord.count({ where: { requestId: { in: ids } } })).toBe(0);
    try {
      await own.deps.outcomes.close();
      expect(await own.deps.db.usageRecord.count({ where: { requestId: { in: ids } } })).toBe(5);
    } finally {
      await own.close();
    }
  });

  it('sets aside an outcome PostgreSQL keeps refusing, without holding the others back, its content still sealed', async () => {
    const { projectId, keyId } = await setUp();
    const good = [outcome(projectId, keyId, 0n), outcome(projectId, keyId, 0n)];
    // No such project: its usage record breaks the foreign key, whatever the batch.
    const marker = `poison-content-${uniqueName('m')}`;
    const poison = withContent(outcome('prj_00000000000000000000000000', keyId, 0n), marker);
    await t.deps.outcomes.record(good[0]!);
    await t.deps.outcomes.record(poison);
    await t.deps.outcomes.record(good[1]!);
    expect(await t.deps.outcomes.flush({ timeoutMs: 10_000 })).toBe(true);
    expect(await t.deps.db.usageRecord.count({ where: { requestId: { in: good.map((o) => o.requestId) } } })).toBe(2);
    expect(await t.deps.db.usageRecord.count({ where: { requestId: poison.requestId } })).toBe(0);
    expect(t.deps.outcomes.stats().lost).toBeGreaterThanOrEqual(1);
    if (t.deps.outcomes instanceof RedisOutcomeWriter) {
      const raw = new Redis(REDIS_URL!);
      try {
        const dead = (await raw.xrange(`${t.deps.outcomes.stream}:dead`, '-', '+')) as [string, string[]][];
        const kept = dead.map(([, f]) => JSON.parse(f[f.indexOf('o') + 1]!)).find((o) => o.requestId === poison.requestId);
        // Set aside as it would be stored: the content sealed, bound to its inference, never in clear.
        expect(t.deps.webhooks.secretBox.open(kept.retained.sealed, poison.retained!.inferenceId)).toContain(marker);
        expect(JSON.stringify(dead)).not.toContain(marker);
      } finally {
        raw.disconnect();
      }
    } else {
      expect(t.logs.text).toContain(poison.requestId);
    }
    expect(t.logs.text).not.toContain(marker);
  });

  it('seeds the month counter from budget_spend the first time a scope is read', async () => {
    const { projectId, keyId, api } = await setUp(1);
    await t.deps.db.budgetSpend.create({
      data: { scope: `key:${keyId}`, period: periodOf(new Date(t.clock.now())), projectId, spentMicros: 1_000_000n, thresholdsSent: [], updatedAt: new Date() },
    });
    const res = await api.post('/v1/inference', { model: 'mock-priced', project_id: projectId, messages: user('x') });
    expectError(res, 429, 'budget_exceeded');
    expect(res.body.error.message).toMatch(/spent \$1\.00/);
  });

  it('writes what it accepts within milliseconds, without being flushed (accept → commit lag, measured)', async () => {
    const { projectId, api } = await setUp(1_000);
    const limits = { requests_per_minute: 10_000, tokens_per_minute: 10_000_000, burst: 0 };
    expect((await operator.put(`/v1/projects/${projectId}/rate-limits`, limits)).status).toBe(200);
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await api.post('/v1/inference', { model: 'mock-priced', project_id: projectId, messages: user(`lag ${i}`) });
      expect(res.status).toBe(200);
      ids.push(res.body.request_id);
    }
    await vi.waitFor(async () => expect(await t.deps.db.usageRecord.count({ where: { requestId: { in: ids } } })).toBe(100), {
      timeout: 5_000,
      interval: 10,
    });
    const { lagMs, batchMs, batches } = t.deps.outcomes.stats();
    console.info(
      `outcome writer (${t.deps.outcomes.kind}): accept → commit lag p50 ${lagMs.p50} ms, p99 ${lagMs.p99} ms, max ${lagMs.max} ms; ` +
        `batch transaction p50 ${batchMs.p50} ms, p99 ${batchMs.p99} ms (${batches} batches)`,
    );
    expect(lagMs.p99).toBeLessThan(1_000);
  });

  it.skipIf(REDIS_URL)('writes the in-process batch on its own within the flush interval (no Redis)', async () => {
    const { projectId, api } = await setUp();
    const res = await api.post('/v1/inference', { model: 'mock-priced', project_id: projectId, messages: user('no flush') });
    const accepted = performance.now();
    await vi.waitFor(async () => expect(await t.deps.db.usageRecord.count({ where: { requestId: res.body.request_id } })).toBe(1), {
      timeout: 2_000,
      interval: 5,
    });
    const ms = performance.now() - accepted;
    expect(t.deps.outcomes.kind).toBe('memory');
    expect(t.deps.outcomes).toBeInstanceOf(MemoryOutcomeWriter);
    console.info(`in-process batch: the usage record was in PostgreSQL ${Math.round(ms)} ms after the response (flush every ${t.config.outcomeFlushMs} ms)`);
  });

  it.runIf(REDIS_URL)('takes over the entries a dead replica read and never wrote, once their lease is over', async () => {
    const { projectId, webhookId, keyId } = await setUp();
    const writer = t.deps.outcomes as RedisOutcomeWriter;
    const raw = new Redis(REDIS_URL!);
    try {
      // The live consumer is held so that the "dead" one gets the entry; it reads it and dies.
      writer.pause();
      await new Promise((r) => setTimeout(r, 50));
      const o = outcome(projectId, keyId, 1_000n);
      await raw.xadd(writer.stream, '*', 'o', encodeOutcome(o, t.deps.webhooks.secretBox));
      const read = (await raw.xreadgroup('GROUP', 'writers', 'dead-replica', 'COUNT', 10, 'STREAMS', writer.stream, '>')) as [string, unknown[]][];
      expect(read[0]![1]).toHaveLength(1);
      writer.resume();
      const started = performance.now();
      await vi.waitFor(async () => expect(await t.deps.db.usageRecord.count({ where: { requestId: o.requestId } })).toBe(1), {
        timeout: 5_000,
        interval: 20,
      });
      console.info(`reclaimed a dead consumer's entry ${Math.round(performance.now() - started)} ms after (lease 500 ms)`);
      expect(await written(projectId, webhookId, keyId)).toMatchObject({ records: 1, events: 1, deliveries: 1, keySpent: 1_000n });
      await vi.waitFor(async () => expect(await raw.xlen(writer.stream)).toBe(0), { timeout: 2_000 });
    } finally {
      writer.resume();
      raw.disconnect();
    }
  });

  it.runIf(REDIS_URL)('appends the outcomes of one turn as one stream entry, their contents sealed together; each row gets its own seal', async () => {
    const { projectId, keyId } = await setUp();
    const writer = t.deps.outcomes as RedisOutcomeWriter;
    const marker = `turn-content-${uniqueName('m')}`;
    const batch = [0, 1, 2].map((i) => withContent(outcome(projectId, keyId, 0n), `${marker}-${i}`));
    const raw = new Redis(REDIS_URL!);
    writer.pause();
    try {
      await new Promise((r) => setTimeout(r, 50));
      await Promise.all(batch.map((o) => writer.record(o)));
      const entries = ((await raw.xrange(writer.stream, '-', '+')) as [string, string[]][]).filter(([, f]) => f.join().includes(batch[0]!.requestId));
      expect(entries).toHaveLength(1);
      const fields = entries[0]![1];
      expect(fields.filter((_, i) => i % 2 === 0)).toEqual(['b', 'c']);
      for (const o of batch) expect(fields[1]).toContain(o.requestId);
      // Redis holds no content in clear: the turn's contents are one ciphertext.
      expect(fields.join()).not.toContain(marker);
    } finally {
      writer.resume();
      raw.disconnect();
    }
    expect(await writer.flush({ timeoutMs: 10_000 })).toBe(true);
    const rows = await t.deps.db.retainedInference.findMany({ where: { requestId: { in: batch.map((o) => o.requestId) } } });
    expect(rows).toHaveLength(3);
    for (const o of batch) {
      const row = rows.find((r) => r.requestId === o.requestId)!;
      expect(row.sealed).not.toContain(marker);
      const content = JSON.parse(t.deps.webhooks.secretBox.open(row.sealed!, row.id));
      expect(content.request.messages[0].content).toBe(`${marker}-${batch.indexOf(o)}`);
    }
  });

  it.runIf(REDIS_URL)('still writes an entry of the earlier form (one outcome, its content sealed alone), the content as it was sealed', async () => {
    const { projectId, keyId } = await setUp();
    const writer = t.deps.outcomes as RedisOutcomeWriter;
    const marker = uniqueName('earlier-form');
    const o = withContent(outcome(projectId, keyId, 0n), marker);
    // What an api process of the earlier version appended: the content sealed on the request path, bound to its id.
    const sealed = t.deps.webhooks.secretBox.seal(JSON.stringify(o.retained!.content), o.retained!.inferenceId);
    const earlier = { ...o, retained: { inferenceId: o.retained!.inferenceId, status: 'succeeded' as const, sealed, retainedUntil: o.retained!.retainedUntil } };
    const raw = new Redis(REDIS_URL!);
    try {
      await raw.xadd(writer.stream, '*', 'o', encodeOutcome(earlier, t.deps.webhooks.secretBox));
    } finally {
      raw.disconnect();
    }
    await vi.waitFor(async () => expect(await t.deps.db.usageRecord.count({ where: { requestId: o.requestId } })).toBe(1), { timeout: 10_000 });
    const row = await t.deps.db.retainedInference.findUniqueOrThrow({ where: { id: o.retained!.inferenceId } });
    expect(row.sealed).toBe(sealed);
    expect(JSON.parse(t.deps.webhooks.secretBox.open(row.sealed!, row.id)).request.messages[0].content).toBe(marker);
  });

  it.runIf(REDIS_URL)('sets aside, as it is, an entry whose contents do not open (sealed with another key)', async () => {
    const { projectId, keyId } = await setUp();
    const writer = t.deps.outcomes as RedisOutcomeWriter;
    const o = withContent(outcome(projectId, keyId, 0n), `other-key-${uniqueName('m')}`);
    const { outcomes, contents } = encodeOutcomeBatch([o]);
    const sealed = new AesGcmSecretBox(randomBytes(32)).seal(contents!, outcomes);
    const raw = new Redis(REDIS_URL!);
    try {
      const lost = writer.stats().lost;
      const id = await raw.xadd(writer.stream, '*', 'b', outcomes, 'c', sealed);
      await vi.waitFor(async () => expect(writer.stats().lost).toBe(lost + 1), { timeout: 10_000 });
      const dead = (await raw.xrange(`${writer.stream}:dead`, '-', '+')) as [string, string[]][];
      const kept = dead.find(([, f]) => f[f.indexOf('id') + 1] === id)![1];
      expect(kept.slice(0, 4)).toEqual(['b', outcomes, 'c', sealed]);
      expect(kept[kept.indexOf('error') + 1]).toMatch(/authenticate/i);
      expect(await t.deps.db.usageRecord.count({ where: { requestId: o.requestId } })).toBe(0);
    } finally {
      raw.disconnect();
    }
  });

  it.runIf(REDIS_URL)('writes directly to PostgreSQL when the stream refuses the entry', async () => {
    const { projectId, keyId } = await setUp();
    const prefix = `${uniqueName('refusing')}:`;
    const raw = new Redis(REDIS_URL!);
    // A key of the wrong type where the stream should be: every XADD fails.
    await raw.set(`${prefix}usage:outcomes`, 'not a stream');
    const writer = new RedisOutcomeWriter(
      { ...persistPorts(), clock: t.deps.clock, log: t.deps.log, handoff: t.deps.webhooks.worker, alerts: t.deps.budgetAlerts, flushMs: 20 },
      t.deps.redis!,
      prefix,
      5_000,
    );
    try {
      const o = outcome(projectId, keyId, 0n);
      // record() returns once the XADD is in the socket (the response goes then); the refusal comes after it, and
      // the outcome is written directly in the background. flush() waits for every entry not acknowledged yet.
      await writer.record(o);
      expect(await writer.flush({ timeoutMs: 5_000 })).toBe(true);
      expect(await t.deps.db.usageRecord.count({ where: { requestId: o.requestId } })).toBe(1);
      expect(writer.stats()).toMatchObject({ accepted: 1, direct: 1, lost: 0 });
      expect(t.logs.text).toMatch(/writing usage records directly to PostgreSQL/);
    } finally {
      await writer.close();
      await raw.del(`${prefix}usage:outcomes`);
      raw.disconnect();
    }
  });
});

describe('the usage stream consumer between batches', () => {
  it.runIf(REDIS_URL)('reads at most one batch per SVC_OUTCOME_STREAM_MS, and a usage read in its process cuts the pause short', async () => {
    const file = writeProvidersFile({ providers: [{ name: 'm', kind: 'mock', region: 'local', models: [{ id: 'mock-paced', input_per_mtok: 1, output_per_mtok: 2 }] }] });
    // A pause far longer than the usage read's 2 s wait for this replica's outcomes.
    const paced = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_OUTCOME_STREAM_MS: '10000' } });
    try {
      const { projectId } = await seedProject(client(paced.app));
      const key = await client(paced.app).post('/v1/keys', { project_id: projectId, name: uniqueName('k'), scopes: ['inference:write', 'usage:read'] });
      const api = client(paced.app, key.body.secret as string);
      const infer = async (text: string) => {
        const res = await api.post('/v1/inference', { model: 'mock-paced', project_id: projectId, messages: user(text) });
        expect(res.status).toBe(200);
        return res.body.request_id as string;
      };
      // The first batch is read at once; the consumer then pauses 10 s before its next read.
      const first = await infer('one');
      await vi.waitFor(async () => expect(await paced.deps.db.usageRecord.count({ where: { requestId: first } })).toBe(1), { timeout: 2_000, interval: 10 });
      const second = await infer('two');
      await new Promise((r) => setTimeout(r, 300));
      expect(await paced.deps.db.usageRecord.count({ where: { requestId: second } })).toBe(0);
      // GET /v1/usage waits for this replica's outcomes: the pause ends, the second record is there.
      const started = performance.now();
      const usage = await api.get('/v1/usage', { query: { project_id: projectId, granularity: 'request' } });
      expect(usage.status).toBe(200);
      expect((usage.body.data as { request_id: string }[]).map((r) => r.request_id).sort()).toEqual([first, second].sort());
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      await paced.close();
    }
  });
});
