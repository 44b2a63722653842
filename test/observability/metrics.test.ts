import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-root.ts';
import { buildTestApp, client, createTestDatabase, MASTER_KEY, seedProject, type Client, type Seeded, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { user, writeProvidersFile } from '../inference/fixtures.ts';

/**
 * /metrics as Prometheus reads it: the text exposition parsed by a Prometheus text-format parser after real requests,
 * showing their counts, tokens, cost and latencies; protected by its own token (or the operator key).
 */
const METRICS_TOKEN = 'prometheus-scrape-token-0123456789';

let db: TestDatabase;
let t: TestApp;
let operator: Client;
let seeded: Seeded;
let api: Client;

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [{ name: 'priced', kind: 'mock', region: 'local', models: [{ id: 'mock-priced', input_per_mtok: 1, output_per_mtok: 2 }] }],
  });
  db = await createTestDatabase();
  t = await buildTestApp({ database: db, env: { SVC_PROVIDERS_FILE: file, SVC_METRICS_TOKEN: METRICS_TOKEN } });
  operator = client(t.app);
  seeded = await seedProject(operator, { budgetUsd: 50 });
  api = client(t.app, seeded.secret);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

type Scraped = Map<string, ParsedFamily> & { text: string };

async function scrape(): Promise<Scraped> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return Object.assign(new Map(parsePrometheusTextFormat(res.body).map((f) => [f.name, f])), { text: res.body });
}

/**
 * One series of a histogram. parse-prometheus-text-format folds a histogram's series into one and keeps only an
 * unlabelled one, so the series' own lines are handed to it with their labels (but `le`) taken off.
 */
function histogram(m: Scraped, name: string, labels: Record<string, string>) {
  const set = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const lines = m.text
    .split('\n')
    .filter((l) => l.startsWith(`${name}_`) && set.every((s) => l.includes(s)))
    .map((l) => l.replace(/\{[^}]*\}/, (ls) => (/le="([^"]+)"/.test(ls) ? `{le="${/le="([^"]+)"/.exec(ls)![1]}"}` : '')));
  const [family] = parsePrometheusTextFormat(`# TYPE ${name} histogram\n${lines.join('\n')}\n`);
  return family!.metrics[0]!;
}

const series = (f: ParsedFamily | undefined, labels: Record<string, string>) =>
  f?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
const valueOf = (f: ParsedFamily | undefined, labels: Record<string, string> = {}) => Number(series(f, labels)?.value ?? NaN);

