import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/app.ts';
import { startReceiver, testPki, type Receiver } from '../helpers/https-receiver.ts';
import { DATABASE_URL, REDIS_URL, uniqueName } from '../helpers/services.ts';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.ts';

const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

/**
 * The gateway is killed with SIGKILL while a receiver holds the delivery's request, then started again on the same
 * database: the delivery arrives (same del_ and evt_ ids) once the dead process's lease has expired. PostgreSQL when
 * DATABASE_URL is set, else the embedded PGlite in a data directory that outlives the process.
 */
it('loses no delivery when the gateway is killed mid-delivery (kill -9) and restarted', { timeout: 180_000 }, async () => {
  const receiver: Receiver = await startReceiver({ answer: () => 'hang' });
  cleanup.push(() => receiver.close());
  const dataDir = mkdtempSync(path.join(tmpdir(), 'svc-crash-'));
  cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
  let db: TestDatabase | null = null;
  if (DATABASE_URL) {
    db = await createTestDatabase();
    cleanup.push(() => db!.drop());
  }
  const env: Record<string, string> = {
    SVC_DATA_DIR: dataDir, // PGlite's files, and the generated webhook secret key, both survive the crash
    SVC_EGRESS_ALLOWLIST: '127.0.0.1',
    // The receiver's private CA, trusted the way an operator would (CONTRACT §1).
    NODE_EXTRA_CA_CERTS: testPki().caFile,
    // A 1 s deadline makes the lease 2 s, so the test does not wait the production 15 s.
    SVC_WEBHOOK_TIMEOUT_MS: '1000',
    ...(db ? { DATABASE_URL: db.url! } : {}),
    ...(REDIS_URL ? { REDIS_URL, SVC_REDIS_PREFIX: `${uniqueName('crash')}:` } : {}),
  };

  let gateway: GatewayProcess = await startGateway(env);
  cleanup.push(() => gateway.stop('SIGKILL'));
  const project = await gateway.call('POST', '/v1/projects', { body: { name: 'crash' } });
  expect(project.status).toBe(200);
  const webhook = await gateway.call('POST', '/v1/webhooks', { body: { project_id: project.body.id, url: receiver.url, events: ['key.revoked'] } });
  expect(webhook.status).toBe(200);
  receiver.secret = webhook.body.secret;
  const key = await gateway.call('POST', '/v1/keys', { body: { project_id: project.body.id, name: 'doomed', scopes: ['keys:manage'] } });
  expect((await gateway.call('POST', `/v1/keys/${key.body.id}/revoke`)).status).toBe(200);

  const [held] = await receiver.waitFor(1, 10_000);
  expect(held!.verifyError).toBeNull();
  expect(await gateway.stop('SIGKILL')).toBe('SIGKILL');
  receiver.answer = () => 200;

  gateway = await startGateway(env);
  const receipts = await receiver.waitFor(2, 20_000);
  const [first, second] = receipts;
  expect(second!.verifyError).toBeNull();
  expect(second!.deliveryId).toBe(first!.deliveryId);
  expect(second!.event!.id).toBe(first!.event!.id);
  expect(second!.event).toMatchObject({ type: 'key.revoked', data: { key_id: key.body.id } });

  let deliveries = await gateway.call('GET', `/v1/webhooks/${webhook.body.id}/deliveries`);
  for (let i = 0; i < 50 && deliveries.body.data[0]?.status !== 'succeeded'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    deliveries = await gateway.call('GET', `/v1/webhooks/${webhook.body.id}/deliveries`);
  }
  expect(deliveries.body.data).toHaveLength(1);
  expect(deliveries.body.data[0]).toMatchObject({ id: first!.deliveryId, status: 'succeeded', response_status: 200 });

  // SIGTERM is a clean shutdown.
  expect(await gateway.stop('SIGTERM')).toBe(0);
});
