import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { seedProject, type Seeded } from '../../helpers/app.ts';
import type { GatewayProcess } from '../../helpers/gateway-process.ts';
import { NO_SERVICES, NO_SERVICES_REASON, openServices, type TestServices } from '../../helpers/private-services.ts';
import {
  acceptedIds,
  deploy,
  expectRecorded,
  five,
  infer,
  OPEN_PROJECT,
  specErrorProblem,
  tally,
  type Deployment,
} from '../replicas/support.ts';
import {
  during,
  expectOnlySpecAnswers,
  FAULT_ENV,
  readyz,
  REDIS_COMMAND_TIMEOUT_MS,
  ROUTING_TIMEOUT_MS,
  sentBetween,
  startLoad,
  waitReady,
  type TimedAnswer,
} from './support.ts';

let services: TestServices;
let d: Deployment;
let g: GatewayProcess;
let s: Seeded;

function report(name: string, answers: TimedAnswer[], marks: { downAt: number; upAt: number; readyAt: number }, extra: object) {
  console.info(
    `${name}: ${JSON.stringify({
      before: tally(sentBetween(answers, 0, marks.downAt)),
      while_down: tally(sentBetween(answers, marks.downAt, marks.upAt)),
      recovering: tally(sentBetween(answers, marks.upAt, marks.readyAt)),
      after_ready: tally(sentBetween(answers, marks.readyAt)),
      ...extra,
      slowest_ms: Math.round(Math.max(...answers.map((a) => a.ms))),
    })}`,
  );
}

/** Back to normal by itself: a second after /readyz said so, everything succeeds; every 200 is recorded. */
async function expectRecovered(answers: TimedAnswer[], readyAt: number): Promise<void> {
  const settled = sentBetween(answers, readyAt + 1_000);
  expect(settled.length).toBeGreaterThan(0);
  expect(tally(settled)).toEqual({ '200': settled.length });
  await expectRecorded(services, acceptedIds(answers), 15_000);
  expect(g.child.exitCode).toBeNull();
}

/**
 * A private Redis (never the shared one) fails under load. It keeps its data, like a production Redis with an
 * append-only file: the gateway must ride out the outage; surviving the loss of the store's own data is another matter.
 */
