import { performance } from 'node:perf_hooks';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { startReceiver, type Answer, type Receiver } from '../helpers/https-receiver.ts';
import { freePort } from '../helpers/ports.ts';
import { EgressPolicy } from '../../src/kernel/egress.ts';
import { createWebhook, deliveriesOf, emitKeyRotated, testWorker, webhookEnv } from './support.ts';

let t: TestApp;
let operator: Client;
const receivers: Receiver[] = [];

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t.close();
});

async function receiver(answer?: (index: number) => Answer): Promise<Receiver> {
  const r = await startReceiver({ answer: answer ? (_r, i) => answer(i) : undefined });
  receivers.push(r);
  return r;
}

/** A project, a webhook on `url` for key events, and the project key whose rotation emits key.rotated. */
async function subscribed(url: string, r?: Receiver) {
  const project = await seedProject(operator);
  const webhook = await createWebhook(operator, { project_id: project.projectId, url, events: ['key.rotated', 'key.revoked'] });
  if (r) r.secret = webhook.secret;
  return { project, webhook };
}

/** Outcomes of one webhook's deliveries: the file shares one database, so other tests' retries may also be due. */
async function runFor(worker: ReturnType<typeof testWorker>, webhookId: string) {
  return (await worker.runDue()).filter((o) => o.webhookId === webhookId);
}

