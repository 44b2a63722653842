import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedProject, type Seeded } from '../../helpers/app.ts';
import { pollUntil, type Answer, type GatewayProcess } from '../../helpers/gateway-process.ts';
import { startReceiver, testPki, type Receiver } from '../../helpers/https-receiver.ts';
import { NO_SERVICES, NO_SERVICES_REASON, openServices, type TestServices } from '../../helpers/private-services.ts';
import {
  acceptedIds,
  deploy,
  expectRecorded,
  expectSpecError,
  five,
  infer,
  MICROS_PER_TOKEN,
  OPEN_PROJECT,
  tally,
  type Deployment,
} from './support.ts';

/**
 * Two gateway processes on one PostgreSQL and one Redis (CONTRACT §1: "limits, budgets, revocation, idempotency and
 * webhook delivery hold across all of them"). The shared services with DATABASE_URL / REDIS_URL (a fresh schema and
 * key prefix), else private servers started for this file.
 */
let services: TestServices;
let d: Deployment;
let a: GatewayProcess;
let b: GatewayProcess;
let receiver: Receiver;

/** One project whose inferences stand in as a flush barrier (see settled()). */
let marker: Seeded;

/** Both replicas' background writers have flushed what came before: a fresh inference on each is recorded. */
async function settled(): Promise<void> {
  const answers = await Promise.all([infer(a, marker, 'flush'), infer(b, marker, 'flush')]);
  expect(answers.map((x) => x.status)).toEqual([200, 200]);
  await expectRecorded(services, acceptedIds(answers));
}

const usageCount = async (projectId: string, status = 'succeeded') =>
  Number((await services.sql<{ n: string }>('SELECT count(*) AS n FROM usage_records WHERE project_id = $1 AND status = $2', [projectId, status]))[0]!.n);

