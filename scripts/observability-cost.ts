// What observability adds per inference request, in CPU time (process.cpuUsage): the metric records of one request
// (hop, outcome, HTTP counters, limiter decision) and, with tracing on, its five spans exported over OTLP/HTTP.
// Tracing needs a receiver: run one on 127.0.0.1:19777 that answers 200 (any OTLP collector), then
//   node --import tsx scripts/observability-cost.ts
import { createObservability } from '../src/observability/index.ts';
import pino from 'pino';
import { context, trace, ROOT_CONTEXT } from '@opentelemetry/api';

const log = pino({ level: 'silent' });
const route = { id: 'mock/mock-1', provider: { name: 'mock', kind: 'mock', region: 'local' }, model: { id: 'mock-1' } } as never;
const outcome = (i: number) => ({ requestId: `req_${i}`, projectId: `prj_${i % 20}`, keyId: 'key_1', model: 'mock-1', route: 'mock/mock-1', region: 'local', cacheHit: false, status: 'succeeded' as const, errorCode: null, promptTokens: 12, completionTokens: 7, costMicros: 3n, latencyMs: 2, createdAt: new Date(), eventId: 'evt_1', spend: null });
const sink = { record: async () => {} };
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };

async function run(name: string, cfg: Parameters<typeof createObservability>[0], n: number) {
  const obs = await createObservability(cfg, log, { redis: true });
  const sinkObs = obs.observeOutcomes(sink);
  const tracer = obs.tracing ? trace.getTracer('micro') : null;
  const once = async (i: number) => {
    // What a traced request makes besides the hop and outcome spans: the root, auth and rate-limit spans, in context.
    const root = tracer?.startSpan('POST /v1/inference', { attributes: { 'http.route': '/v1/inference', 'svc.request_id': `req_${i}` } });
    const auth = root ? tracer!.startSpan('svc.auth', {}, trace.setSpan(ROOT_CONTEXT, root)) : null;
    const rl = auth ? tracer!.startSpan('svc.rate_limit', {}, trace.setSpan(ROOT_CONTEXT, auth)) : null;
    rl?.end(); auth?.end();
    const body = async () => {
      const done = obs.hops?.start(route, false);
      done?.('ok', { content: 'x', finishReason: 'stop', usage: { promptTokens: 12, completionTokens: 7 } });
      await sinkObs.record(outcome(i));
      obs.metrics?.request('POST', '/v1/inference', 200, 0.002);
      obs.metrics?.limiterDecision('allowed');
    };
    if (root) await context.with(trace.setSpan(ROOT_CONTEXT, root), body); else await body();
    root?.setAttribute('http.response.status_code', 200); root?.end();
  };
  for (let i = 0; i < 20_000; i++) await once(i); // warm-up
  await obs.flush();
  const t0 = cpu();
  for (let i = 0; i < n; i++) await once(i);
  await obs.flush();
  const ms = cpu() - t0;
  console.log(`${name}: ${((ms * 1000) / n).toFixed(2)} µs CPU per inference request (${n} requests)`);
  await obs.close();
}
const base = { metrics: false, metricsToken: null, tracesEndpoint: null, serviceName: 'micro', traceSamplePercent: 100 };
const n = Number(process.env.N ?? 200_000);
for (let round = 0; round < 2; round++) {
  await run('nothing (SVC_METRICS=false, no tracing)', base, n);
  await run('metrics on, tracing off (the default)', { ...base, metrics: true }, n);
  await run('metrics + tracing (100% sampled, OTLP/HTTP JSON to a local sink)', { ...base, metrics: true, tracesEndpoint: 'http://127.0.0.1:19777/v1/traces' }, Math.round(n / 10));
}
process.exit(0);
