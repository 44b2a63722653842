import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/db/ids.ts';
import { ProviderRegistry } from '../../src/providers/router.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp, swapPiece } from '../helpers/app.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { gqlClient } from '../graphql/gql.ts';
import { user, writeProvidersFile } from '../inference/fixtures.ts';

/**
 * The request detail's recorded timings and trace id (GET /v1/usage/requests/{id}, GraphQL requestDetail): real
 * instants per step, one step per provider hop with its outcome, the caller's traceparent, zero retention, and
 * records written before timings were kept.
 */
let t: TestApp;
let api: Client;
let projectId: string;
let secret: string;
let primary: MockOpenAI;
let secondary: MockOpenAI;

interface Hop {
  route: string;
  model: string;
  start_ms: number;
  duration_ms: number;
  outcome: string;
  error: string | null;
}
interface Step {
  step: string;
  at_ms: number;
  offset_ms: number;
  duration_ms: number | null;
  status: string;
  detail: string;
}

beforeAll(async () => {
  [primary, secondary] = await Promise.all([startMockOpenAI(), startMockOpenAI()]);
  const provider = (name: string, url: string, price: number) => ({
    name,
    kind: 'openai',
    base_url: url,
    region: 'eu-west-1',
    timeout_ms: 5_000,
    models: [{ id: 'gpt-test', input_per_mtok: price, output_per_mtok: price }],
  });
  const file = writeProvidersFile({ providers: [provider('primary', primary.url, 1), provider('secondary', secondary.url, 2)] });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1', SVC_CIRCUIT_COOLDOWN_MS: '600000' } });
  const seeded = await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write', 'usage:read', 'governance:manage', 'inference:read'] });
  ({ projectId, secret } = seeded);
  api = client(t.app, secret);
}, 120_000);
afterAll(async () => {
  await t?.close();
  await Promise.all([primary?.close(), secondary?.close()]);
});
beforeEach(async () => {
  primary.reset();
  secondary.reset();
  // Fresh circuit breakers for each test.
  await t.deps.providers.close();
  swapPiece(t.deps, 'providers', new ProviderRegistry(t.config.providers, {
    clock: t.clock,
    log: t.deps.log,
    failureThreshold: t.config.circuitFailureThreshold,
    cooldownMs: t.config.circuitCooldownMs,
    routingTimeoutMs: t.config.routingTimeoutMs,
  }));
});

const infer = (headers: Record<string, string> = {}, body: Record<string, unknown> = {}) =>
  api.post('/v1/inference', { model: 'gpt-test', project_id: projectId, messages: user('timings'), ...body }, { headers });

