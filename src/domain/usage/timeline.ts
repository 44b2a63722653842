import type { UsageRecord } from '../../generated/prisma/client.ts';
import type { ProviderHop } from '../../providers/router.ts';
import type { RequestTimings } from './outcome.ts';

/** One step of a request's timeline: when it began, how long it took, how it ended. */
export interface TimelineStep {
  /** received, authenticated, validated, limits, cache, provider (one per hop), answered, outcome. */
  step: string;
  /** Unix milliseconds when the step began. */
  atMs: number;
  /** Milliseconds from the request's start. */
  offsetMs: number;
  /** How long the step took; null when the record does not tell (records without timings). */
  durationMs: number | null;
  status: 'ok' | 'failed' | 'skipped';
  detail: string;
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

/** Error codes that the limits stage answers (the request never reached a provider). */
const LIMIT_CODES = new Set(['rate_limit_exceeded', 'budget_exceeded', 'project_archived']);

const tenths = (n: number): number => Math.round(n * 10) / 10;
const ms = (n: number): string => `${tenths(n)} ms`;

/**
 * The steps a request went through: from its recorded timings (real instants and durations, one step per provider
 * hop) when the record has them, else derived from the usage record alone (every step at its start).
 */
export function timelineOf(r: UsageRecord): TimelineStep[] {
  const timings = readTimings(r.timings);
  return timings ? recordedTimeline(r, timings) : derivedTimeline(r);
}

function hopDetail(r: UsageRecord, h: ProviderHop, next: ProviderHop | undefined): string {
  const fellBack = next ? `; fell back to ${next.route}` : '';
  switch (h.outcome) {
    case 'ok':
      return `Answered by ${h.route}${h.route === r.route && r.region ? ` (${r.region})` : ''} in ${ms(h.durationMs)}.`;
    case 'circuit_open':
      return `${h.route} skipped: its circuit is open after repeated failures${fellBack}.`;
    case 'timeout':
      return `${h.route} timed out after ${ms(h.durationMs)}${fellBack}.`;
    case 'rejected':
      return `${h.route} refused the request (${h.error ?? 'rejected'}) after ${ms(h.durationMs)}: no fallback for a request the provider refuses.`;
    case 'aborted':
      return `${h.route} was cut off after ${ms(h.durationMs)}: the client went away.`;
    default:
      return `${h.route} failed (${h.error ?? 'error'}) after ${ms(h.durationMs)}${fellBack}.`;
  }
}

function recordedTimeline(r: UsageRecord, t: RequestTimings): TimelineStep[] {
  // created_at is the instant the inference began (validatedMs): the request's start in Unix ms is that much earlier.
  const origin = r.createdAt.getTime() - t.validatedMs;
  const failed = r.status === 'failed';
  const steps: TimelineStep[] = [];
  const add = (step: string, at: number, durationMs: number, status: TimelineStep['status'], detail: string) => {
    const offsetMs = tenths(at);
    steps.push({ step, atMs: origin + offsetMs, offsetMs, durationMs: Math.max(0, tenths(durationMs)), status, detail });
  };
  const customer = r.customer ? ` for customer ${r.customer}` : '';
  add('received', 0, 0, 'ok', `Request ${r.requestId} for model ${r.model}.`);
  if (t.authenticatedMs === null) add('authenticated', 0, 0, 'skipped', `Made by background work as key ${r.keyId}${customer}: no request of its own.`);
  else add('authenticated', 0, t.authenticatedMs, 'ok', `Key ${r.keyId}${customer}: key lookup, request window and scope check.`);
  const authenticated = t.authenticatedMs ?? 0;
  add('validated', authenticated, t.validatedMs - authenticated, 'ok', 'Body read and validated; the inference began.');
  if (t.admittedMs === null) {
    const refused = failed && r.errorCode !== null && LIMIT_CODES.has(r.errorCode);
    add('limits', t.validatedMs, refused ? t.totalMs - t.validatedMs : 0, refused ? 'failed' : 'skipped', refused ? `Refused: ${r.errorCode}.` : 'Not reached: the request failed before.');
  } else {
    add('limits', t.validatedMs, t.admittedMs - t.validatedMs, 'ok', 'Planned and admitted: RAG retrieval when asked, routing, budget check, cache lookup, token reservation.');
    add('cache', t.admittedMs, 0, r.cacheHit ? 'ok' : 'skipped', r.cacheHit ? 'Answered from the response cache: no provider was called.' : 'Not answered from the cache.');
  }
  let end = t.admittedMs ?? t.validatedMs;
  t.hops.forEach((h, i) => {
    add('provider', h.startMs, h.durationMs, h.outcome === 'ok' ? 'ok' : h.outcome === 'circuit_open' ? 'skipped' : 'failed', hopDetail(r, h, t.hops[i + 1]));
    end = Math.max(end, h.startMs + h.durationMs);
  });
  if (t.answeredMs !== null) {
    // Each time is kept to a tenth of a millisecond, so the last hop's start plus its duration can pass the answer by
    // up to 0.1 ms: the answer is never put before the hop's end it follows.
    end = Math.min(end, t.answeredMs);
    add('answered', end, t.answeredMs - end, 'ok', r.cacheHit ? 'The cached answer was ready.' : 'The answer was complete (a stream: its last part).');
    end = t.answeredMs;
  }
  add(
    'outcome',
    end,
    t.totalMs - end,
    failed ? 'failed' : 'ok',
    failed
      ? `Failed with ${r.errorCode ?? 'an error'} after ${ms(t.totalMs)}.`
      : `Succeeded in ${ms(t.totalMs)}: ${r.promptTokens} prompt and ${r.completionTokens} completion tokens.`,
  );
  return steps;
}

/** A record written before timings were kept: every step at the request's start, the route as its one hop. */
function derivedTimeline(r: UsageRecord): TimelineStep[] {
  const start = r.createdAt.getTime();
  const failed = r.status === 'failed';
  const stoppedAtLimits = failed && r.errorCode !== null && LIMIT_CODES.has(r.errorCode);
  const steps: TimelineStep[] = [];
  const add = (step: string, atMs: number, status: TimelineStep['status'], detail: string) =>
    steps.push({ step, atMs, offsetMs: atMs - start, durationMs: null, status, detail });
  add('received', start, 'ok', `Request ${r.requestId} for model ${r.model}.`);
  add('authenticated', start, 'ok', `Key ${r.keyId}${r.customer ? ` for customer ${r.customer}` : ''}.`);
  add('limits', start, stoppedAtLimits ? 'failed' : 'ok', stoppedAtLimits ? `Refused: ${r.errorCode}.` : 'Within the rate limits and budgets.');
  const end = start + r.latencyMs;
  if (stoppedAtLimits) {
    add('outcome', end, 'failed', `Failed with ${r.errorCode} after ${r.latencyMs} ms.`);
    return steps;
  }
  add('cache', start, r.cacheHit ? 'ok' : 'skipped', r.cacheHit ? 'Answered from the response cache: no provider was called.' : 'Not answered from the cache.');
  if (!r.cacheHit) {
    if (r.route) add('provider', start, failed ? 'failed' : 'ok', `${failed ? 'Last tried' : 'Answered by'} ${r.route}${r.region ? ` in ${r.region}` : ''}.`);
    else add('provider', start, failed ? 'failed' : 'skipped', 'No provider was reached.');
  }
  if (failed) add('outcome', end, 'failed', `Failed with ${r.errorCode ?? 'an error'} after ${r.latencyMs} ms.`);
  else add('outcome', end, 'ok', `Succeeded in ${r.latencyMs} ms: ${r.promptTokens} prompt and ${r.completionTokens} completion tokens.`);
  return steps;
}
