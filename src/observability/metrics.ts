import type { FastifyInstance, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { InferenceOutcome } from '../domain/usage/outcome.ts';
import type { OutcomeSink } from '../domain/usage/ports.ts';
import type { HopObserver, HopOutcome, Route } from '../providers/router.ts';
import { MICROS_PER_USD } from '../kernel/money.ts';
import type { ScrapeReadings } from './scrape.ts';

// ---- the series: what the request path counts in ----

/**
 * Counters and histograms for the request path: a Map lookup and a few number additions per observation, no label
 * validation, no hashing of label objects, no await. prom-client reads them only when /metrics is scraped (each family
 * is a collector object registered on the registry), so the request path never touches prom-client itself.
 *
 * Label sets are bounded: past MAX_SERIES distinct sets, further ones are counted under one set whose label values are
 * all "other" (a flood of new projects cannot grow memory or the scrape without bound).
 */
export const MAX_SERIES = 5_000;
const OTHER = 'other';

type Labels = Record<string, string>;
/** One line of the exposition, as prom-client's registry renders it. */
type Value = { metricName?: string; labels: Labels; value: number };

abstract class Family<E extends { labels: Labels }> {
  protected readonly series = new Map<string, E>();

  constructor(
    readonly name: string,
    readonly help: string,
    protected readonly labelNames: readonly string[],
  ) {}

  /** The series for `key` (the label values joined), made on first use from `values` (in labelNames order). */
  protected entry(key: string, values: readonly string[]): E {
    let e = this.series.get(key);
    if (e) return e;
    if (this.series.size >= MAX_SERIES) {
      const other = this.labelNames.map(() => OTHER);
      key = other.join('\u0000');
      e = this.series.get(key);
      if (e) return e;
      values = other;
    }
    const labels: Labels = {};
    this.labelNames.forEach((n, i) => (labels[n] = values[i]!));
    e = this.make(labels);
    this.series.set(key, e);
    return e;
  }

  protected abstract make(labels: Labels): E;
  protected abstract values(): Value[];
  protected abstract readonly type: 'counter' | 'histogram';

  register(registry: Registry): this {
    const self = this;
    registry.registerMetric({
      name: this.name,
      help: this.help,
      // What the registry calls on scrape (and for merges); nothing else of prom-client's Metric API is used.
      get: async () => ({
        name: self.name,
        help: self.help,
        type: self.type,
        aggregator: 'sum',
        values: self.values(),
      }),
      reset: () => self.series.clear(),
    } as never);
    return this;
  }
}

interface CounterEntry {
  labels: Labels;
  value: number;
}

export class CounterFamily extends Family<CounterEntry> {
  protected readonly type = 'counter' as const;

  /** Adds `n` to the series of these label values (`key` must be their join, as the caller builds it once). */
  add(key: string, values: readonly string[], n = 1): void {
    this.entry(key, values).value += n;
  }

  /** Tests and scrape-time collectors: the current value of one series. */
  get(values: readonly string[]): number {
    return this.series.get(values.join('\u0000'))?.value ?? 0;
  }

  protected make(labels: Labels): CounterEntry {
    return { labels, value: 0 };
  }

  protected values(): Value[] {
    return [...this.series.values()].map((e) => ({ labels: e.labels, value: e.value }));
  }
}

interface HistogramEntry {
  labels: Labels;
  /** counts[i]: observations in (bounds[i-1], bounds[i]]; the last slot is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export class HistogramFamily extends Family<HistogramEntry> {
  protected readonly type = 'histogram' as const;
  private readonly bounds: Float64Array;

  constructor(name: string, help: string, labelNames: readonly string[], bounds: readonly number[]) {
    super(name, help, labelNames);
    this.bounds = Float64Array.from(bounds);
  }

  observe(key: string, values: readonly string[], v: number): void {
    const e = this.entry(key, values);
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    e.counts[i]!++;
    e.sum += v;
    e.count++;
  }

  /** Tests: how many observations one series has. */
  countOf(values: readonly string[]): number {
    return this.series.get(values.join('\u0000'))?.count ?? 0;
  }

  protected make(labels: Labels): HistogramEntry {
    return { labels, counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
  }

  protected values(): Value[] {
    const out: Value[] = [];
    const name = this.name;
    for (const e of this.series.values()) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += e.counts[i]!;
        out.push({ metricName: `${name}_bucket`, labels: { ...e.labels, le: String(le) }, value: cumulative });
      });
      out.push({ metricName: `${name}_bucket`, labels: { ...e.labels, le: '+Inf' }, value: e.count });
      out.push({ metricName: `${name}_sum`, labels: e.labels, value: e.sum });
      out.push({ metricName: `${name}_count`, labels: e.labels, value: e.count });
    }
    return out;
  }
}

/** Seconds; from 1 ms to 60 s (the routing timeout's range). */
export const LATENCY_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

// ---- the metrics: every metric of /metrics ----

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
 * below: counts in plain numbers (the series above); gauges of shared state (budgets, backlogs, health) are read when
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

  // ---- where the request path counts (observability/index.ts hands these out when tracing is off) ----

  /** The provider router's hop observer (RouterOptions.hops): each hop's time, by its outcome. */
  readonly hops: HopObserver = {
    start: (route) => {
      const started = performance.now();
      return (outcome) => this.providerHop(route, outcome, (performance.now() - started) / 1000);
    },
  };

  /** The outcome sink the inference service is given: counts each outcome, then hands it to the real sink. */
  counting(sink: OutcomeSink): OutcomeSink {
    return {
      record: (o) => {
        this.inference(o);
        return sink.record(o);
      },
    };
  }

  /**
   * fastify's counting hooks: one onResponse per request (a Map lookup and a few additions, no await), plus onError,
   * which only errors reach, to tell the limits' refusals apart.
   */
  registerHooks(app: FastifyInstance): void {
    app.addHook('onError', (req, _reply, error, done) => {
      const code = (error as { code?: unknown }).code;
      if (code === 'rate_limit_exceeded') (req as Decided)[LIMIT_DECISION] = 'rate_limited';
      else if (code === 'budget_exceeded') (req as Decided)[LIMIT_DECISION] = 'budget_exceeded';
      done();
    });
    app.addHook('onResponse', (req, reply, done) => {
      this.request(req.method, req.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
      // Every authenticated request passed through the limits (CONTRACT §7); the identity hook set its Ctx.
      if (req.ctx) this.limiterDecision((req as Decided)[LIMIT_DECISION] ?? 'allowed');
      const cache = reply.getHeader('x-svc-cache');
      if (cache !== undefined) this.cacheLookup(String(cache));
      done();
    });
  }
}

const LIMIT_DECISION = Symbol('svc.limit-decision');
type Decided = FastifyRequest & { [LIMIT_DECISION]?: 'rate_limited' | 'budget_exceeded' };
