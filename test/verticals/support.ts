import { expect } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { testWorker } from '../webhooks/support.ts';
import { VerticalWorker } from '../../src/jobs/vertical-work/worker.ts';

/**
 * A test app whose one provider ("wire", model wire-1) is an OpenAI-wire mock whose answers the test sets: what the
 * gateway sends for a vertical's prompts and does with realistic answers.
 */
export async function startWireApp(): Promise<{ t: TestApp; operator: Client; wire: MockOpenAI; close(): Promise<void> }> {
  const wire = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [{ name: 'wire', kind: 'openai', base_url: wire.url, region: 'local', timeout_ms: 5000, models: [{ id: 'wire-1', input_per_mtok: 1, output_per_mtok: 2 }] }],
  });
  const t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  return {
    t,
    operator: client(t.app),
    wire,
    close: async () => {
      await t.close();
      await wire.close();
    },
  };
}

/** A project with a key of one vertical (its write scope plus inference:write, as spec §5.6 says), on a plan. */
export async function verticalProject(operator: Client, scopes: string[], plan = 'starter') {
  const seeded = await seedProject(operator, { scopes, plan });
  return { projectId: seeded.projectId, keyId: seeded.keyId, secret: seeded.secret };
}

/** A webhook receiver subscribed to `events` in the project (created by the operator). */
export async function receiverFor(operator: Client, projectId: string, events: string[]): Promise<Receiver> {
  const r = await startReceiver();
  const hook = await operator.post('/v1/webhooks', { project_id: projectId, url: r.url, events });
  expect(hook.status, hook.raw).toBe(200);
  r.secret = hook.body.secret;
  return r;
}

/** Sends what is pending to the receivers and waits for `count` receipts; returns the verified events. */
export async function deliver(t: TestApp, r: Receiver, count: number) {
  const worker = testWorker(t);
  await worker.runDue();
  await worker.stop();
  await r.waitFor(count);
  expect(r.receipts.every((x) => x.verifyError === null)).toBe(true);
  return r.receipts.map((x) => x.event!);
}

/** Runs every vertical job due now, as the background worker does. */
export async function runVerticalWork(t: TestApp) {
  return new VerticalWorker(t.deps).runDue();
}