describe('a delivery', () => {
  it("carries every header of spec 6.1.3 and the 2.4 envelope, and passes Stripe's verifier", async () => {
    const r = await receiver();
    const { project, webhook } = await subscribed(r.url, r);
    const rotated = await emitKeyRotated(operator, project.keyId);
    const worker = testWorker(t);
    await worker.runDue();
    await worker.stop();

    expect(r.receipts).toHaveLength(1);
    const [got] = r.receipts;
    const [delivery] = await deliveriesOf(operator, webhook.id);
    expect(got!.verifyError).toBeNull();
    expect(got!.headers['content-type']).toBe('application/json');
    expect(got!.headers['x-svc-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(got!.headers['x-svc-event']).toBe('key.rotated');
    expect(got!.headers['x-svc-delivery-id']).toBe(delivery.id);
    expect(got!.headers['x-svc-delivery-id']).toMatch(/^del_/);
    expect(got!.headers['x-svc-webhook-id']).toBe(webhook.id);

    const envelope = JSON.parse(got!.rawBody);
    expect(Object.keys(envelope)).toEqual(['id', 'object', 'type', 'created_at', 'project_id', 'data']);
    expect(envelope).toEqual({
      id: delivery.event_id,
      object: 'svc.webhook.event',
      type: 'key.rotated',
      created_at: Math.floor(t.clock.now() / 1000),
      project_id: project.projectId,
      data: { key_id: project.keyId, previous_secret_expires_at: rotated.previous_secret_expires_at },
    });
    expect(envelope.id).toMatch(/^evt_/);
    // Stripe's verifier returned the parsed body: the signature covers exactly these bytes.
    expect(got!.event).toEqual(envelope);

    // The verifier is not a formality: another secret or a changed body is rejected.
    const stripe = new Stripe('sk_test_x');
    const header = String(got!.headers['x-svc-signature']);
    expect(() => stripe.webhooks.constructEvent(got!.rawBody, header, 'whsec_other')).toThrow(/signature/i);
    expect(() => stripe.webhooks.constructEvent(got!.rawBody.replace('key.rotated', 'key.revoked'), header, webhook.secret)).toThrow(
      /signature/i,
    );

    expect(delivery).toEqual({
      id: delivery.id,
      object: 'svc.webhook.delivery',
      webhook_id: webhook.id,
      event_id: envelope.id,
      event_type: 'key.rotated',
      status: 'succeeded',
      attempts: 1,
      last_attempt_at: Math.floor(t.clock.now() / 1000),
      next_attempt_at: null,
      response_status: 200,
      created_at: Math.floor(t.clock.now() / 1000),
    });
    const attempts = await t.deps.db.webhookAttempt.findMany({ where: { deliveryId: delivery.id } });
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt: 1, responseStatus: 200, error: null });
    expect(attempts[0]!.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('fans one event out to every subscribed active webhook of the project, and to no other', async () => {
    const a = await receiver();
    const b = await receiver();
    const other = await receiver();
    const project = await seedProject(operator);
    const wa = await createWebhook(operator, { project_id: project.projectId, url: a.url, events: ['key.rotated'] });
    const wb = await createWebhook(operator, { project_id: project.projectId, url: b.url, events: ['key.rotated', 'key.revoked'] });
    const notSubscribed = await createWebhook(operator, { project_id: project.projectId, url: other.url, events: ['policy.updated'] });
    const otherProject = await seedProject(operator);
    const elsewhere = await createWebhook(operator, { project_id: otherProject.projectId, url: other.url, events: ['key.rotated'] });
    a.secret = wa.secret;
    b.secret = wb.secret;
    await emitKeyRotated(operator, project.keyId);
    const worker = testWorker(t);
    await worker.runDue();
    await worker.stop();
    expect(a.receipts.map((x) => x.verifyError)).toEqual([null]);
    expect(b.receipts.map((x) => x.verifyError)).toEqual([null]);
    expect(other.receipts).toHaveLength(0);
    expect(a.receipts[0]!.event!.id).toBe(b.receipts[0]!.event!.id);
    expect(a.receipts[0]!.deliveryId).not.toBe(b.receipts[0]!.deliveryId);
    expect(await deliveriesOf(operator, notSubscribed.id)).toEqual([]);
    expect(await deliveriesOf(operator, elsewhere.id)).toEqual([]);
  });

  it('keeps its del_ and evt_ ids and its exact bytes on every retry, and signs each attempt anew', async () => {
    const r = await receiver((i) => (i === 0 ? 500 : 200));
    const { project, webhook } = await subscribed(r.url, r);
    await emitKeyRotated(operator, project.keyId);
    const worker = testWorker(t);
    await worker.runDue();
    let [delivery] = await deliveriesOf(operator, webhook.id);
    expect(delivery).toMatchObject({ status: 'retrying', attempts: 1, response_status: 500 });
    expect(delivery.next_attempt_at).toBe(delivery.last_attempt_at + 30);

    t.clock.advance(30_000);
    await worker.runDue();
    await worker.stop();
    [delivery] = await deliveriesOf(operator, webhook.id);
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 2, response_status: 200, next_attempt_at: null });
    expect(r.receipts).toHaveLength(2);
    const [first, second] = r.receipts;
    expect(second!.deliveryId).toBe(first!.deliveryId);
    expect(second!.deliveryId).toBe(delivery.id);
    expect(second!.event!.id).toBe(first!.event!.id);
    expect(second!.rawBody).toBe(first!.rawBody);
    expect([first!.verifyError, second!.verifyError]).toEqual([null, null]);
    const ts = r.receipts.map((x) => Number(/^t=(\d+)/.exec(String(x.headers['x-svc-signature']))![1]));
    expect(ts[1]! - ts[0]!).toBe(30);
  });
});

describe('a failed attempt', () => {
  it.each([
    ['a 500', 'status', (r: Receiver) => r.url, () => 500 as Answer, 500, /500/],
    ['a 302 (not followed)', 'redirect', (r: Receiver) => r.url, (r: Receiver) => ({ redirect: `${r.url}/elsewhere` }) as Answer, 302, /redirect/],
    ['no answer within the deadline', 'timeout', (r: Receiver) => r.url, () => 'hang' as Answer, null, /timeout/],
  ])('is %s', async (_name, _kind, urlOf, answerOf, status, error) => {
    const r = await startReceiver();
    receivers.push(r);
    r.answer = () => answerOf(r);
    const { project, webhook } = await subscribed(urlOf(r), r);
    await emitKeyRotated(operator, project.keyId);
    // The spec's deadline is 10 s (the default); a short one keeps the test fast and shows the same rule.
    const worker = testWorker(t, { timeoutMs: 300 });
    const started = performance.now();
    await worker.runDue();
    await worker.stop();
    if (status === null) expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(r.receipts).toHaveLength(1); // a redirect is not followed
    const [delivery] = await deliveriesOf(operator, webhook.id);
    expect(delivery).toMatchObject({ status: 'retrying', attempts: 1, response_status: status });
    expect(delivery.next_attempt_at).toBe(delivery.last_attempt_at + 30);
    const [attempt] = await t.deps.db.webhookAttempt.findMany({ where: { deliveryId: delivery.id } });
    expect(attempt).toMatchObject({ attempt: 1, responseStatus: status });
    expect(attempt!.error).toMatch(error);
    await operator.post(`/v1/webhooks/${webhook.id}/disable`); // no retries into later tests
  });

  it('is a refused connection', async () => {
    const port = await freePort();
    const { project, webhook } = await subscribed(`https://127.0.0.1:${port}/hooks`);
    await emitKeyRotated(operator, project.keyId);
    const worker = testWorker(t);
    await worker.runDue();
    await worker.stop();
    const [delivery] = await deliveriesOf(operator, webhook.id);
    expect(delivery).toMatchObject({ status: 'retrying', attempts: 1, response_status: null });
    const [attempt] = await t.deps.db.webhookAttempt.findMany({ where: { deliveryId: delivery.id } });
    expect(attempt!.error).toBe('connection refused');
    await operator.post(`/v1/webhooks/${webhook.id}/disable`);
  });

  it('has a 10-second deadline by default (spec 6.1.2)', () => {
    expect(t.config.webhookTimeoutMs).toBe(10_000);
    expect(t.deps.webhooks.worker.timeoutMs).toBe(10_000);
    expect(t.deps.webhooks.worker.leaseMs).toBeGreaterThan(10_000);
  });
});

describe('egress at delivery time', () => {
  it('connects to the address it vetted, keeps TLS on the hostname, and refuses a host that now resolves inside', async () => {
    let answer = ['127.0.0.1'];
    const policy = new EgressPolicy(['127.0.0.1'], async () => answer.map((address) => ({ address, family: 4 })));
    const saved = t.deps.webhooks.egress;
    t.deps.webhooks.egress = policy;
    try {
      const r = await receiver();
      // The test certificate names localhost; the lookup hands the connect step the vetted 127.0.0.1.
      const { project, webhook } = await subscribed(`https://localhost:${r.port}/hooks`, r);
      await emitKeyRotated(operator, project.keyId);
      const worker = testWorker(t, { egress: policy });
      expect(await runFor(worker, webhook.id)).toMatchObject([{ status: 'succeeded', responseStatus: 200 }]);
      await worker.stop();
      expect(r.receipts[0]!.headers.host).toBe(`localhost:${r.port}`);
      expect(r.receipts[0]!.verifyError).toBeNull();

      answer = ['10.1.2.3']; // DNS rebinding after the webhook was accepted
      await emitKeyRotated(operator, project.keyId);
      const fresh = testWorker(t, { egress: policy });
      const [refused] = await runFor(fresh, webhook.id);
      await fresh.stop();
      expect(refused).toMatchObject({ status: 'retrying', responseStatus: null });
      expect(refused!.error).toMatch(/^egress refused: .*private/);
      expect(r.receipts).toHaveLength(1);
      await operator.post(`/v1/webhooks/${webhook.id}/disable`);
    } finally {
      t.deps.webhooks.egress = saved;
    }
  });

  it('checks a literal address against the allowlist in force when it sends', async () => {
    const r = await receiver();
    const { project, webhook } = await subscribed(r.url, r);
    await emitKeyRotated(operator, project.keyId);
    const worker = testWorker(t, { egress: new EgressPolicy([]) }); // 127.0.0.1 no longer allowlisted
    const [outcome] = await runFor(worker, webhook.id);
    await worker.stop();
    expect(outcome!.error).toMatch(/^egress refused: .*loopback/);
    expect(r.receipts).toHaveLength(0);
    await operator.post(`/v1/webhooks/${webhook.id}/disable`);
  });
});

describe('the retry schedule', () => {
  it('runs the six attempts of spec 6.1.4, measured from the first, then fails the delivery and audits webhook.delivery.failed', async () => {
    const r = await receiver(() => 500);
    const { project, webhook } = await subscribed(r.url, r);
    await emitKeyRotated(operator, project.keyId);
    const worker = testWorker(t);
    const first = t.clock.now();
    const offsetsS = [0, 30, 120, 600, 3600, 21600];
    for (let i = 0; i < offsetsS.length; i++) {
      // One millisecond early, nothing is due.
      t.clock.ms = first + offsetsS[i]! * 1000 - 1;
      if (i > 0) expect(await runFor(worker, webhook.id)).toEqual([]);
      t.clock.ms = first + offsetsS[i]! * 1000;
      const [outcome] = await runFor(worker, webhook.id);
      expect(outcome).toMatchObject({ attempt: i + 1, responseStatus: 500 });
      expect(outcome!.status).toBe(i < offsetsS.length - 1 ? 'retrying' : 'failed');
    }
    // Past the horizon nothing more is sent.
    t.clock.ms = first + 48 * 3_600_000;
    expect(await runFor(worker, webhook.id)).toEqual([]);
    await worker.stop();

    expect(r.receipts).toHaveLength(6);
    expect(new Set(r.receipts.map((x) => x.deliveryId)).size).toBe(1);
    const [delivery] = await deliveriesOf(operator, webhook.id);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 6, next_attempt_at: null, response_status: 500 });
    const attempts = await t.deps.db.webhookAttempt.findMany({ where: { deliveryId: delivery.id }, orderBy: { attempt: 'asc' } });
    expect(attempts.map((a) => (a.attemptedAt.getTime() - first) / 1000)).toEqual(offsetsS);

    const audit = await operator.get('/v1/audit/events', { query: { project_id: project.projectId, action: 'webhook.delivery.failed' } });
    expect(audit.status).toBe(200);
    expect(audit.body.data).toHaveLength(1);
    expect(audit.body.data[0]).toMatchObject({
      action: 'webhook.delivery.failed',
      project_id: project.projectId,
      target_id: delivery.id,
      actor_key_id: null,
      data: { webhook_id: webhook.id, delivery_id: delivery.id, event_id: delivery.event_id, attempts: 6, last_response_status: 500 },
    });
  });

  it('stops at the horizon when a configured schedule reaches past it', async () => {
    const short = await buildTestApp({
      env: { ...webhookEnv(), SVC_WEBHOOK_RETRY_SCHEDULE: '0,10,20,40', SVC_WEBHOOK_RETRY_HORIZON_S: '30' },
    });
    try {
      const api = client(short.app);
      const r = await receiver(() => 503);
      const project = await seedProject(api);
      const webhook = await createWebhook(api, { project_id: project.projectId, url: r.url, events: ['key.rotated'] });
      r.secret = webhook.secret;
      await emitKeyRotated(api, project.keyId);
      const worker = testWorker(short);
      const outcomes = [];
      for (const step of [0, 10_000, 10_000, 20_000, 3_600_000]) {
        short.clock.advance(step);
        outcomes.push(...(await worker.runDue()));
      }
      await worker.stop();
      expect(outcomes.map((o) => o.status)).toEqual(['retrying', 'retrying', 'failed']);
      expect(r.receipts).toHaveLength(3);
      const audit = await api.get('/v1/audit/events', { query: { project_id: project.projectId, action: 'webhook.delivery.failed' } });
      expect(audit.body.data).toHaveLength(1);
    } finally {
      await short.close();
    }
  });
});

