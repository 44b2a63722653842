import { newId } from '../../db/ids.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { isRequestWindowRefusal, type RateLimitTicket } from '../../limits/index.ts';
import { isAbortError, RoutingError, type ProviderHop, type Route } from '../../providers/router.ts';
import type { Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import type { CacheStatus } from './types.ts';
import type { SpendCharge } from '../budgets/service.ts';
import type { Citation } from '../rag/stage.ts';
import { retainedRecord, type PrivacyPlan, type RetainedResult } from '../privacy/stage.ts';
import type { AppliedTemplate } from '../templates/inference-stage.ts';
import type { BoundCustomer } from '../customers/inference-stage.ts';
import type { RequestTimings } from '../usage/outcome.ts';

const NO_HOPS: readonly ProviderHop[] = Object.freeze([]);
const tenths = (ms: number): number => Math.round(ms * 10) / 10;

/** One inference from start to its usage record: what is known so far about where it went and how it ended. */
export class Tracker {
  /** performance.now() when the inference began; its marks below are on the same clock (timings()). */
  readonly startedAt = performance.now();
  /** performance.now() when admitted and when the answer was complete; 0 until then. */
  admittedAt = 0;
  answeredAt = 0;
  /** The provider hops, in order, as the router records them (hopLog()). */
  hops: ProviderHop[] | undefined = undefined;
  readonly createdAt: Date;
  readonly id: string;
  model: string;
  /** The `rag` option's sources, carried into the result. */
  citations: Citation[] | undefined;
  route: string | null = null;
  region: string | null = null;
  /** Redaction and retention (domain/privacy/stage.ts), from the plan step on. */
  privacy: PrivacyPlan | null = null;
  template: AppliedTemplate | null = null;
  /** The end customer the request names (CONTRACT §22), with its bounds; null: none named. */
  customer: BoundCustomer | null = null;
  private recorded = false;

  constructor(
    readonly ports: InferencePorts,
    readonly ctx: Ctx,
    /** The request's rate-limit ticket: this inference owns it (reserve, settle, take the deferred request). */
    readonly ticket: RateLimitTicket,
    readonly projectId: string,
    requestedModel: string,
  ) {
    this.createdAt = ctx.now();
    this.id = newId('inf', this.createdAt.getTime());
    this.model = requestedModel;
  }

  /** The hop log to hand the router: one array per inference, made when a provider is first asked. */
  hopLog(): ProviderHop[] {
    return (this.hops ??= []);
  }

  tried(route: Route | null): void {
    if (!route) return;
    this.route = route.id;
    this.model = route.model.id;
    this.region = route.provider.region;
  }

  /** The opening fields of a provider-answered result (whole or streamed): who answered, when, under which id. */
  answeredBy(route: Route, cacheStatus: CacheStatus) {
    return {
      id: this.id,
      requestId: this.ctx.requestId,
      createdAt: this.createdAt,
      model: route.model.id,
      route: route.id,
      region: route.provider.region,
      cacheHit: false as const,
      cacheStatus,
    };
  }

  /**
   * Exactly once per inference (CONTRACT §8): hands the outcome to the outcome writer, which has it durably when this
   * resolves (a Redis stream entry in the kernel's socket buffer, not yet acknowledged, or the in-process batch;
   * written to PostgreSQL in a batch off the request path). A failed write, even one found out after the response,
   * is the writer's to retry (directly to PostgreSQL) and log, never the caller's error.
   */
  async record(o: {
    status: 'succeeded' | 'failed';
    errorCode: string | null;
    cacheHit?: boolean;
    promptTokens?: number;
    completionTokens?: number;
    costMicros?: bigint;
    spend?: SpendCharge | null;
    result?: RetainedResult;
  }): Promise<void> {
    if (this.recorded) return;
    this.recorded = true;
    const now = performance.now();
    await this.ports.outcomes.record({
      requestId: this.ctx.requestId,
      projectId: this.projectId,
      keyId: this.ctx.caller.keyId,
      model: this.model,
      route: this.route,
      region: this.region,
      cacheHit: o.cacheHit ?? false,
      status: o.status,
      errorCode: o.errorCode,
      promptTokens: o.promptTokens ?? 0,
      completionTokens: o.completionTokens ?? 0,
      costMicros: o.costMicros ?? 0n,
      latencyMs: Math.round(now - this.startedAt),
      createdAt: this.createdAt,
      eventId: newId('evt', this.createdAt.getTime()),
      spend: o.spend ?? null,
      traceId: traceIdOf(this.ctx),
      timings: this.timings(now),
      retained: this.privacy ? retainedRecord(this.privacy, this.id, this.createdAt, o.status, o.result ?? null) : null,
      ...(this.template ? { templateId: this.template.id, templateVersion: this.template.version } : {}),
      ...(this.customer ? { customer: this.customer.id } : {}),
    });
  }

  async fail(err: unknown): Promise<void> {
    if (err instanceof RoutingError) this.tried(err.route);
    await this.record({ status: 'failed', errorCode: errorCodeOf(err) });
  }

  /**
   * The usage record's timings of an inference that ends `now`, in milliseconds (0.1 ms precision) from the request's
   * start: the auth hook's first instruction (ctx.startedAt), or, for work without a request of its own (batch lines,
   * evaluation cases, the verticals' jobs), the start of the inference itself. Rebases the hops' starts in place (they
   * are this tracker's, recorded once): nothing is allocated here but the one object returned.
   */
  private timings(now: number): RequestTimings {
    const ctx = this.ctx;
    const origin = ctx.startedAt ?? this.startedAt;
    const hops = this.hops;
    if (hops) {
      // Start and end each rounded, the duration their difference: a hop then never ends after the next one starts
      // or after the answer (rounded start plus rounded duration could pass them by 0.1 ms).
      for (const h of hops) {
        const start = tenths(h.startMs - origin);
        h.durationMs = tenths(tenths(h.startMs + h.durationMs - origin) - start);
        h.startMs = start;
      }
    }
    return {
      authenticatedMs: ctx.authenticatedAt === undefined ? null : tenths(ctx.authenticatedAt - origin),
      validatedMs: tenths(this.startedAt - origin),
      admittedMs: this.admittedAt === 0 ? null : tenths(this.admittedAt - origin),
      hops: hops ?? NO_HOPS,
      answeredMs: this.answeredAt === 0 ? null : tenths(this.answeredAt - origin),
      totalMs: tenths(now - origin),
    };
  }
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-|$)/;
const ZEROS = /^0+$/;

/**
 * The request's W3C trace id: the trace the gateway exported its spans under (tracing on and the request sampled:
 * the X-Svc-Trace-Id header), else the trace id of the caller's `traceparent` when it is valid (W3C Trace Context:
 * version ff, an all-zero trace or parent id, or more after a version-00 header are not), else null.
 */
function traceIdOf(ctx: Ctx): string | null {
  if (ctx.traceId !== undefined) return ctx.traceId;
  const header = ctx.traceparent;
  if (header === undefined) return null;
  const m = TRACEPARENT.exec(header.trim());
  if (!m || m[1] === 'ff' || ZEROS.test(m[2]!) || ZEROS.test(m[3]!)) return null;
  if (m[1] === '00' && header.trim().length !== 55) return null;
  return m[2]!;
}

/** The usage record's error_code: the spec's code, or `client_disconnected` when the caller went away. */
export function errorCodeOf(err: unknown): string {
  if (err instanceof SvcError) return err.code;
  if (isAbortError(err)) return 'client_disconnected';
  return 'internal_error';
}

/**
 * An inference that failed: its usage record, unless its request window refused it, which is the check that comes
 * before the inference (the deferred request is taken here if it is still pending, and throws that 429 instead).
 */
export async function refuseOrRecord(t: Tracker, err: unknown): Promise<void> {
  await t.ticket.takeDeferred();
  if (isRequestWindowRefusal(err)) return;
  await t.fail(err);
}