describe.skipIf(NO_SERVICES)(NO_SERVICES ? `two gateway processes (${NO_SERVICES_REASON})` : 'two gateway processes on one PostgreSQL and Redis', () => {
  beforeAll(async () => {
    services = await openServices();
    receiver = await startReceiver({
      // Each delivery fails its first attempt and succeeds on the second: retries must also go out once.
      answer: (r) => (receiver.receipts.some((x) => x.deliveryId === r.deliveryId) ? 200 : 500),
    });
    d = await deploy(services, {
      SVC_EGRESS_ALLOWLIST: '127.0.0.1',
      NODE_EXTRA_CA_CERTS: testPki().caFile,
      SVC_WEBHOOK_RETRY_SCHEDULE: '0,1',
    });
    [a, b] = await Promise.all([d.start(), d.start()]);
    marker = await seedProject(a, OPEN_PROJECT);
    // Warm both (JIT, pools, caches) so that the timed parts below measure the steady state.
    for (let i = 0; i < 20; i++) await Promise.all([infer(a, marker, five(i)), infer(b, marker, five(i))]);
  }, 120_000);

  afterAll(async () => {
    await d?.close();
    await receiver?.close();
    await services?.close();
  });

  it('enforce one shared request window exactly: 60 concurrent requests over both, limit 20, burst 0 → 20 pass', { timeout: 60_000 }, async () => {
    const s = await seedProject(a, { ...OPEN_PROJECT, limits: { requests_per_minute: 20, tokens_per_minute: 1_000_000_000, burst: 0 } });
    const callsBefore = d.mock.calls;
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => infer(i % 2 ? b : a, s, five(i))));
    const elapsedMs = performance.now() - started;
    // The window refills one request every 3 s; the burst is sent at once and normally lands well inside that.
    const refills = Math.floor(elapsedMs / 3_000);
    const passed = answers.filter((x) => x.status === 200);
    expect(tally(answers)).toEqual({ '200': 20 + refills, '429 rate_limit_exceeded': 40 - refills });
    for (const x of answers.filter((x) => x.status !== 200)) {
      expectSpecError(x, 429, 'rate_limit_exceeded');
      expect(Number(x.headers['retry-after'])).toBeGreaterThan(0);
      expect(x.headers['x-svc-ratelimit-limit']).toBe('20');
      expect(x.headers['x-svc-ratelimit-remaining']).toBe('0');
    }
    // Both replicas answered (half the requests each), yet only 20 passed in all: the window is one, not one per
    // replica (two windows would let 40 through). Which replica's requests won depends on arrival order, so the split
    // of the 20 between them is not asserted.
    const byReplica = [0, 1].map((r) => answers.filter((_, i) => i % 2 === r).length);
    expect(byReplica).toEqual([30, 30]);
    expect(d.mock.calls - callsBefore).toBe(passed.length);
    await settled();
    expect(await usageCount(s.projectId)).toBe(passed.length);
  });

  it('keep the budget exact: spend from both adds up to the cent, the hard stop shows on both, each alert fires once', { timeout: 60_000 }, async () => {
    const budgetUsd = 0.1; // ten requests at $0.01
    const s = await seedProject(a, { ...OPEN_PROJECT, budgetUsd });
    const answers: Answer[] = [];
    let i = 0;
    // Waves of four (two per replica) until a whole wave is refused: the hard stop is seen by both.
    for (let wave = 0; wave < 30; wave++) {
      const w = await Promise.all([a, b, a, b].map((g) => infer(g, s, five(i++))));
      answers.push(...w);
      if (w.every((x) => x.status === 429)) break;
    }
    const ok = answers.filter((x) => x.status === 200);
    for (const x of ok) expect(x.body.cost_usd).toBe(0.01);
    for (const x of answers.filter((x) => x.status !== 200)) expectSpecError(x, 429, 'budget_exceeded');
    // A request that starts under budget completes (CONTRACT §7): at most one wave of overshoot.
    expect(ok.length).toBeGreaterThanOrEqual(10);
    expect(ok.length).toBeLessThan(10 + 4);

    // Hard stop on both replicas, for a fresh request each.
    for (const g of [a, b]) {
      await pollUntil(`budget_exceeded on ${g.baseUrl}`, async () => {
        const x = await infer(g, s, 'after');
        if (x.status === 200) ok.push(x);
        return x.status === 429 && x.body.error.code === 'budget_exceeded';
      }, 5_000);
    }
    await expectRecorded(services, acceptedIds(ok));
    const expectedMicros = ok.length * 10 * MICROS_PER_TOKEN;
    const budget = await pollUntil('recorded spend', async () => {
      const res = await a.call('GET', `/v1/projects/${s.projectId}/budget`);
      return Math.round(res.body.spent_usd * 1e6) === expectedMicros ? res.body : null;
    });
    expect(budget).toMatchObject({ budget_usd: budgetUsd, spent_usd: expectedMicros / 1e6 });
    const usageMicros = await services.sql<{ m: string }>('SELECT coalesce(sum(cost_micros), 0) AS m FROM usage_records WHERE project_id = $1', [s.projectId]);
    expect(Number(usageMicros[0]!.m)).toBe(expectedMicros);

    const alerts = await pollUntil('budget alerts', async () => {
      const rows = await services.sql<{ type: string; threshold: string | null }>(
        `SELECT type, data->>'threshold' AS threshold FROM events WHERE project_id = $1 AND type IN ('budget.threshold', 'budget.exceeded')`,
        [s.projectId],
      );
      return rows.length >= 3 ? rows.sort((x, y) => Number(x.threshold) - Number(y.threshold)) : null;
    });
    expect(alerts).toEqual([
      { type: 'budget.threshold', threshold: '0.8' },
      { type: 'budget.threshold', threshold: '0.95' },
      { type: 'budget.exceeded', threshold: '1' },
    ]);
  });

  it('show a revocation on the other replica within 100 ms, and never a stale key on the revoking one', { timeout: 60_000 }, async () => {
    const s = await seedProject(a, OPEN_PROJECT);
    const lags: number[] = [];
    for (let round = 0; round < 6; round++) {
      const [revoker, observer] = round % 2 ? [b, a] : [a, b];
      const key = await revoker.call('POST', '/v1/keys', { body: { project_id: s.projectId, name: `doomed-${round}`, scopes: ['keys:manage'] } });
      expect(key.status).toBe(200);
      const probe = (g: GatewayProcess) => g.call('GET', `/v1/projects/${s.projectId}`, { key: key.body.secret, timeoutMs: 5_000 });
      // Both replicas have the key cached.
      for (let i = 0; i < 3; i++) expect([(await probe(a)).status, (await probe(b)).status]).toEqual([200, 200]);

      let revokedAt = Infinity;
      let stop = false;
      const watch = (async () => {
        const deadline = performance.now() + 3_000;
        while (!stop && performance.now() < deadline) {
          const sentAt = performance.now();
          const res = await probe(observer);
          if (res.status === 401) return { answeredAt: sentAt + res.ms, res };
          // A 200 to a request sent after the revocation returned would be a stale cache past the bound below.
          if (res.status !== 200) throw new Error(`observer answered ${res.status}`);
          if (sentAt > revokedAt + 100) throw new Error(`observer still accepted the key ${Math.round(sentAt - revokedAt)} ms after revocation`);
        }
        throw new Error('the observer never refused the revoked key');
      })();
      const revoked = await revoker.call('POST', `/v1/keys/${key.body.id}/revoke`);
      revokedAt = performance.now();
      expect(revoked.status).toBe(200);
      // On the revoking replica, at once.
      expectSpecError(await probe(revoker), 401, 'invalid_api_key');
      const seen = await watch.finally(() => (stop = true));
      expectSpecError(seen.res, 401, 'invalid_api_key');
      lags.push(Math.max(0, seen.answeredAt - revokedAt));
    }
    console.info(`revocation seen on the other replica after (ms): ${lags.map((x) => x.toFixed(1)).join(', ')}`);
    expect(Math.max(...lags)).toBeLessThan(100);
  });

  it('run an Idempotency-Key once across replicas: one provider call, one usage record, a replay or 409 for the other', { timeout: 60_000 }, async () => {
    const s = await seedProject(a, OPEN_PROJECT);
    d.mock.set({ delayMs: 300 });
    try {
      const rounds = 4;
      for (let round = 0; round < rounds; round++) {
        const headers = { 'Idempotency-Key': randomUUID() };
        const callsBefore = d.mock.calls;
        const [x, y] = await Promise.all([infer(a, s, 'same!', { headers }), infer(b, s, 'same!', { headers })]);
        // The one that ran: 200 and not a replay; the other got the replay or 409.
        const ran = (r: Answer) => r.status === 200 && r.headers['idempotent-replayed'] === undefined;
        const [first, second] = ran(x) ? [x, y] : [y, x];
        expect(first.status).toBe(200);
        expect(first.headers['idempotent-replayed']).toBeUndefined();
        if (second.status === 200) {
          expect(second.headers['idempotent-replayed']).toBe('true');
          expect(second.body).toEqual(first.body);
        } else {
          expectSpecError(second, 409, 'idempotency_conflict');
          expect(second.body.error.param).toBe('Idempotency-Key');
        }
        // A retry once both are done, on either replica, is the first answer again.
        for (const g of [a, b]) {
          const again = await infer(g, s, 'same!', { headers });
          expect(again.status).toBe(200);
          expect(again.headers['idempotent-replayed']).toBe('true');
          expect(again.body).toEqual(first.body);
        }
        expect(d.mock.calls - callsBefore).toBe(1);
      }
      // Same key, different body, other replica: 409.
      const headers = { 'Idempotency-Key': randomUUID() };
      expect((await infer(a, s, 'one..', { headers })).status).toBe(200);
      expectSpecError(await infer(b, s, 'two..', { headers }), 409, 'idempotency_conflict');

      await settled();
      expect(await usageCount(s.projectId)).toBe(rounds + 1);
      expect(await usageCount(s.projectId, 'failed')).toBe(0);
    } finally {
      d.mock.reset();
    }
  });

  it('send each webhook attempt once: inference.completed from both replicas, a failed first attempt and its retry', { timeout: 60_000 }, async () => {
    const s = await seedProject(a, { ...OPEN_PROJECT, scopes: ['inference:write', 'governance:manage'] });
    const hook = await a.call('POST', '/v1/webhooks', { key: s.secret, body: { project_id: s.projectId, url: receiver.url, events: ['inference.completed'] } });
    expect(hook.status).toBe(200);
    receiver.secrets.set(hook.body.id, hook.body.secret);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => infer(i % 2 ? b : a, s, five(i))));
    expect(tally(answers)).toEqual({ '200': 20 });
    const requestIds = acceptedIds(answers);

    const mine = () => receiver.receipts.filter((r) => r.headers['x-svc-webhook-id'] === hook.body.id);
    await pollUntil('two attempts per delivery', async () => mine().length >= 40, 30_000, 100);
    await pollUntil('every delivery succeeded', async () => {
      const rows = await services.sql<{ status: string; attempts: number }>('SELECT status, attempts FROM webhook_deliveries WHERE webhook_id = $1', [hook.body.id]);
      return rows.length === 20 && rows.every((r) => r.status === 'succeeded');
    }, 10_000, 100);
    // Nothing else is due; a duplicate attempt would already be on its way.
    await new Promise((r) => setTimeout(r, 500));

    const receipts = mine();
    expect(receipts.every((r) => r.verifyError === null)).toBe(true);
    const perDelivery = new Map<string, number[]>();
    for (const r of receipts) perDelivery.set(r.deliveryId, [...(perDelivery.get(r.deliveryId) ?? []), r.answered as number]);
    expect(perDelivery.size).toBe(20);
    expect([...perDelivery.values()].every((x) => x.join() === '500,200')).toBe(true);
    // One event per inference, carrying the spec's data.
    const firstAttempts = receipts.filter((r) => r.answered === 500);
    expect(firstAttempts.map((r) => r.event!.data.request_id).sort()).toEqual([...requestIds].sort());
    for (const r of firstAttempts) {
      const answer = answers.find((x) => x.body.request_id === r.event!.data.request_id)!;
      expect(r.event).toMatchObject({
        object: 'svc.webhook.event',
        type: 'inference.completed',
        project_id: s.projectId,
        data: { request_id: answer.body.request_id, route: answer.body.route, cache_hit: false, cost_usd: 0.01, region: 'local' },
      });
    }
    const attempts = await services.sql<{ n: string }>(
      'SELECT count(*) AS n FROM webhook_attempts t JOIN webhook_deliveries d ON d.id = t.delivery_id WHERE d.webhook_id = $1',
      [hook.body.id],
    );
    expect(Number(attempts[0]!.n)).toBe(40);
  });
});