describe('the horizon', () => {
  it('sends nothing once it has passed, even a retry that came due before it (the gateway was down): failed and audited', async () => {
    const short = await buildTestApp({
      env: { ...webhookEnv(), SVC_WEBHOOK_RETRY_SCHEDULE: '0,10,20', SVC_WEBHOOK_RETRY_HORIZON_S: '30' },
    });
    try {
      const api = client(short.app);
      const r = await receiver(() => 500);
      const project = await seedProject(api);
      const webhook = await createWebhook(api, { project_id: project.projectId, url: r.url, events: ['key.rotated'] });
      r.secret = webhook.secret;
      await emitKeyRotated(api, project.keyId);
      const worker = testWorker(short);
      expect((await worker.runDue()).map((o) => o.status)).toEqual(['retrying']);
      // The second attempt was due at 10 s; nothing ran until 30 s.
      short.clock.advance(30_000);
      const [late] = await worker.runDue();
      await worker.stop();
      expect(late).toMatchObject({ status: 'failed', attempt: 1, error: 'retry horizon passed' });
      expect(r.receipts).toHaveLength(1);
      const [delivery] = await deliveriesOf(api, webhook.id);
      expect(delivery).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: null, response_status: 500 });
      const audit = await api.get('/v1/audit/events', { query: { project_id: project.projectId, action: 'webhook.delivery.failed' } });
      expect(audit.body.data).toHaveLength(1);
      expect(audit.body.data[0].data).toMatchObject({ delivery_id: delivery.id, attempts: 1, last_response_status: 500, last_error: 'receiver answered 500' });
    } finally {
      await short.close();
    }
  });
});

