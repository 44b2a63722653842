import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { InferenceOutcome } from '../domain/usage/outcome.ts';
import type { HopOutcome, Route } from '../providers/router.ts';
import { MICROS_PER_USD } from '../kernel/money.ts';
import { CounterFamily, HistogramFamily, LATENCY_BUCKETS_S } from './series.ts';
import type { ScrapeReadings } from './scrape.ts';

/** What a webhook attempt became, as the delivery worker reports it. */
export type WebhookAttemptStatus = 'succeeded' | 'retrying' | 'failed' | 'pending';

/** The process-wide metrics (Node's CPU, memory, event loop, GC): registered once, whatever the number of apps. */
let processRegistry: Registry | null = null;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

const K = '\u0000';

/**
 * Every metric of /metrics (README "Metrics and traces" lists them). The request path only calls the record methods
 * below: counts in plain numbers (series.ts); gauges of shared state (budgets, backlogs, health) are read when
 * /metrics is scraped (scrape.ts), never per request.
 */
export class GatewayMetrics {
  readonly registry = new Registry();

  readonly httpRequests = new CounterFamily('svc_http_requests_total', 'HTTP requests answered, by route template and status.', ['method', 'route', 'status']).register(this.registry);
  readonly httpDuration = new HistogramFamily(
    'svc_http_request_duration_seconds',
    'Time from routing to the last byte of the answer, by route template.',
    ['method', 'route'],
    LATENCY_BUCKETS_S,
  ).register(this.registry);

  readonly inferences = new CounterFamily('svc_inference_requests_total', 'Finished inferences (one usage record each), by project, model and status.', ['project', 'model', 'status']).register(this.registry);
  readonly tokens = new CounterFamily('svc_inference_tokens_total', 'Tokens of finished inferences, by project, model and type (input, output).', ['project', 'model', 'type']).register(this.registry);
  readonly cost = new CounterFamily('svc_inference_cost_usd_total', 'Cost charged for finished inferences, USD, by project and model.', ['project', 'model']).register(this.registry);
  readonly cacheHits = new CounterFamily('svc_inference_cache_hits_total', 'Inferences answered from the response cache, by project and model.', ['project', 'model']).register(this.registry);
  readonly inferenceDuration = new HistogramFamily(
    'svc_inference_duration_seconds',
    'Whole inference as the gateway measures it (admission, provider hops, accounting), by model and status.',
    ['model', 'status'],
    LATENCY_BUCKETS_S,
  ).register(this.registry);
  readonly providerDuration = new HistogramFamily(
    'svc_provider_request_duration_seconds',
    'Provider time: each hop to a provider (streams: until the provider accepted it), by provider, model and outcome.',
    ['provider', 'model', 'outcome'],
    LATENCY_BUCKETS_S,
  ).register(this.registry);
  readonly cacheLookups = new CounterFamily('svc_cache_lookups_total', 'Response cache lookups of inferences that asked for caching, by result (hit, miss, unavailable).', ['result']).register(this.registry);
  readonly limiter = new CounterFamily(
    'svc_rate_limit_decisions_total',
    'Authenticated requests by the limits\' decision: allowed, rate_limited (429 rate_limit_exceeded) or budget_exceeded (429).',
    ['decision'],
  ).register(this.registry);
  readonly webhookAttempts = new CounterFamily('svc_webhook_attempts_total', 'Webhook delivery attempts made by this process, by the delivery status they left (succeeded, retrying, failed).', ['status']).register(this.registry);

  /** The latest scrape-time readings, which the gauges below report. */
  private readings: ScrapeReadings | null = null;

