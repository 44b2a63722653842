import { afterAll, expect, it, onTestFailed } from 'vitest';
import { seedProject } from '../../helpers/app.ts';
import type { GatewayProcess } from '../../helpers/gateway-process.ts';
import { NO_SERVICES, NO_SERVICES_REASON, openServices, type TestServices } from '../../helpers/private-services.ts';
import { acceptedIds, deploy, expectRecorded, five, infer, OPEN_PROJECT, tally, type Deployment } from '../replicas/support.ts';
import { during, expectOnlySpecAnswers, FAULT_ENV, sentBetween, startLoad } from './support.ts';

let services: TestServices | undefined;
let d: Deployment | undefined;
afterAll(async () => {
  await d?.close();
  await services?.close();
});

/**
 * kill -9 under load, then the same gateway started again on the same database, Redis and port: every request that
 * was answered 200 before the kill has its usage record and inference.completed event (nothing accepted lived only in
 * the dead process's memory). Requests in flight at the kill, and those sent before the new process listens, get no
 * answer: that is the only failure allowed.
 */
it.skipIf(NO_SERVICES)(
  NO_SERVICES ? `kill -9 under load (${NO_SERVICES_REASON})` : 'loses no accepted usage or event when killed with SIGKILL under load and restarted',
  { timeout: 90_000 },
  async () => {
    services = await openServices();
    d = await deploy(services, FAULT_ENV);
    let g: GatewayProcess = await d.start();
    onTestFailed(() => console.error(`gateway output (tail):\n${g.output().slice(-6_000)}`));
    const s = await seedProject(g, OPEN_PROJECT);
    for (let i = 0; i < 20; i++) expect((await infer(g, s, five(i))).status).toBe(200);

    const load = startLoad(() => g, s);
    await during(2_000);
    const killedAt = performance.now();
    expect(await g.stop('SIGKILL')).toBe('SIGKILL');
    g = await d.start({}, { port: g.port });
    const restartedAt = performance.now();
    await during(2_500);
    const answers = await load.stop();

    const beforeKill = answers.filter((a) => a.status === 200 && a.sentAt + a.ms <= killedAt);
    console.info(
      `kill -9: ${JSON.stringify({
        before: tally(sentBetween(answers, 0, killedAt)),
        restarting: tally(sentBetween(answers, killedAt, restartedAt)),
        after: tally(sentBetween(answers, restartedAt)),
        restart_ms: Math.round(restartedAt - killedAt),
      })}`,
    );
    expect(beforeKill.length).toBeGreaterThan(20);
    // No answer only for requests in flight at the kill or sent while no process listened.
    expectOnlySpecAnswers(
      answers,
      [],
      (a) => a.sentAt < restartedAt && a.sentAt + a.ms >= killedAt,
      (a) => a.sentAt >= restartedAt && a.sentAt < restartedAt + 1_000,
    );
    const after = sentBetween(answers, restartedAt);
    expect(after.length).toBeGreaterThan(0);
    expect(tally(after)).toEqual({ '200': after.length });
    await expectRecorded(services, acceptedIds(answers), 15_000);
  },
);
