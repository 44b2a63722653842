import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { BATCH_LUA } from '../../src/redis/batch-script.ts';
import { keySlot } from '../../src/redis/slot.ts';
import { seedProject, type Seeded } from '../helpers/app.ts';
import { pollUntil, type Answer, type GatewayProcess } from '../helpers/gateway-process.ts';
import { startReplica } from '../helpers/processes.ts';
import { startReceiver, testPki, type Receiver } from '../helpers/https-receiver.ts';
import { openServices, type TestServices } from '../helpers/private-services.ts';
import { HAVE_REDIS_ENGINES, REQUIRE_ENGINES, RedisClusterEngine, type ClusterMaster } from '../helpers/redis-engines.ts';
import { acceptedIds, deploy, expectRecorded, five, infer, OPEN_PROJECT, tally, type Deployment } from '../system/replicas/support.ts';

/**
 * Two gateway processes on a real Redis Cluster (3 masters + 3 replicas, redis-server --cluster-enabled) and one
 * PostgreSQL (CONTRACT §18): limits exact for projects on every master, Idempotency-Key once, every 200 recorded and
 * delivered once, revocation across replicas, a master's failover, and two masters down (an outage: /readyz 503, no
 * 500s). Without redis-server the file is skipped, except under CI=1, where it fails.
 */
const RUN = HAVE_REDIS_ENGINES || REQUIRE_ENGINES;

let services: TestServices;
let cluster: RedisClusterEngine;
let d: Deployment;
let a: GatewayProcess;
let b: GatewayProcess;
let receiver: Receiver;

const LIMIT = { requests_per_minute: 30, tokens_per_minute: 1_000_000_000, burst: 0 };
const SCOPES = ['inference:write', 'keys:manage', 'usage:read', 'governance:manage'];

/** A project (limit 30 rpm) whose hash tag `{prj_…}` lives on `master`, with an inference.completed webhook. */
async function projectOn(master: ClusterMaster, limits = LIMIT): Promise<Seeded & { webhookId: string }> {
  for (let i = 0; i < 40; i++) {
    const s = await seedProject(a, { plan: 'enterprise', limits, scopes: SCOPES });
    const slot = keySlot(`{${s.projectId}}`);
    if (!master.slots.some(([x, y]) => slot >= x && slot <= y)) continue;
    // With the operator key: the project's key would take one request of the project's window.
    const hook = await a.call('POST', '/v1/webhooks', { body: { project_id: s.projectId, url: receiver.url, events: ['inference.completed'] } });
    expect(hook.status).toBe(200);
    receiver.secrets.set(hook.body.id, hook.body.secret);
    return { ...s, webhookId: hook.body.id as string };
  }
  throw new Error(`no project landed on the master at ${master.port}`);
}

/** 60 concurrent inferences, half to each gateway; returns the answers and the refills the elapsed time allows. */
async function burst(s: Seeded, n = 60): Promise<{ answers: Answer[]; refills: number }> {
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => infer(i % 2 ? b : a, s, five(i))));
  // 30 rpm refills one request every 2 s.
  return { answers, refills: Math.floor((performance.now() - started) / 2_000) };
}

function expectExact(answers: Answer[], refills: number): void {
  const t = tally(answers);
  const passed = t['200'] ?? 0;
  expect(passed).toBeGreaterThanOrEqual(30);
  expect(passed).toBeLessThanOrEqual(30 + refills);
  expect(t).toEqual({ '200': passed, '429 rate_limit_exceeded': answers.length - passed });
}

const server500 = (answers: Answer[]) => answers.filter((x) => typeof x.status !== 'number' || x.status >= 500);