describe('replay', () => {
  it('sends a failed delivery again as a new delivery of the same event', async () => {
    let healthy = false;
    const r = await receiver(() => (healthy ? 200 : 500));
    const short = await buildTestApp({ env: { ...webhookEnv(), SVC_WEBHOOK_RETRY_SCHEDULE: '0' } });
    try {
      const api = client(short.app);
      const project = await seedProject(api);
      const webhook = await createWebhook(api, { project_id: project.projectId, url: r.url, events: ['key.revoked'] });
      r.secret = webhook.secret;
      const revoked = await api.post(`/v1/keys/${project.keyId}/revoke`);
      expect(revoked.status).toBe(200);
      const worker = testWorker(short);
      await worker.runDue();
      const [failed] = await deliveriesOf(api, webhook.id);
      expect(failed).toMatchObject({ status: 'failed', attempts: 1 });

      healthy = true;
      const replay = await api.post(`/v1/webhooks/${webhook.id}/deliveries/${failed.id}/replay`);
      expect(replay.status).toBe(200);
      expect(replay.body).toMatchObject({
        object: 'svc.webhook.delivery',
        webhook_id: webhook.id,
        event_id: failed.event_id,
        event_type: 'key.revoked',
        status: 'pending',
        attempts: 0,
        last_attempt_at: null,
        response_status: null,
      });
      expect(replay.body.id).toMatch(/^del_/);
      expect(replay.body.id).not.toBe(failed.id);

      await worker.runDue();
      await worker.stop();
      expect(r.receipts).toHaveLength(2);
      expect(r.receipts[1]!.deliveryId).toBe(replay.body.id);
      expect(r.receipts[1]!.event!.id).toBe(failed.event_id);
      expect(r.receipts[1]!.rawBody).toBe(r.receipts[0]!.rawBody);
      expect(r.receipts[1]!.verifyError).toBeNull();
      const all = await deliveriesOf(api, webhook.id);
      expect(all.map((d) => [d.id, d.status])).toEqual([
        [replay.body.id, 'succeeded'],
        [failed.id, 'failed'],
      ]);

      // Only a failed delivery can be replayed.
      const again = await api.post(`/v1/webhooks/${webhook.id}/deliveries/${replay.body.id}/replay`);
      expect(again.status).toBe(400);
      expect(again.body.error).toMatchObject({ code: 'invalid_request', param: 'delivery_id' });
      const audit = await api.get('/v1/audit/events', { query: { project_id: project.projectId, action: 'webhook.delivery.replay' } });
      expect(audit.body.data.map((a: any) => a.target_id)).toEqual([replay.body.id]);
    } finally {
      await short.close();
    }
  });

  it('refuses a pending or retrying delivery', async () => {
    const r = await receiver(() => 500);
    const { project, webhook } = await subscribed(r.url, r);
    await emitKeyRotated(operator, project.keyId);
    const [pending] = await deliveriesOf(operator, webhook.id);
    expect(pending.status).toBe('pending');
    const res1 = await operator.post(`/v1/webhooks/${webhook.id}/deliveries/${pending.id}/replay`);
    expect(res1.status).toBe(400);
    expect(res1.body.error).toMatchObject({ code: 'invalid_request', param: 'delivery_id' });
    const worker = testWorker(t);
    await worker.runDue();
    await worker.stop();
    const res2 = await operator.post(`/v1/webhooks/${webhook.id}/deliveries/${pending.id}/replay`);
    expect(res2.status).toBe(400);
    expect(res2.body.error.message).toMatch(/retrying/);
    await operator.post(`/v1/webhooks/${webhook.id}/disable`);
  });
});

