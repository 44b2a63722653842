import { afterAll, expect, it, onTestFailed } from 'vitest';
import { seedProject } from '../../helpers/app.ts';
import type { GatewayProcess } from '../../helpers/gateway-process.ts';
import { NO_SERVICES, NO_SERVICES_REASON, openServices, type TestServices } from '../../helpers/private-services.ts';
import { acceptedIds, deploy, expectRecorded, five, infer, OPEN_PROJECT, tally, type Deployment } from '../replicas/support.ts';
import { during, expectOnlySpecAnswers, FAULT_ENV, readyz, sentBetween, startLoad, waitReady } from './support.ts';

let services: TestServices | undefined;
let d: Deployment | undefined;
afterAll(async () => {
  await d?.close();
  await services?.close();
});

/**
 * A private PostgreSQL (never the shared one) is shut down with `pg_ctl -m immediate` (connections cut, like a crash)
 * under load and started again. Requests may fail while it is down, with the spec's 500 or 503; every request that was
 * answered 200, before, during or after, has its usage record and inference.completed event once it is back.
 */
it.skipIf(NO_SERVICES)(
  NO_SERVICES ? `PostgreSQL outage under load (${NO_SERVICES_REASON})` : 'rides out a PostgreSQL outage under load: spec answers, /readyz says so, recovers by itself, loses no accepted usage',
  { timeout: 90_000 },
  async () => {
    services = await openServices({ privatePostgres: true });
    d = await deploy(services, FAULT_ENV);
    const g: GatewayProcess = await d.start();
    onTestFailed(() => console.error(`gateway output (tail):\n${g.output().slice(-6_000)}`));
    const s = await seedProject(g, OPEN_PROJECT);
    for (let i = 0; i < 20; i++) expect((await infer(g, s, five(i))).status).toBe(200);
    expect(await readyz(g)).toBe(200);

    const load = startLoad(() => g, s);
    await during(1_500);
    const downAt = performance.now();
    await services.postgres!.stop();
    const notReadyMs = await waitReady(g, 503, 5_000);
    await during(3_000);
    const upAt = performance.now();
    await services.postgres!.resume();
    const readyMs = await waitReady(g, 200, 15_000);
    const readyAt = performance.now();
    await during(3_000);
    const answers = await load.stop();

    const figures = {
      before: tally(sentBetween(answers, 0, downAt)),
      while_down: tally(sentBetween(answers, downAt, upAt)),
      recovering: tally(sentBetween(answers, upAt, readyAt)),
      after_ready: tally(sentBetween(answers, readyAt)),
      readyz_503_after_ms: notReadyMs,
      readyz_200_after_restart_ms: readyMs,
      slowest_ms: Math.round(Math.max(...answers.map((a) => a.ms))),
    };
    console.info(`PostgreSQL outage: ${JSON.stringify(figures)}`);
    expect(sentBetween(answers, downAt, upAt).length).toBeGreaterThan(0);
    expectOnlySpecAnswers(answers, ['internal_error', 'model_unavailable', 'routing_timeout']);
    const settled = sentBetween(answers, readyAt + 1_000);
    expect(settled.length).toBeGreaterThan(0);
    expect(tally(settled)).toEqual({ '200': settled.length });
    await expectRecorded(services, acceptedIds(answers), 15_000);
    expect(g.child.exitCode).toBeNull();
  },
);