describe.skipIf(NO_SERVICES)(NO_SERVICES ? `Redis faults (${NO_SERVICES_REASON})` : 'Redis faults under load', () => {
  beforeAll(async () => {
    services = await openServices({ privateRedis: true, persistentRedis: true });
    d = await deploy(services, FAULT_ENV);
    g = await d.start();
    s = await seedProject(g, OPEN_PROJECT);
    for (let i = 0; i < 20; i++) expect((await infer(g, s, five(i))).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await d?.close();
    await services?.close();
  });

  it('a killed and restarted Redis: spec answers, /readyz 503 then 200, recovery by itself, no accepted usage lost', { timeout: 60_000 }, async () => {
    onTestFailed(() => console.error(`gateway output (tail):\n${g.output().slice(-6_000)}`));
    expect(await readyz(g)).toBe(200);
    const load = startLoad(() => g, s);
    await during(1_500);
    const downAt = performance.now();
    await services.redis!.stop();
    const notReadyMs = await waitReady(g, 503, 5_000);
    await during(3_000);
    const upAt = performance.now();
    await services.redis!.resume();
    const readyMs = await waitReady(g, 200, 15_000);
    const readyAt = performance.now();
    await during(3_000);
    const answers = await load.stop();

    report('Redis killed', answers, { downAt, upAt, readyAt }, { readyz_503_after_ms: notReadyMs, readyz_200_after_restart_ms: readyMs });
    expect(sentBetween(answers, downAt, upAt).length).toBeGreaterThan(0);
    expectOnlySpecAnswers(answers, ['internal_error', 'model_unavailable', 'cache_unavailable', 'routing_timeout']);
    await expectRecovered(answers, readyAt);
  });

  /**
   * A frozen Redis (SIGSTOP: connections open, nothing answers) fails commands only after the client's command timeout:
   * once one has, every request skips Redis (src/redis/health.ts) until a PING answers again. So only the
   * requests in flight when it froze wait (one command timeout); those sent once it is known to be down do not.
   */
  it(
    'a frozen Redis (SIGSTOP): answers within the routing timeout, /readyz 503 then 200, no accepted usage lost',
    { timeout: 60_000 },
    async () => {
      onTestFailed(() => console.error(`gateway output (tail):\n${g.output().slice(-6_000)}`));
      expect(await readyz(g)).toBe(200);
      const load = startLoad(() => g, s);
      await during(1_500);
      const downAt = performance.now();
      services.redis!.freeze();
      let idempotent;
      let notReady: number | string;
      let knownDownAt = Infinity;
      try {
        notReady = await waitReady(g, 503, 5_000).catch((err: Error) => err.message);
        knownDownAt = performance.now();
        idempotent = await infer(g, s, 'idem!', { headers: { 'Idempotency-Key': `frozen-${Date.now()}` }, timeoutMs: ROUTING_TIMEOUT_MS + 3_000 });
        await during(2_000);
      } finally {
        services.redis!.unfreeze();
      }
      const upAt = performance.now();
      const readyMs = await waitReady(g, 200, 15_000);
      const readyAt = performance.now();
      await during(3_000);
      const answers = await load.stop();

      const knownDown = sentBetween(answers, knownDownAt, upAt);
      const knownDownMs = knownDown.map((a) => a.ms).sort((x, y) => x - y);
      const slowestKnownDown = knownDownMs.at(-1) ?? 0;
      // A quantile, not the maximum: any one answer on this 2-core machine (load, gateway and servers together) may
      // be slow for reasons of its own; a request that waited for Redis would wait a command timeout, and all would.
      const p90KnownDown = knownDownMs[Math.floor(knownDownMs.length * 0.9)] ?? 0;
      report('Redis frozen', answers, { downAt, upAt, readyAt }, {
        readyz_503_after_ms: notReady,
        readyz_200_after_ms: readyMs,
        known_down: { answers: knownDown.length, p90_ms: Math.round(p90KnownDown), slowest_ms: Math.round(slowestKnownDown) },
        idempotency_key: { status: idempotent.status, code: typeof idempotent.status === 'number' && idempotent.status !== 200 ? idempotent.body?.error?.code : undefined, ms: Math.round(idempotent.ms) },
      });
      const slowest = Math.max(...answers.map((a) => a.ms));
      expect({
        readyz_503_while_frozen: typeof notReady === 'number' ? true : notReady,
        // An Idempotency-Key cannot be checked without its store: an answer (success or the spec's error), not a hang.
        idempotency_key_answered: idempotent.status === 200 || specErrorProblem(idempotent) === null ? true : `${idempotent.status}`,
        idempotency_key_within_routing_timeout: idempotent.ms < ROUTING_TIMEOUT_MS ? true : Math.round(idempotent.ms),
        load_within_routing_timeout: slowest < ROUTING_TIMEOUT_MS ? true : { slowest_ms: Math.round(slowest), answers: tally(answers) },
        // Once down, nothing waits for Redis: the requests sent then do not pay a command timeout.
        known_down_skip_redis:
          knownDown.length > 0 && p90KnownDown < REDIS_COMMAND_TIMEOUT_MS ? true : { p90_ms: Math.round(p90KnownDown), answers: tally(knownDown) },
      }).toEqual({
        readyz_503_while_frozen: true,
        idempotency_key_answered: true,
        idempotency_key_within_routing_timeout: true,
        load_within_routing_timeout: true,
        known_down_skip_redis: true,
      });
      expectOnlySpecAnswers(answers, ['internal_error', 'model_unavailable', 'cache_unavailable', 'routing_timeout']);
      await expectRecovered(answers, readyAt);
    },
  );
});
