import type { ProviderHop } from '../../providers/router.ts';
import type { Ctx } from '../context.ts';

/**
 * Where one request spent its time, kept on its usage record (column `timings`) for the request detail's timeline.
 * Every figure is in milliseconds (0.1 ms precision) from the request's start on a monotonic clock (performance.now()):
 * the start is the auth hook's first instruction, or, for work without a request of its own (batch lines,
 * evaluation cases, the verticals' jobs), the start of the inference itself.
 */
export interface RequestTimings {
  /** End of the auth hook: key lookup, the request window, the scope check. Null: no request of its own. */
  authenticatedMs: number | null;
  /** The inference began (body read and validated, project and customer resolved): the record's created_at. */
  validatedMs: number;
  /** Admitted: the budget check, the cache lookup and the token reservation passed. Null: it stopped before. */
  admittedMs: number | null;
  /** The provider hops in order (fallbacks and circuit-open skips included); empty when no provider was asked. */
  hops: readonly ProviderHop[];
  /** The answer was complete (a stream's last part, or a cache hit). Null: none came. */
  answeredMs: number | null;
  /** The outcome handed to the outcome writer: the end of the gateway's work on it. */
  totalMs: number;
}

const NO_HOPS: readonly ProviderHop[] = Object.freeze([]);

const tenths = (ms: number): number => Math.round(ms * 10) / 10;

/** One inference's marks (performance.now(); 0 until reached), as the tracker keeps them. */
export interface InferenceMarks {
  startedAt: number;
  admittedAt: number;
  answeredAt: number;
  hops: ProviderHop[] | undefined;
}

/**
 * The timings of an inference that ends `now`. Rebases its hops' starts in place (they are the tracker's, recorded
 * once): nothing is allocated here but the one object returned.
 */
export function timingsOf(ctx: Ctx, m: InferenceMarks, now: number): RequestTimings {
  const origin = ctx.startedAt ?? m.startedAt;
  const hops = m.hops;
  if (hops) {
    for (const h of hops) {
      h.startMs = tenths(h.startMs - origin);
      h.durationMs = tenths(h.durationMs);
    }
  }
  return {
    authenticatedMs: ctx.authenticatedAt === undefined ? null : tenths(ctx.authenticatedAt - origin),
    validatedMs: tenths(m.startedAt - origin),
    admittedMs: m.admittedAt === 0 ? null : tenths(m.admittedAt - origin),
    hops: hops ?? NO_HOPS,
    answeredMs: m.answeredAt === 0 ? null : tenths(m.answeredAt - origin),
    totalMs: tenths(now - origin),
  };
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-|$)/;
const ZEROS = /^0+$/;

/**
 * The request's W3C trace id: the trace the gateway exported its spans under (tracing on and the request sampled:
 * the X-Svc-Trace-Id header), else the trace id of the caller's `traceparent` when it is valid (W3C Trace Context:
 * version ff, an all-zero trace or parent id, or more after a version-00 header are not), else null.
 */
export function traceIdOf(ctx: Ctx): string | null {
  if (ctx.traceId !== undefined) return ctx.traceId;
  const header = ctx.traceparent;
  if (header === undefined) return null;
  const m = TRACEPARENT.exec(header.trim());
  if (!m || m[1] === 'ff' || ZEROS.test(m[2]!) || ZEROS.test(m[3]!)) return null;
  if (m[1] === '00' && header.trim().length !== 55) return null;
  return m[2]!;
}

/** A stored `timings` value as RequestTimings, or null when the record has none (or not in this shape). */
export function readTimings(raw: unknown): RequestTimings | null {
  if (raw === null || typeof raw !== 'object') return null;
  const t = raw as Partial<RequestTimings>;
  if (typeof t.totalMs !== 'number' || !Array.isArray(t.hops)) return null;
  return {
    authenticatedMs: typeof t.authenticatedMs === 'number' ? t.authenticatedMs : null,
    validatedMs: typeof t.validatedMs === 'number' ? t.validatedMs : 0,
    admittedMs: typeof t.admittedMs === 'number' ? t.admittedMs : null,
    hops: t.hops,
    answeredMs: typeof t.answeredMs === 'number' ? t.answeredMs : null,
    totalMs: t.totalMs,
  };
}
