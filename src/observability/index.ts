import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { ObservabilityConfig } from '../config/config.ts';
import type { InferenceOutcome } from '../domain/usage/outcome.ts';
import type { OutcomeSink } from '../domain/usage/ports.ts';
import { PROJECT_ROOT } from '../project-root.ts';
import type { HopObserver } from '../providers/router.ts';
import { setTraceIdSource } from './log-correlation.ts';
import { GatewayMetrics, type WebhookAttemptStatus } from './metrics.ts';
import { readScrape, type ScrapeSources } from './scrape.ts';
import type { Tracing } from './tracing.ts';

export type { GatewayMetrics } from './metrics.ts';

type Step = (req: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * Metrics and traces, built once by the composition root (app-deps.ts). Each piece is null when its configuration
 * leaves it off, and then costs nothing on the request path: no hook registered, no observer called.
 */
export interface Observability {
  /** package.json's version: the OpenAPI document's, the spans' service.version and GET /'s. */
  readonly version: string;
  readonly metrics: GatewayMetrics | null;
  readonly tracing: Tracing | null;
  /** For the provider router (RouterOptions.hops); undefined when neither metrics nor tracing is on. */
  readonly hops: HopObserver | undefined;
  /** The outcome sink the inference service is given: counts (and a span) around the real one. */
  observeOutcomes(sink: OutcomeSink): OutcomeSink;
  /** For the webhook delivery worker; undefined when metrics are off. */
  readonly webhookAttempt: ((o: { status: WebhookAttemptStatus }) => void) | undefined;
  /** A step of the auth hook (the rate limiter), in a span when tracing is on; the step itself otherwise. */
  step(name: string, fn: Step): Step;
  /** Where /metrics reads shared state (database, Redis, outcome writer) at scrape time. */
  scrapeFrom(sources: ScrapeSources): void;
  /** Sends the spans still buffered (tests, shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
}

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

export async function createObservability(cfg: ObservabilityConfig, log: Logger, opts: { redis: boolean }): Promise<Observability> {
  let sources: ScrapeSources | null = null;
  const metrics = cfg.metrics
    ? new GatewayMetrics(() => {
        if (!sources) throw new Error('metrics: no scrape sources');
        return readScrape(sources);
      }, opts)
    : null;
  const version = packageVersion();
  let tracing: Tracing | null = null;
  if (cfg.tracesEndpoint) {
    // Loaded only now: with tracing off the OpenTelemetry SDK is never imported.
    const { startTracing } = await import('./tracing.ts');
    tracing = startTracing(cfg, version);
    setTraceIdSource(() => tracing!.logIds());
    // Never the endpoint's credentials (OTEL_EXPORTER_OTLP_HEADERS): only where spans go.
    log.info({ endpoint: new URL(cfg.tracesEndpoint).origin, sample_percent: cfg.traceSamplePercent }, 'tracing: exporting spans over OTLP/HTTP');
  }

  let hops: HopObserver | undefined;
  if (metrics && tracing) {
    const t = tracing;
    hops = {
      start(route, stream) {
        const started = performance.now();
        const span = t.hop(route, stream);
        return (outcome, result) => {
          metrics.providerHop(route, outcome, (performance.now() - started) / 1000);
          span(outcome, result);
        };
      },
    };
  } else if (metrics) {
    hops = metrics.hops;
  } else if (tracing) {
    hops = { start: (route, stream) => tracing!.hop(route, stream) };
  }

  return {
    version,
    metrics,
    tracing,
    hops,
    observeOutcomes(sink) {
      if (!tracing) return metrics ? metrics.counting(sink) : sink;
      const t = tracing;
      return {
        record(o: InferenceOutcome) {
          metrics?.inference(o);
          return t.outcome(o, () => sink.record(o));
        },
      };
    },
    webhookAttempt: metrics ? (o) => metrics.webhookAttempt(o.status) : undefined,
    step: (name, fn) => (tracing ? tracing.step(name, fn) : fn),
    scrapeFrom(s) {
      sources = s;
    },
    flush: async () => {
      await tracing?.flush();
    },
    close: async () => {
      if (tracing) {
        setTraceIdSource(null);
        await tracing.close();
      }
    },
  };
}