describe('disable', () => {
  it('stops pending retries and creates no new deliveries', async () => {
    const r = await receiver(() => 500);
    const { project, webhook } = await subscribed(r.url, r);
    await emitKeyRotated(operator, project.keyId);
    const worker = testWorker(t);
    await worker.runDue();
    const [retrying] = await deliveriesOf(operator, webhook.id);
    expect(retrying.status).toBe('retrying');

    const disabled = await operator.post(`/v1/webhooks/${webhook.id}/disable`);
    expect(disabled.status).toBe(200);
    expect(disabled.body).toEqual({
      id: webhook.id,
      object: 'svc.webhook',
      url: webhook.url,
      events: webhook.events,
      status: 'disabled',
      created_at: webhook.created_at,
    });
    const [stopped] = await deliveriesOf(operator, webhook.id);
    expect(stopped).toMatchObject({ id: retrying.id, status: 'failed', attempts: 1, next_attempt_at: null });

    await emitKeyRotated(operator, project.keyId);
    t.clock.advanceHours(25);
    expect(await runFor(worker, webhook.id)).toEqual([]);
    await worker.stop();
    expect(r.receipts).toHaveLength(1);
    expect(await deliveriesOf(operator, webhook.id)).toHaveLength(1);
    // A disabled endpoint is not an exhausted schedule: no webhook.delivery.failed audit.
    const audit = await operator.get('/v1/audit/events', { query: { project_id: project.projectId, action: 'webhook.delivery.failed' } });
    expect(audit.body.data).toEqual([]);
    const disableAudit = await operator.get('/v1/audit/events', { query: { project_id: project.projectId, action: 'webhook.disable' } });
    expect(disableAudit.body.data[0]).toMatchObject({ target_id: webhook.id, data: { deliveries_stopped: 1 } });

    // Disabling again returns the same webhook; replaying onto a disabled webhook is refused.
    const again = await operator.post(`/v1/webhooks/${webhook.id}/disable`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(disabled.body);
    const replay = await operator.post(`/v1/webhooks/${webhook.id}/deliveries/${retrying.id}/replay`);
    expect(replay.status).toBe(400);
    expect(replay.body.error).toMatchObject({ code: 'invalid_request', param: 'webhook_id' });
  });
});

describe('a delivery of a webhook disabled while the event was written', () => {
  it('is failed without an attempt', async () => {
    const r = await receiver();
    const { project, webhook } = await subscribed(r.url, r);
    await emitKeyRotated(operator, project.keyId);
    // The race: the outbox read the webhook as active, the disable committed next to it.
    await t.deps.db.webhook.update({ where: { id: webhook.id }, data: { status: 'disabled' } });
    const worker = testWorker(t);
    expect(await runFor(worker, webhook.id)).toMatchObject([{ status: 'failed', attempt: 0, error: 'webhook disabled' }]);
    expect(await runFor(worker, webhook.id)).toEqual([]);
    await worker.stop();
    expect(r.receipts).toHaveLength(0);
    const [delivery] = await deliveriesOf(operator, webhook.id);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 0, next_attempt_at: null });
  });
});

