import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedProject } from '../../helpers/app.ts';
import { pollUntil, type GatewayProcess } from '../../helpers/gateway-process.ts';
import { startReceiver, testPki, type Receiver } from '../../helpers/https-receiver.ts';
import { NO_SERVICES, NO_SERVICES_REASON, openServices, type TestServices } from '../../helpers/private-services.ts';
import { acceptedIds, deploy, expectRecorded, five, infer, OPEN_PROJECT, tally, type Deployment } from './support.ts';

/**
 * SVC_ROLE (README "Running several replicas"): an api process that only answers requests and appends usage to the
 * Redis stream, and a worker process that writes the stream to PostgreSQL and sends the webhooks.
 */
let services: TestServices;
let d: Deployment;
let api: GatewayProcess;
let worker: GatewayProcess;
let receiver: Receiver;

describe.skipIf(NO_SERVICES)(NO_SERVICES ? `SVC_ROLE api + worker (${NO_SERVICES_REASON})` : 'SVC_ROLE: an api process and a worker process', () => {
  beforeAll(async () => {
    services = await openServices();
    receiver = await startReceiver();
    d = await deploy(services, { SVC_EGRESS_ALLOWLIST: '127.0.0.1', NODE_EXTRA_CA_CERTS: testPki().caFile });
    [api, worker] = await Promise.all([d.start({ SVC_ROLE: 'api' }), d.start({ SVC_ROLE: 'worker' })]);
  }, 120_000);

  afterAll(async () => {
    await d?.close();
    await receiver?.close();
    await services?.close();
  });

  it('the worker answers the health probes and nothing else', async () => {
    expect((await worker.call('GET', '/healthz')).status).toBe(200);
    // A probe, as an orchestrator's: asked again until ready (each check gives up after 1 s, which a just-started
    // process on a loaded CI machine can miss once).
    const ready = await pollUntil('the worker ready', async () => {
      const r = await worker.call('GET', '/readyz');
      return r.status === 200 ? r : null;
    }, 15_000, 200);
    expect(ready.body).toEqual({ status: 'ok', checks: { database: 'ok', redis: 'ok', limits: 'ok' } });
    const other = await worker.call('GET', '/v1/keys');
    expect(other.status).toBe(404);
    expect(other.body.error).toMatchObject({ type: 'svc.error', code: 'not_found', request_id: other.headers['x-svc-request-id'] });
    expect((await api.call('GET', '/v1/keys')).status).toBe(200);
  });

  it('inferences answered by the api are recorded and delivered by the worker; with no worker they wait in the stream', { timeout: 90_000 }, async () => {
    const s = await seedProject(api, { ...OPEN_PROJECT, scopes: ['inference:write', 'governance:manage'] });
    const hook = await api.call('POST', '/v1/webhooks', { key: s.secret, body: { project_id: s.projectId, url: receiver.url, events: ['inference.completed'] } });
    expect(hook.status).toBe(200);
    receiver.secrets.set(hook.body.id, hook.body.secret);
    const mine = () => receiver.receipts.filter((r) => r.headers['x-svc-webhook-id'] === hook.body.id);

    const first = await Promise.all(Array.from({ length: 10 }, (_, i) => infer(api, s, five(i))));
    expect(tally(first)).toEqual({ '200': 10 });
    await expectRecorded(services, acceptedIds(first));
    await pollUntil('ten deliveries', async () => mine().length >= 10, 20_000, 50);
    // …and recorded as succeeded: a delivery the receiver got but the worker had not yet recorded when killed is sent
    // again by the next worker (at-least-once, spec §6.1), which would make this test count it twice.
    await pollUntil('ten deliveries recorded', async () => {
      const rows = await services.sql<{ n: string }>("SELECT count(*) AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'succeeded'", [hook.body.id]);
      return Number(rows[0]!.n) >= 10;
    }, 20_000, 50);

    // The worker goes away (kill -9): the api still answers, and what it accepts stays in the Redis stream.
    await worker.stop('SIGKILL');
    const second = await Promise.all(Array.from({ length: 10 }, (_, i) => infer(api, s, five(100 + i))));
    expect(tally(second)).toEqual({ '200': 10 });
    await new Promise((r) => setTimeout(r, 300));
    const written = await services.sql<{ n: string }>('SELECT count(*) AS n FROM usage_records WHERE request_id = ANY($1)', [acceptedIds(second)]);
    expect(Number(written[0]!.n)).toBe(0);

    // A new worker writes them and sends their webhooks, each once.
    worker = await d.start({ SVC_ROLE: 'worker' });
    await expectRecorded(services, acceptedIds(second), 30_000);
    await pollUntil('twenty deliveries', async () => mine().length >= 20, 30_000, 50);
    await new Promise((r) => setTimeout(r, 300));
    const receipts = mine();
    expect(receipts.every((r) => r.verifyError === null)).toBe(true);
    expect(receipts.map((r) => r.event!.data.request_id).sort()).toEqual(acceptedIds([...first, ...second]).sort());
  });
});