describe('GET /metrics', () => {
  it('counts inferences, their tokens and cost by project and model, and their latencies', async () => {
    // Tracing is off here (no OTLP endpoint): the hop observer only counts.
    expect(t.deps.observability.tracing).toBeNull();
    const before = await scrape();
    const startCount = valueOf(before.get('svc_inference_requests_total'), { project: seeded.projectId, model: 'mock-priced', status: 'succeeded' });
    expect(Number.isNaN(startCount)).toBe(true); // no inference yet in this project

    let prompt = 0;
    let completion = 0;
    let cost = 0;
    for (const text of ['one', 'two two', 'three three three']) {
      const res = await api.post('/v1/inference', { model: 'mock-priced', project_id: seeded.projectId, messages: user(text) });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      prompt += res.body.usage.prompt_tokens;
      completion += res.body.usage.completion_tokens;
      cost += res.body.cost_usd;
    }
    const refused = await api.post('/v1/inference', { model: 'mock-priced', project_id: seeded.projectId, messages: user('x'), max_tokens: 0 });
    expect(refused.status).toBe(400);

    const m = await scrape();
    const pm = { project: seeded.projectId, model: 'mock-priced' };
    expect(m.get('svc_inference_requests_total')!.type).toBe('COUNTER');
    expect(valueOf(m.get('svc_inference_requests_total'), { ...pm, status: 'succeeded' })).toBe(3);
    expect(valueOf(m.get('svc_inference_tokens_total'), { ...pm, type: 'input' })).toBe(prompt);
    expect(valueOf(m.get('svc_inference_tokens_total'), { ...pm, type: 'output' })).toBe(completion);
    expect(cost).toBeGreaterThan(0);
    expect(valueOf(m.get('svc_inference_cost_usd_total'), pm)).toBeCloseTo(cost, 9);

    // The whole inference and the provider's part of it, apart.
    const total = histogram(m, 'svc_inference_duration_seconds', { model: 'mock-priced', status: 'succeeded' });
    expect(m.get('svc_inference_duration_seconds')!.type).toBe('HISTOGRAM');
    expect(Number(total.count)).toBe(3);
    expect(Number(total.buckets!['+Inf'])).toBe(3);
    const hops = histogram(m, 'svc_provider_request_duration_seconds', { provider: 'priced', model: 'mock-priced', outcome: 'ok' });
    expect(Number(hops.count)).toBe(3);
    expect(Number(hops.sum)).toBeLessThanOrEqual(Number(total.sum) + 0.003);

    // Requests by route template and status (the 400 too), never by raw URL.
    const http = m.get('svc_http_requests_total');
    expect(valueOf(http, { method: 'POST', route: '/v1/inference', status: '200' })).toBe(3);
    expect(valueOf(http, { method: 'POST', route: '/v1/inference', status: '400' })).toBe(1);
    expect(http!.metrics.some((s) => s.labels?.route?.includes(seeded.projectId))).toBe(false);
    expect(valueOf(m.get('svc_rate_limit_decisions_total'), { decision: 'allowed' })).toBeGreaterThanOrEqual(4);
  });

  it('counts cache hits, lookups and the limits\' refusals', async () => {
    const body = { model: 'mock-priced', project_id: seeded.projectId, messages: user('cache me'), cache: 60 };
    expect((await api.post('/v1/inference', body)).headers['x-svc-cache']).toBe('miss');
    expect((await api.post('/v1/inference', body)).headers['x-svc-cache']).toBe('hit');
    const tight = await seedProject(operator, { limits: { requests_per_minute: 1, tokens_per_minute: 100_000, burst: 0 } });
    const limited = client(t.app, tight.secret);
    await limited.post('/v1/inference', { model: 'mock-priced', project_id: tight.projectId, messages: user('a') });
    expectError(await limited.post('/v1/inference', { model: 'mock-priced', project_id: tight.projectId, messages: user('b') }), 429, 'rate_limit_exceeded');

    const m = await scrape();
    expect(valueOf(m.get('svc_inference_cache_hits_total'), { project: seeded.projectId, model: 'mock-priced' })).toBe(1);
    expect(valueOf(m.get('svc_cache_lookups_total'), { result: 'hit' })).toBe(1);
    expect(valueOf(m.get('svc_cache_lookups_total'), { result: 'miss' })).toBe(1);
    expect(valueOf(m.get('svc_rate_limit_decisions_total'), { decision: 'rate_limited' })).toBe(1);
  });

  it('reads budgets, backlogs and health at scrape time', async () => {
    await t.deps.outcomes.flush();
    // Each reading gives up after 1 s (then it reads as down or empty): on a machine that busy, the next scrape reads it.
    let m = await scrape();
    for (let i = 0; i < 10 && !(valueOf(m.get('svc_budget_spent_usd'), { project: seeded.projectId }) > 0 && valueOf(m.get('svc_database_up')) === 1); i++) {
      m = await scrape();
    }
    expect(valueOf(m.get('svc_budget_usd'), { project: seeded.projectId })).toBe(50);
    const spent = valueOf(m.get('svc_budget_spent_usd'), { project: seeded.projectId });
    expect(spent).toBeGreaterThan(0);
    expect(valueOf(m.get('svc_budget_used_ratio'), { project: seeded.projectId })).toBeCloseTo(spent / 50, 9);
    expect(valueOf(m.get('svc_database_up'))).toBe(1);
    expect(valueOf(m.get('svc_webhook_backlog'), { status: 'pending' })).toBe(0);
    expect(valueOf(m.get('svc_outcomes'), { state: 'accepted' })).toBeGreaterThanOrEqual(6);
    expect(m.get('svc_outcome_lag_seconds')!.metrics).toHaveLength(3);
    if (t.deps.redis) {
      expect(valueOf(m.get('svc_redis_up'))).toBe(1);
      expect(valueOf(m.get('svc_outcome_stream_length'))).toBeGreaterThanOrEqual(0);
    } else {
      expect(m.has('svc_redis_up')).toBe(false);
    }
    // Node's own (CPU, memory, event loop).
    expect(valueOf(m.get('process_resident_memory_bytes'))).toBeGreaterThan(0);
  });

  it('answers only its own token or the operator key (401 invalid_api_key otherwise)', async () => {
    for (const authorization of [undefined, `Bearer ${seeded.secret}`, `Bearer ${METRICS_TOKEN}x`, METRICS_TOKEN]) {
      const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });
      expectError({ status: res.statusCode, headers: res.headers, body: res.json() }, 401, 'invalid_api_key');
    }
    const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${MASTER_KEY}` } });
    expect(res.statusCode).toBe(200);
  });
});

describe('the Grafana dashboard (docs/grafana-dashboard.json)', () => {
  it('queries only metrics that /metrics exposes', async () => {
    const dashboard = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'docs', 'grafana-dashboard.json'), 'utf8')) as {
      panels: { targets?: { expr: string }[] }[];
    };
    const exprs = dashboard.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr);
    expect(exprs.length).toBeGreaterThan(20);
    const used = new Set(exprs.flatMap((e) => e.match(/\b(?:svc|process|nodejs)_[a-z0-9_]+/g) ?? []).map((n) => n.replace(/_(bucket|sum|count)$/, '')));
    const exposed = await scrape();
    expect([...used].filter((name) => !exposed.has(name))).toEqual(t.deps.redis ? [] : ['svc_redis_up', 'svc_outcome_stream_length', 'svc_outcome_stream_pending']);
  });
});

describe('SVC_METRICS=false', () => {
  it('registers no instrument: /metrics is 404 not_found', async () => {
    const off = await buildTestApp({ database: db, env: { SVC_METRICS: 'false' } });
    try {
      expect(off.deps.observability.metrics).toBeNull();
      expect(off.deps.observability.hops).toBeUndefined();
      const res = await off.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${MASTER_KEY}` } });
      expectError({ status: res.statusCode, headers: res.headers, body: res.json() }, 404, 'not_found');
    } finally {
      await off.close();
    }
  });
});
