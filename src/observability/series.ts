import type { Registry } from 'prom-client';

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
