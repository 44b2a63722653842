import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { seedProject } from '../helpers/app.ts';
import { pollUntil, type Answer, type GatewayProcess } from '../helpers/gateway-process.ts';
import { startReplica } from '../helpers/processes.ts';
import { openServices, type TestServices } from '../helpers/private-services.ts';
import { HAVE_REDIS_ENGINES, REQUIRE_ENGINES, RedisSentinelEngine } from '../helpers/redis-engines.ts';
import { acceptedIds, deploy, expectRecorded, five, infer, OPEN_PROJECT, tally, type Deployment } from '../system/replicas/support.ts';

/**
 * Two gateway processes on Redis behind a Sentinel trio (a master and its replica; REDIS_SENTINELS +
 * REDIS_SENTINEL_NAME): SENTINEL FAILOVER in the middle of traffic, the gateways follow the promoted replica, and a
 * 30 rpm limit stays exact (CONTRACT §18: a request in flight at the switch may be admitted once, never a window's
 * worth). Without redis-server the file is skipped, except under CI=1, where it fails.
 */
const RUN = HAVE_REDIS_ENGINES || REQUIRE_ENGINES;

let services: TestServices;
let sentinel: RedisSentinelEngine;
let d: Deployment;
let a: GatewayProcess;
let b: GatewayProcess;

const LIMIT = { requests_per_minute: 30, tokens_per_minute: 1_000_000_000, burst: 0 };
const server500 = (answers: Answer[]) => answers.filter((x) => typeof x.status !== 'number' || x.status >= 500);

describe.runIf(RUN)('two gateway processes on Redis with Sentinel failover', () => {
  beforeAll(async () => {
    [services, sentinel] = await Promise.all([openServices(), RedisSentinelEngine.start()]);
    d = await deploy(services, { REDIS_URL: '', REDIS_SENTINELS: sentinel.sentinelList, REDIS_SENTINEL_NAME: sentinel.name });
    [a, b] = await Promise.all([startReplica(d), startReplica(d)]);
    for (const g of [a, b]) expect((await g.call('GET', '/readyz', { key: null })).status).toBe(200);
  }, 300_000);

  afterAll(async () => {
    await d?.close();
    await Promise.all([sentinel?.stop(), services?.close()]);
  });

  it('follows SENTINEL FAILOVER mid-traffic: no 500, the limit stays exact through the switch and after it', { timeout: 90_000 }, async () => {
    const open = await seedProject(a, OPEN_PROJECT);
    const limited = await seedProject(a, { plan: 'enterprise', limits: LIMIT, scopes: ['inference:write'] });
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
    await pollUntil('traffic flowing', async () => during.length >= 10, 10_000, 20);

    // The limited project's 60 requests are spread over the switch: 20 before, 40 while it happens.
    const started = performance.now();
    const sent: Promise<Answer>[] = [];
    for (let i = 0; i < 20; i++) sent.push(infer(i % 2 ? b : a, limited, five(i)));
    const failover = sentinel.failover();
    for (let i = 20; i < 60; i++) {
      sent.push(infer(i % 2 ? b : a, limited, five(i)));
      await new Promise((r) => setTimeout(r, 10));
    }
    const answers = await Promise.all(sent);
    const { from, to } = await failover;
    const refills = Math.floor((performance.now() - started) / 2_000);

    // The gateways follow: both ready (and below: their writes land on the promoted replica).
    await pollUntil('both gateways ready after the failover', async () => (await Promise.all([a, b].map((g) => g.call('GET', '/readyz', { key: null })))).every((r) => r.status === 200), 15_000, 100);
    stop = true;
    await traffic;

    const passed = answers.filter((x) => x.status === 200).length;
    console.info(
      `SENTINEL FAILOVER ${from} → ${to}: limited project ${JSON.stringify(tally(answers))} (refills allowed ${refills}); traffic meanwhile ${JSON.stringify(tally(during))}`,
    );
    expect(server500([...answers, ...during])).toEqual([]);
    // Exact up to a request in flight at the switch on each gateway, never a window's worth.
    expect(passed).toBeGreaterThanOrEqual(28);
    expect(passed).toBeLessThanOrEqual(30 + refills + 2);
    expect(tally(answers)).toEqual({ '200': passed, '429 rate_limit_exceeded': 60 - passed });

    // After the switch, on the new master: exactly 30 of 60 concurrent for a fresh project.
    const fresh = await seedProject(a, { plan: 'enterprise', limits: LIMIT, scopes: ['inference:write'] });
    const t0 = performance.now();
    const burst = await Promise.all(Array.from({ length: 60 }, (_, i) => infer(i % 2 ? b : a, fresh, five(i))));
    const burstRefills = Math.floor((performance.now() - t0) / 2_000);
    const burstPassed = burst.filter((x) => x.status === 200).length;
    expect(burstPassed).toBeGreaterThanOrEqual(30);
    expect(burstPassed).toBeLessThanOrEqual(30 + burstRefills);
    // The fresh project's windows are on the promoted master: the gateways write there, not to their own windows.
    const promoted = new Redis({ host: '127.0.0.1', port: to });
    try {
      expect((await promoted.keys(`*{${fresh.projectId}}*`)).length).toBeGreaterThan(0);
      expect(await promoted.info('replication')).toMatch(/role:master/);
    } finally {
      promoted.disconnect();
    }
    await expectRecorded(services, [...acceptedIds(answers), ...acceptedIds(burst), ...acceptedIds(during)], 20_000);
  });
});