  constructor(
    private readonly read: () => Promise<ScrapeReadings>,
    opts: { redis: boolean },
  ) {
    const gauge = (name: string, help: string, labelNames: string[], values: (r: ScrapeReadings) => [Record<string, string>, number][]) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers: [this.registry],
        collect: function (this: Gauge) {
          this.reset();
          const r = self.readings;
          if (!r) return;
          for (const [labels, v] of values(r)) this.set(labels, v);
        },
      });
    const self = this;
    gauge('svc_database_up', 'Whether PostgreSQL (or the embedded PGlite) answered SELECT 1 within 1 s at the scrape.', [], (r) => [[{}, r.databaseUp ? 1 : 0]]);
    gauge('svc_database_ping_seconds', 'How long SELECT 1 took at the scrape.', [], (r) => (r.databasePingS === null ? [] : [[{}, r.databasePingS]]));
    if (opts.redis) {
      gauge('svc_redis_up', 'Whether Redis answers (1) or is down (0), as the shared client\'s health state says (README "When Redis fails").', [], (r) => [[{}, r.redisUp ? 1 : 0]]);
      gauge('svc_outcome_stream_length', 'Usage outcomes in the Redis stream not yet written to PostgreSQL (all replicas).', [], (r) =>
        r.outcomeStream === null ? [] : [[{}, r.outcomeStream.length]],
      );
      gauge('svc_outcome_stream_pending', 'Stream entries read by a consumer but not yet written (all replicas).', [], (r) => (r.outcomeStream === null ? [] : [[{}, r.outcomeStream.pending]]));
    }
    gauge('svc_budget_usd', 'Monthly budget of each project that has one, USD.', ['project'], (r) => r.budgets.map((b) => [{ project: b.projectId }, b.budgetUsd]));
    gauge('svc_budget_spent_usd', 'Spend of the current month (UTC) of each project that has a budget, USD, as written by the usage batches.', ['project'], (r) =>
      r.budgets.map((b) => [{ project: b.projectId }, b.spentUsd]),
    );
    gauge('svc_budget_used_ratio', 'Spent / budget of the current month for each project that has a budget (1 = exhausted).', ['project'], (r) =>
      r.budgets.map((b) => [{ project: b.projectId }, b.budgetUsd > 0 ? b.spentUsd / b.budgetUsd : 1]),
    );
    gauge(
      'svc_customer_spent_usd',
      'Spend of the current month (UTC) of the end customers with the highest spend, USD: at most SVC_METRICS_TOP_CUSTOMERS series (default 0: none).',
      ['project', 'customer'],
      (r) => r.customers.map((c) => [{ project: c.projectId, customer: c.customer }, c.spentUsd]),
    );
    gauge('svc_webhook_backlog', 'Webhook deliveries not finished yet (all replicas), by status (pending, retrying).', ['status'], (r) =>
      Object.entries(r.webhookBacklog).map(([status, n]) => [{ status }, n]),
    );
    gauge('svc_outcome_lag_seconds', 'From accepting an outcome to its commit in PostgreSQL, over the last 2,000 this process wrote (quantile 0.5, 0.99, 1).', ['quantile'], (r) => [
      [{ quantile: '0.5' }, r.outcomes.lagMs.p50 / 1000],
      [{ quantile: '0.99' }, r.outcomes.lagMs.p99 / 1000],
      [{ quantile: '1' }, r.outcomes.lagMs.max / 1000],
    ]);
    gauge('svc_outcomes', 'Outcomes of this process since it started, by what happened to them: accepted, persisted (by its batches), direct (written on the request path), lost.', ['state'], (r) => [
      [{ state: 'accepted' }, r.outcomes.accepted],
      [{ state: 'persisted' }, r.outcomes.persisted],
      [{ state: 'direct' }, r.outcomes.direct],
      [{ state: 'lost' }, r.outcomes.lost],
    ]);
  }

  /** The text exposition: shared state read once, then every family rendered. */
  async render(): Promise<{ contentType: string; body: string }> {
    this.readings = await this.read();
    const [own, proc] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return { contentType: this.registry.contentType, body: `${own}\n${proc}` };
  }

  /** One answered HTTP request; `route` is the route template (never the raw URL: bounded label values). */
  request(method: string, route: string, status: number, seconds: number): void {
    const s = String(status);
    this.httpRequests.add(method + K + route + K + s, [method, route, s]);
    this.httpDuration.observe(method + K + route, [method, route], seconds);
  }

  /** One finished inference, as handed to the outcome writer. */
  inference(o: InferenceOutcome): void {
    const pm = o.projectId + K + o.model;
    this.inferences.add(pm + K + o.status, [o.projectId, o.model, o.status]);
    if (o.promptTokens) this.tokens.add(pm + K + 'input', [o.projectId, o.model, 'input'], o.promptTokens);
    if (o.completionTokens) this.tokens.add(pm + K + 'output', [o.projectId, o.model, 'output'], o.completionTokens);
    if (o.costMicros !== 0n) this.cost.add(pm, [o.projectId, o.model], Number(o.costMicros) / MICROS_PER_USD);
    if (o.cacheHit) this.cacheHits.add(pm, [o.projectId, o.model]);
    this.inferenceDuration.observe(o.model + K + o.status, [o.model, o.status], o.latencyMs / 1000);
  }

  providerHop(route: Route, outcome: HopOutcome, seconds: number): void {
    const provider = route.provider.name;
    const model = route.model.id;
    this.providerDuration.observe(provider + K + model + K + outcome, [provider, model, outcome], seconds);
  }

  cacheLookup(result: string): void {
    this.cacheLookups.add(result, [result]);
  }

  limiterDecision(decision: 'allowed' | 'rate_limited' | 'budget_exceeded'): void {
    this.limiter.add(decision, [decision]);
  }

  webhookAttempt(status: WebhookAttemptStatus): void {
    this.webhookAttempts.add(status, [status]);
  }
}
