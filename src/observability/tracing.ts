/**
 * OpenTelemetry traces (README "Metrics and traces"). Loaded only when an OTLP endpoint is configured
 * (observability/index.ts imports this module dynamically): with tracing off, no SDK module is loaded, no hook below is
 * registered and no span object is made.
 *
 * One trace per request: a SERVER span from routing to the last byte (a caller's `traceparent` is followed), `svc.auth`
 * (key lookup, scope check) with `svc.rate_limit` inside it, one CLIENT span per provider hop with the GenAI
 * semantic-convention attributes, and `svc.outcome.write` (the hand-off of the usage record to the outcome writer).
 * Spans leave in batches over OTLP/HTTP (JSON) from a background timer.
 */
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ObservabilityConfig } from '../config/config.ts';
import type { InferenceOutcome } from '../domain/usage/outcome.ts';
import { MICROS_PER_USD } from '../kernel/money.ts';
import type { HopOutcome, Route } from '../providers/router.ts';
import type { Completion } from '../providers/types.ts';
import { actionOf } from '../api/hooks/auth.ts';

export interface Tracing {
  /** The request's spans; registered before every other hook of the app. */
  register(app: FastifyInstance): void;
  /** Wraps one step of the auth hook (the rate limiter) in a span under `svc.auth`. */
  step(name: string, fn: (req: FastifyRequest, reply: FastifyReply) => Promise<void>): (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
  hop(route: Route, stream: boolean): (outcome: HopOutcome, result: unknown) => void;
  outcome(o: InferenceOutcome, write: () => Promise<void>): Promise<void>;
  /** trace_id and span_id of the active span, for log lines. */
  logIds(): Record<string, string>;
  flush(): Promise<void>;
  close(): Promise<void>;
}

const SPANS = Symbol('svc.spans');
interface RequestSpans {
  root: Span;
  ctx: Context;
  auth: Span | null;
}
type Traced = FastifyRequest & { [SPANS]?: RequestSpans };

/** The context manager is process-wide (AsyncLocalStorage); set once, whatever the number of apps. */
let contextManagerSet = false;

export function startTracing(cfg: ObservabilityConfig, version: string): Tracing {
  if (!contextManagerSet) {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    contextManagerSet = true;
  }
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': cfg.serviceName, 'service.version': version }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(cfg.traceSamplePercent / 100) }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: cfg.tracesEndpoint! }), scheduledDelayMillis: 1_000 })],
  });
  const tracer: Tracer = provider.getTracer('svc-gateway', version);

  const spansOf = (req: FastifyRequest) => (req as Traced)[SPANS];

  function endAuth(s: RequestSpans, error?: unknown): void {
    if (!s.auth) return;
    if (error) fail(s.auth, error);
    s.auth.end();
    s.auth = null;
  }

  return {
    register(app) {
      // Callback hooks, so that the rest of the request runs inside context.with: spans made deeper (provider hops,
      // the outcome write) find the request's span as their parent. Entered again before the handler, because the
      // body arrives through stream events that do not carry the context.
      app.addHook('onRequest', (req, reply, done) => {
        const route = req.routeOptions.url ?? 'unmatched';
        const parent = propagation.extract(ROOT_CONTEXT, req.headers);
        const root = tracer.startSpan(
          `${req.method} ${route}`,
          {
            kind: SpanKind.SERVER,
            attributes: { 'http.request.method': req.method, 'http.route': route, 'url.path': req.url.split('?')[0], 'svc.request_id': req.id },
          },
          parent,
        );
        const ctx = trace.setSpan(parent, root);
        const action = actionOf(req);
        const auth = action === undefined || action === 'public' ? null : tracer.startSpan('svc.auth', {}, ctx);
        (req as Traced)[SPANS] = { root, ctx, auth };
        if (root.isRecording()) reply.header('X-Svc-Trace-Id', root.spanContext().traceId);
        context.with(ctx, done);
      });
      // Runs after every onRequest hook (the auth hook among them): authentication and its rate limit are done.
      app.addHook('preParsing', (req, _reply, payload, done) => {
        const s = spansOf(req);
        if (s) endAuth(s);
        done(null, payload);
      });
      app.addHook('preHandler', (req, _reply, done) => {
        const s = spansOf(req);
        if (!s) return done();
        if (req.ctx) {
          s.root.setAttributes({ 'svc.key_id': req.ctx.caller.keyId });
          // The usage record's trace id (domain/inference/tracker.ts traceIdOf): the trace X-Svc-Trace-Id names, when exported.
          if (s.root.isRecording()) req.ctx.traceId = s.root.spanContext().traceId;
        }
        context.with(s.ctx, done);
      });
      app.addHook('onError', (req, _reply, error, done) => {
        const s = spansOf(req);
        if (s) {
          endAuth(s, error);
          s.root.setAttribute('error.type', (error as { code?: string }).code ?? error.name);
        }
        done();
      });
      app.addHook('onResponse', (req, reply, done) => {
        const s = spansOf(req);
        if (!s) return done();
        endAuth(s);
        const status = reply.statusCode;
        s.root.setAttribute('http.response.status_code', status);
        if (req.ctx?.projectId) s.root.setAttribute('svc.project_id', req.ctx.projectId);
        if (status >= 500) s.root.setStatus({ code: SpanStatusCode.ERROR });
        s.root.end();
        done();
      });
    },

    step(name, fn) {
      return async (req, reply) => {
        const s = spansOf(req);
        if (!s) return fn(req, reply);
        const span = tracer.startSpan(name, {}, s.auth ? trace.setSpan(s.ctx, s.auth) : s.ctx);
        try {
          await fn(req, reply);
        } catch (err) {
          fail(span, err);
          throw err;
        } finally {
          span.end();
        }
      };
    },

    hop(route, stream) {
      const model = route.model.id;
      const span = tracer.startSpan(
        `chat ${model}`,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': route.provider.kind,
            'gen_ai.system': route.provider.kind,
            'gen_ai.request.model': model,
            'svc.provider': route.provider.name,
            'svc.route': route.id,
            'svc.region': route.provider.region,
            'svc.stream': stream,
          },
        },
        context.active(),
      );
      return (outcome, result) => {
        if (outcome === 'ok') {
          span.setAttribute('gen_ai.response.model', model);
          const c = result as Partial<Completion> | null;
          if (!stream && c && typeof c === 'object') {
            if (c.usage) {
              span.setAttribute('gen_ai.usage.input_tokens', c.usage.promptTokens);
              span.setAttribute('gen_ai.usage.output_tokens', c.usage.completionTokens);
            }
            if (c.finishReason) span.setAttribute('gen_ai.response.finish_reasons', [c.finishReason]);
          }
        } else {
          span.setAttribute('error.type', outcome);
          span.setStatus({ code: SpanStatusCode.ERROR, message: result instanceof Error ? result.message : outcome });
        }
        span.end();
      };
    },

    async outcome(o, write) {
      const attributes = {
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': o.model,
        'gen_ai.usage.input_tokens': o.promptTokens,
        'gen_ai.usage.output_tokens': o.completionTokens,
        'svc.cost_usd': Number(o.costMicros) / MICROS_PER_USD,
        'svc.cache_hit': o.cacheHit,
        'svc.inference.status': o.status,
        ...(o.route ? { 'svc.route': o.route } : {}),
        ...(o.errorCode ? { 'svc.error_code': o.errorCode } : {}),
      };
      // The request's own span carries the inference's GenAI attributes too (what a trace list shows).
      trace.getActiveSpan()?.setAttributes({ ...attributes, 'svc.project_id': o.projectId });
      const span = tracer.startSpan('svc.outcome.write', { attributes: { 'svc.request_id': o.requestId, ...attributes } }, context.active());
      try {
        await write();
      } finally {
        span.end();
      }
    },

    logIds(): Record<string, string> {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const c = span.spanContext();
      return { trace_id: c.traceId, span_id: c.spanId };
    },

    flush: () => provider.forceFlush(),
    close: () => provider.shutdown(),
  };
}

function fail(span: Span, error: unknown): void {
  const code = (error as { code?: unknown }).code;
  span.setAttribute('error.type', typeof code === 'string' ? code : error instanceof Error ? error.name : 'error');
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}