describe('the running worker', () => {
  it('wakes on the outbox notification and delivers within 100 ms, without waiting for its poll', async () => {
    const r = await receiver();
    const { project } = await subscribed(r.url, r);
    // A one-minute poll: only the NOTIFY wake-up can explain a delivery within milliseconds.
    const worker = testWorker(t, { pollIntervalMs: 60_000 });
    await worker.start();
    try {
      const latencies: number[] = [];
      for (let i = 0; i < 7; i++) {
        await emitKeyRotated(operator, project.keyId);
        // From the moment the event is committed (the API has answered) to the receiver holding the body; the
        // delivery may even arrive before the API's answer is read here.
        const written = performance.now();
        const receipts = await r.waitFor(i + 1, 5_000);
        latencies.push(Math.max(0, receipts[i]!.receivedAt - written));
      }
      latencies.sort((a, b) => a - b);
      expect(latencies[3]).toBeLessThan(100);
      expect(latencies[6]).toBeLessThan(1_000);
      expect(r.receipts.every((x) => x.verifyError === null)).toBe(true);
    } finally {
      await worker.stop();
    }
  });

  it('lets an attempt in flight finish before stop() resolves (graceful SIGTERM)', async () => {
    const r = await receiver(() => ({ status: 200, delayMs: 300 }));
    const { project, webhook } = await subscribed(r.url, r);
    const worker = testWorker(t, { pollIntervalMs: 60_000 });
    await worker.start();
    await emitKeyRotated(operator, project.keyId);
    await r.waitFor(1, 5_000);
    const [inFlight] = await deliveriesOf(operator, webhook.id);
    expect(inFlight).toMatchObject({ status: 'pending', attempts: 0 });
    await worker.stop();
    const [done] = await deliveriesOf(operator, webhook.id);
    expect(done).toMatchObject({ status: 'succeeded', attempts: 1, response_status: 200 });
  });
});
