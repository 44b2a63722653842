import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { Client, TestApp } from '../helpers/app.ts';
import { testPki } from '../helpers/https-receiver.ts';
import { DeliveryWorker, type DeliveryWorkerOptions } from '../../src/jobs/webhook-delivery/worker.ts';
import type { EgressPolicy } from '../../src/kernel/egress.ts';

/** Test env: loopback receivers are reachable only because the allowlist says so (CONTRACT §1, "allowlisted egress"). */
export const webhookEnv = () => ({
  SVC_EGRESS_ALLOWLIST: '127.0.0.1',
  SVC_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
});

/** A delivery worker on the test app's database that trusts the test CA; driven by runDue() unless started. */
export function testWorker(t: TestApp, opts: DeliveryWorkerOptions & { egress?: EgressPolicy } = {}): DeliveryWorker {
  const { egress, ...workerOpts } = opts;
  return new DeliveryWorker(
    { ...t.deps, secretBox: t.deps.webhooks.secretBox, egress: egress ?? t.deps.webhooks.egress },
    { ca: testPki().caCert, timeoutMs: 2_000, ...workerOpts },
  );
}

export async function createWebhook(api: Client, body: { project_id?: string; url: string; events: string[] }) {
  const res = await api.post('/v1/webhooks', body);
  expect(res.status, res.raw).toBe(200);
  return res.body as { id: string; secret: string; url: string; events: string[]; status: string; created_at: number };
}

/** Emits key.rotated in the project by rotating the given key (the key service writes it through the outbox). */
export async function emitKeyRotated(api: Client, keyId: string) {
  const res = await api.post(`/v1/keys/${keyId}/rotate`, {});
  expect(res.status, res.raw).toBe(200);
  return res.body;
}

export async function deliveriesOf(api: Client, webhookId: string) {
  const res = await api.get(`/v1/webhooks/${webhookId}/deliveries`, { query: { limit: 100 } });
  expect(res.status, res.raw).toBe(200);
  return res.body.data as any[];
}