async function detail(requestId: string) {
  const res = await api.get(`/v1/usage/requests/${requestId}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { trace_id: string | null; timings: { hops: Hop[]; [k: string]: unknown } | null; timeline: Step[]; content_retained: boolean };
}

const DETAIL = `query D($id: ID!) { requestDetail(requestId: $id) {
  traceId
  timings { authenticatedMs validatedMs admittedMs answeredMs totalMs hops { route model startMs durationMs outcome error } }
  timeline { step atMs offsetMs durationMs status detail }
} }`;

function expectOrdered(steps: Step[]) {
  for (let i = 1; i < steps.length; i++) {
    expect(steps[i]!.offset_ms, `${steps[i]!.step} after ${steps[i - 1]!.step}`).toBeGreaterThanOrEqual(steps[i - 1]!.offset_ms);
    expect(steps[i]!.at_ms).toBeGreaterThanOrEqual(steps[i - 1]!.at_ms);
  }
}

describe('recorded timings', () => {
  it('shows a fallback as two hops with their outcomes, in order, in REST and GraphQL', { timeout: 60_000 }, async () => {
    primary.set({ status: 502 });
    const res = await infer();
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.route).toBe('secondary/gpt-test');
    const d = await detail(res.body.request_id);
    expect(d.trace_id).toBeNull();
    const timings = d.timings!;
    expect(timings.hops.map((h) => [h.route, h.outcome, h.error])).toEqual([
      ['primary/gpt-test', 'error', 'http_502'],
      ['secondary/gpt-test', 'ok', null],
    ]);
    const [first, second] = timings.hops;
    // Start and end each rounded to 0.1 ms, the duration their difference: the sum is exact up to a float's last bit.
    expect(second!.start_ms).toBeGreaterThanOrEqual(first!.start_ms + first!.duration_ms - 1e-9);
    expect(first!.start_ms).toBeGreaterThanOrEqual(timings.admitted_ms as number);
    expect(timings.authenticated_ms as number).toBeGreaterThan(0);
    expect(timings.validated_ms as number).toBeGreaterThanOrEqual(timings.authenticated_ms as number);
    expect(timings.admitted_ms as number).toBeGreaterThanOrEqual(timings.validated_ms as number);
    expect(timings.answered_ms as number).toBeGreaterThanOrEqual(second!.start_ms + second!.duration_ms - 0.1);
    expect(timings.total_ms as number).toBeGreaterThanOrEqual(timings.answered_ms as number);

    expect(d.timeline.map((s) => `${s.step}:${s.status}`)).toEqual([
      'received:ok', 'authenticated:ok', 'validated:ok', 'limits:ok', 'cache:skipped', 'provider:failed', 'provider:ok', 'answered:ok', 'outcome:ok',
    ]);
    expectOrdered(d.timeline);
    const hops = d.timeline.filter((s) => s.step === 'provider');
    expect(hops[0]!.detail).toBe(`primary/gpt-test failed (http_502) after ${first!.duration_ms} ms; fell back to secondary/gpt-test.`);
    expect(hops[0]!.duration_ms).toBe(first!.duration_ms);
    expect(hops[1]!.detail).toMatch(/^Answered by secondary\/gpt-test \(eu-west-1\) in [\d.]+ ms\.$/);
    for (const s of d.timeline) expect(s.duration_ms).not.toBeNull();

    const gql = await gqlClient(t.app)(DETAIL, { id: res.body.request_id }, { key: secret });
    const g = gql.body.data.requestDetail;
    expect(g.traceId).toBeNull();
    expect(g.timings.hops).toEqual(timings.hops.map((h) => ({ route: h.route, model: h.model, startMs: h.start_ms, durationMs: h.duration_ms, outcome: h.outcome, error: h.error })));
    expect(g.timings.totalMs).toBe(timings.total_ms);
    expect(g.timeline).toEqual(d.timeline.map((s) => ({ step: s.step, atMs: s.at_ms, offsetMs: s.offset_ms, durationMs: s.duration_ms, status: s.status, detail: s.detail })));
  });

  it('records a route skipped for its open circuit as a hop', { timeout: 60_000 }, async () => {
    primary.set({ status: 503 });
    expect((await infer()).status).toBe(200); // opens primary's circuit (SVC_CIRCUIT_FAILURES=1)
    const res = await infer();
    expect(res.status).toBe(200);
    const d = await detail(res.body.request_id);
    expect(d.timings!.hops.map((h) => [h.route, h.outcome, h.duration_ms])).toEqual([
      ['primary/gpt-test', 'circuit_open', 0],
      ['secondary/gpt-test', 'ok', expect.any(Number)],
    ]);
    expect(d.timeline.filter((s) => s.step === 'provider').map((s) => s.status)).toEqual(['skipped', 'ok']);
    expect(primary.calls).toBe(1);
  });

  it("keeps the caller's traceparent trace id; an invalid one is no trace id", { timeout: 60_000 }, async () => {
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const res = await infer({ traceparent: `00-${trace}-00f067aa0ba902b7-01` });
    expect(res.status).toBe(200);
    expect((await detail(res.body.request_id)).trace_id).toBe(trace);
    const gql = await gqlClient(t.app)(DETAIL, { id: res.body.request_id }, { key: secret });
    expect(gql.body.data.requestDetail.traceId).toBe(trace);
    for (const bad of ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'garbage']) {
      const r = await infer({ traceparent: bad });
      expect((await detail(r.body.request_id)).trace_id, bad).toBeNull();
    }
  });

  it('times a stream to its last part (chat completions)', { timeout: 60_000 }, async () => {
    secondary.set({ chunkDelayMs: 30, chunks: ['a', 'b', 'c', 'd'] });
    primary.set({ status: 500 });
    const res = await api.post('/v1/chat/completions', { model: 'gpt-test', messages: user('stream'), stream: true });
    expect(res.status).toBe(200);
    const requestId = res.headers['x-svc-request-id'] as string;
    const d = await detail(requestId);
    const hops = d.timings!.hops;
    expect(hops.map((h) => h.outcome)).toEqual(['error', 'ok']);
    // The hop ends when the stream is accepted; the answer is complete after its last piece.
    expect(d.timings!.answered_ms as number).toBeGreaterThanOrEqual(hops[1]!.start_ms + hops[1]!.duration_ms + 60);
    expectOrdered(d.timeline);
  });

  it('times a cache hit: no hop, answered from the cache', { timeout: 60_000 }, async () => {
    const body = { messages: user('cache me'), cache: 60 };
    expect((await infer({}, body)).status).toBe(200);
    const hit = await infer({}, body);
    expect(hit.body.cache_hit).toBe(true);
    const d = await detail(hit.body.request_id);
    expect(d.timings!.hops).toEqual([]);
    expect(d.timings!.answered_ms).not.toBeNull();
    expect(d.timeline.map((s) => `${s.step}:${s.status}`)).toEqual([
      'received:ok', 'authenticated:ok', 'validated:ok', 'limits:ok', 'cache:ok', 'answered:ok', 'outcome:ok',
    ]);
  });

  it('times a failure: every hop failed, no answer', { timeout: 60_000 }, async () => {
    primary.set({ status: 500 });
    secondary.set({ status: 500 });
    const res = await infer();
    expect(res.status).toBe(503);
    const d = await detail(res.body.error.request_id);
    expect(d.timings!.hops.map((h) => h.error)).toEqual(['http_500', 'http_500']);
    expect(d.timings!.answered_ms).toBeNull();
    expect(d.timeline.at(-1)).toMatchObject({ step: 'outcome', status: 'failed' });
    expect(d.timeline.filter((s) => s.step === 'provider').at(-1)!.detail).toMatch(/^secondary\/gpt-test failed \(http_500\) after [\d.]+ ms\.$/);
  });

  it('times a refusal at the limits: not admitted, no hop', { timeout: 60_000 }, async () => {
    const tight = await seedProject(client(t.app), { scopes: ['inference:write', 'usage:read'], budgetUsd: 0 });
    const res = await client(t.app, tight.secret).post('/v1/inference', { model: 'gpt-test', project_id: tight.projectId, messages: user('over budget') });
    expect(res.status).toBe(429);
    const d = (await client(t.app, tight.secret).get(`/v1/usage/requests/${res.body.error.request_id}`)).body;
    expect(d.timings).toMatchObject({ admitted_ms: null, answered_ms: null, hops: [] });
    expect(d.timeline.map((s: Step) => `${s.step}:${s.status}`)).toEqual(['received:ok', 'authenticated:ok', 'validated:ok', 'limits:failed', 'outcome:failed']);
    expect(res.body.error.code).toBe('budget_exceeded');
    expect(d.timeline[3].detail).toBe('Refused: budget_exceeded.');
  });

  it('keeps the timings of a zero-retention project (and no content)', { timeout: 60_000 }, async () => {
    const zero = await seedProject(client(t.app), { scopes: ['inference:write', 'usage:read', 'governance:manage'] });
    expect((await client(t.app, zero.secret).put(`/v1/projects/${zero.projectId}/retention`, { mode: 'zero' })).status).toBe(200);
    const res = await client(t.app, zero.secret).post('/v1/inference', { model: 'gpt-test', project_id: zero.projectId, messages: user('secret') }, {
      headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
    });
    expect(res.status).toBe(200);
    const d = (await client(t.app, zero.secret).get(`/v1/usage/requests/${res.body.request_id}`)).body;
    expect(d.content_retained).toBe(false);
    expect(d.trace_id).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(d.timings.hops.map((h: Hop) => h.outcome)).toEqual(['ok']);
    expect(JSON.stringify(d)).not.toContain('secret');
  });

  it('keeps the steps in order when the rounded hop end passes the rounded answer (times are kept to 0.1 ms)', { timeout: 60_000 }, async () => {
    // What a suite run stored: the hop started at 18.2 ms and took 0.1 ms (18.3), the answer rounded to 18.2 ms.
    const at = new Date(t.clock.now());
    const requestId = newId('req', at.getTime());
    const timings = {
      authenticatedMs: 1.1,
      validatedMs: 2.4,
      admittedMs: 3,
      hops: [{ route: 'secondary/gpt-test', model: 'gpt-test', startMs: 18.2, durationMs: 0.1, outcome: 'ok', error: null }],
      answeredMs: 18.2,
      totalMs: 18.9,
    };
    await t.deps.db.usageRecord.create({
      data: { requestId, projectId, keyId: 'key_old', model: 'gpt-test', route: 'secondary/gpt-test', region: 'eu-west-1', status: 'succeeded', latencyMs: 19, createdAt: at, timings },
    });
    const d = await detail(requestId);
    expect(d.timeline.map((s) => s.step)).toEqual(['received', 'authenticated', 'validated', 'limits', 'cache', 'provider', 'answered', 'outcome']);
    expectOrdered(d.timeline);
    expect(d.timeline.slice(-2).map((s) => [s.offset_ms, s.duration_ms])).toEqual([[18.2, 0], [18.2, 0.7]]);
  });

  it('still renders a record written without timings (derived timeline, durations null)', { timeout: 60_000 }, async () => {
    const at = new Date(t.clock.now());
    const requestId = newId('req', at.getTime());
    await t.deps.db.usageRecord.create({
      data: { requestId, projectId, keyId: 'key_old', model: 'gpt-test', route: 'primary/gpt-test', region: 'eu-west-1', status: 'succeeded', latencyMs: 12, createdAt: at },
    });
    const d = await detail(requestId);
    expect(d.trace_id).toBeNull();
    expect(d.timings).toBeNull();
    expect(d.timeline.map((s) => s.step)).toEqual(['received', 'authenticated', 'limits', 'cache', 'provider', 'outcome']);
    expect(d.timeline.every((s) => s.duration_ms === null)).toBe(true);
    expect(d.timeline.at(-1)!.offset_ms).toBe(12);
    const gql = await gqlClient(t.app)(DETAIL, { id: requestId }, { key: secret });
    expect(gql.body.data.requestDetail).toMatchObject({ traceId: null, timings: null });
  });
});