describe.runIf(RUN)('two gateway processes on a Redis Cluster (3 masters + 3 replicas)', () => {
  beforeAll(async () => {
    [services, cluster, receiver] = await Promise.all([openServices(), RedisClusterEngine.start(), startReceiver({ answer: () => 200 })]);
    d = await deploy(services, {
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: cluster.seeds,
      SVC_EGRESS_ALLOWLIST: '127.0.0.1',
      NODE_EXTRA_CA_CERTS: testPki().caFile,
      SVC_OUTCOME_LEASE_MS: '2000',
    });
    [a, b] = await Promise.all([startReplica(d), startReplica(d)]);
    const ready = await Promise.all([a, b].map((g) => g.call('GET', '/readyz', { key: null })));
    expect(ready.map((r) => [r.status, r.body.checks])).toEqual([
      [200, { database: 'ok', redis: 'ok', limits: 'ok' }],
      [200, { database: 'ok', redis: 'ok', limits: 'ok' }],
    ]);
  }, 300_000);

  afterAll(async () => {
    await d?.close();
    await Promise.all([cluster?.stop(), receiver?.close(), services?.close()]);
  });

  it('hold a 30 rpm limit exactly (30 of 60 concurrent over both) for a project on each master; every 200 has one usage record and one delivered inference.completed', { timeout: 90_000 }, async () => {
    const masters = await cluster.masters();
    expect(masters).toHaveLength(3);
    const accepted: string[] = [];
    const hooks: string[] = [];
    for (const m of masters) {
      const s = await projectOn(m);
      hooks.push(s.webhookId);
      const callsBefore = d.mock.calls;
      const { answers, refills } = await burst(s);
      expectExact(answers, refills);
      // The provider was called once per 200, never for a refused request.
      expect(d.mock.calls - callsBefore).toBe(answers.filter((x) => x.status === 200).length);
      accepted.push(...acceptedIds(answers));
    }
    await expectRecorded(services, accepted, 20_000);
    const delivered = () =>
      receiver.receipts.filter((r) => hooks.includes(String(r.headers['x-svc-webhook-id'])) && r.event?.type === 'inference.completed');
    await pollUntil('one delivered inference.completed per 200', async () => delivered().length >= accepted.length, 20_000, 100);
    const perRequest = new Map<string, number>();
    for (const r of delivered()) perRequest.set(r.event!.data.request_id, (perRequest.get(r.event!.data.request_id) ?? 0) + 1);
    expect([...perRequest.keys()].sort()).toEqual([...accepted].sort());
    expect([...perRequest.values()].every((n) => n === 1)).toBe(true);
    expect(receiver.receipts.every((r) => r.verifyError === null)).toBe(true);
  });

  it('send the same two round trips per inference as on one server (MONITOR on every master)', { timeout: 60_000 }, async () => {
    const s = await seedProject(a, OPEN_PROJECT);
    for (let i = 0; i < 5; i++) expect((await infer(a, s, five(i))).status).toBe(200);
    const batchSha = createHash('sha1').update(BATCH_LUA).digest('hex');
    const measure = async (label: string, run: () => Promise<Answer[]>) => {
      const monitor = await cluster.monitor();
      const answers = await run();
      const seen = await monitor.stop();
      const n = answers.filter((x) => x.status === 200).length;
      expect(n).toBe(answers.length);
      // The hot path's script calls (batch.ts), told from the consumers' and leases' commands by the script's SHA.
      // (EVAL with the script's text: the first call on a master that did not know the script yet.)
      const hot = (args: string[]) => (args[0]?.toLowerCase() === 'evalsha' && args[1] === batchSha) || (args[0]?.toLowerCase() === 'eval' && args[1] === BATCH_LUA);
      const calls = seen.filter(hot).length;
      const other = new Map<string, number>();
      for (const args of seen) if (!hot(args)) other.set(args[0]!.toLowerCase(), (other.get(args[0]!.toLowerCase()) ?? 0) + 1);
      console.info(
        `cluster, ${label}: ${n} inferences, ${calls} script calls of the hot path (${(calls / n).toFixed(2)} per inference); the gateways' other commands meanwhile: ${JSON.stringify(Object.fromEntries(other))}`,
      );
      return calls / n;
    };
    // One at a time: nothing shares a script call. Before the provider: the project's slot; after: the project's slot
    // and the usage shard's slot, sent in the same turn (two round trips, three calls).
    const alone = await measure('one at a time', async () => {
      const out: Answer[] = [];
      for (let i = 0; i < 20; i++) out.push(await infer(i % 2 ? b : a, s, five(i)));
      return out;
    });
    // At most three calls each (in two round trips); fewer when a turn happens to carry two inferences' operations.
    expect(alone).toBeGreaterThan(2);
    expect(alone).toBeLessThanOrEqual(3);
    // Together: the calls of a turn are shared by every inference in it.
    expect(await measure('40 at once', () => Promise.all(Array.from({ length: 40 }, (_, i) => infer(i % 2 ? b : a, s, five(i)))))).toBeLessThan(3);
    expect(a.output() + b.output()).not.toMatch(/CROSSSLOT|MOVED|refused an entry|unreachable/);
  });

  it('run an Idempotency-Key once across both gateways: one provider call, the other a replay or 409', { timeout: 60_000 }, async () => {
    for (const m of await cluster.masters()) {
      const s = await projectOn(m, OPEN_PROJECT.limits);
      d.mock.set({ delayMs: 200 });
      try {
        const headers = { 'Idempotency-Key': randomUUID() };
        const callsBefore = d.mock.calls;
        const [x, y] = await Promise.all([infer(a, s, 'same!', { headers }), infer(b, s, 'same!', { headers })]);
        const statuses = [x.status, y.status].sort();
        expect(statuses[0]).toBe(200);
        expect([200, 409]).toContain(statuses[1]);
        expect(d.mock.calls - callsBefore).toBe(1);
        const again = await infer(a, s, 'same!', { headers });
        expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
      } finally {
        d.mock.reset();
      }
    }
  });

  it('show a key revoked on one gateway as revoked on the other (sharded pub/sub)', { timeout: 30_000 }, async () => {
    const s = await seedProject(a, OPEN_PROJECT);
    for (const [revoker, observer] of [
      [a, b],
      [b, a],
    ] as const) {
      const key = await revoker.call('POST', '/v1/keys', { body: { project_id: s.projectId, name: randomUUID(), scopes: ['keys:manage'] } });
      const probe = () => observer.call('GET', `/v1/projects/${s.projectId}`, { key: key.body.secret });
      expect((await probe()).status).toBe(200);
      expect((await revoker.call('POST', `/v1/keys/${key.body.id}/revoke`)).status).toBe(200);
      const started = performance.now();
      await pollUntil('revocation seen by the other gateway', async () => (await probe()).status === 401, 2_000, 5);
      expect(performance.now() - started).toBeLessThan(1_000);
    }
  });

  it('when a master dies: its replica is promoted and within 10 s the limits are exact again, with no 500 meanwhile', { timeout: 90_000 }, async () => {
    const [victim] = await cluster.masters();
    const s = await projectOn(victim!);
    const open = await seedProject(a, OPEN_PROJECT);
    const during: Answer[] = [];
    let stop = false;
    // Bounded, so that a failed assertion before `stop` cannot leave it running.
    const until = performance.now() + 40_000;
    onTestFinished(() => {
      stop = true;
    });
    const traffic = (async () => {
      for (let i = 0; !stop && performance.now() < until; i++) during.push(await infer(i % 2 ? b : a, open, five(i), { timeoutMs: 10_000 }));
    })();
    await new Promise((r) => setTimeout(r, 300));
    const killedAt = performance.now();
    await cluster.kill(victim!.port);
    // Exact again: a fresh burst on the project whose slot the dead master served gives exactly the limit.
    await cluster.waitHealthy(15_000);
    await pollUntil('both gateways ready', async () => (await Promise.all([a, b].map((g) => g.call('GET', '/readyz', { key: null })))).every((r) => r.status === 200), 15_000, 100);
    const { answers, refills } = await burst(s);
    const exactAfterMs = performance.now() - killedAt;
    stop = true;
    await traffic;
    console.info(
      `master killed: limits exact again after ${Math.round(exactAfterMs)} ms; traffic meanwhile ${JSON.stringify(tally(during))}; burst ${JSON.stringify(tally(answers))}`,
    );
    expectExact(answers, refills);
    expect(exactAfterMs).toBeLessThan(10_000);
    expect(server500(during)).toEqual([]);
    expect(tally(during)['200']).toBeGreaterThan(0);
  });

  it('with two masters down: /readyz answers 503 naming the cluster error, and requests get no 500', { timeout: 60_000 }, async () => {
    const s = await seedProject(a, OPEN_PROJECT);
    const masters = await cluster.masters();
    await Promise.all(masters.slice(0, 2).map((m) => cluster.kill(m.port)));
    const down = await pollUntil(
      '/readyz 503 on both',
      async () => {
        const r = await Promise.all([a, b].map((g) => g.call('GET', '/readyz', { key: null })));
        return r.every((x) => x.status === 503) ? r : null;
      },
      15_000,
      100,
    );
    for (const r of down) {
      expect(r.body).toMatchObject({ status: 'unavailable', checks: { redis: 'unavailable', limits: 'degraded' } });
      expect(r.body.reasons.redis).toMatch(/CLUSTERDOWN|master|cluster|connect|answer/i);
    }
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => infer(i % 2 ? b : a, s, five(i), { timeoutMs: 15_000 })));
    console.info(`two masters down: /readyz ${JSON.stringify(down[0]!.body)}; inferences ${JSON.stringify(tally(answers))}`);
    expect(server500(answers)).toEqual([]);
    // The documented outage behaviour: served with per-replica limits, usage written directly.
    expect(tally(answers)).toEqual({ '200': 20 });
    await expectRecorded(services, acceptedIds(answers), 15_000);
  });
});
