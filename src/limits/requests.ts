import type { Ctx } from '../domain/context.ts';
import { SvcError } from '../errors/svc-error.ts';
import type { Decision, RateLimitState, TokenOwner, WindowOwner } from './limiter.ts';

/** A token reservation made before a provider call; settle it once with the real usage. */
export interface TokenReservation {
  /** Tokens taken from each token window (the estimate, cut to the window's size if larger). */
  readonly tokens: number;
  settled: boolean;
}

/** The X-Svc-RateLimit-* headers (spec 8.1.6) of a state, plus Retry-After on a refusal. */
export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  const headers: Record<string, string> = {
    'X-Svc-RateLimit-Limit': String(state.limit),
    'X-Svc-RateLimit-Remaining': String(state.remaining),
    'X-Svc-RateLimit-Reset': String(state.reset),
    'X-Svc-RateLimit-Resource': state.resource,
  };
  if (state.retryAfter !== undefined) headers['Retry-After'] = String(state.retryAfter);
  return headers;
}

function ownerOf(ctx: Ctx): WindowOwner {
  return ctx.caller.kind === 'operator'
    ? { kind: 'operator' }
    : { kind: 'key', keyId: ctx.caller.keyId, projectId: ctx.caller.projectId! };
}

/**
 * The token windows a request draws on: a key's (its own and its project's); for the operator, once its inference
 * has named a project, that project's (CONTRACT §7: the project's windows bind every caller); else none.
 */
function tokenOwnerOf(ctx: Ctx): TokenOwner | null {
  if (ctx.caller.kind !== 'operator') return { kind: 'key', keyId: ctx.caller.keyId, projectId: ctx.caller.projectId! };
  return ctx.projectId ? { kind: 'project', projectId: ctx.projectId } : null;
}

/** Of a request-and-tokens decision: the tokens taken from the token windows (the second half of the buckets). */
const tokensTaken = (d: Decision) => Math.max(0, ...d.applied.slice(d.applied.length / 2));

function refused(decision: Decision): SvcError {
  const s = decision.state;
  const whose = s.owner === 'operator' ? "The operator key's" : s.owner === 'key' ? "The key's" : "The project's";
  return new SvcError('rate_limit_exceeded', {
    message: `${whose} ${s.resource} window is exhausted (limit ${s.limit}); retry after ${s.retryAfter} s.`,
    headers: rateLimitHeaders(s),
  });
}

/** A 429 of the request windows (not of the token windows): the check that comes before everything else. */
export function isRequestWindowRefusal(err: unknown): boolean {
  return err instanceof SvcError && err.code === 'rate_limit_exceeded' && err.headers?.['X-Svc-RateLimit-Resource'] === 'requests';
}

function apply(ctx: Ctx, decision: Decision): void {
  ctx.rateLimit = decision.state;
  if (!decision.allowed) throw refused(decision);
}

/**
 * Every authenticated request, REST or GraphQL: one request from the key's and the project's request windows. The
 * operator's control-plane calls take from its own window; its inference, whose request is deferred until the project
 * is known, also takes from that project's request window.
 */
export async function takeRequest(ctx: Ctx): Promise<void> {
  ctx.requestPending = false;
  const now = ctx.deps.clock.now();
  apply(ctx, await ctx.deps.limiter.takeRequest(ownerOf(ctx), now));
  const windows = tokenOwnerOf(ctx);
  if (windows?.kind === 'project') apply(ctx, await ctx.deps.limiter.takeRequest(windows, now));
}

/**
 * Inference defers its request to the token reservation, so that limits cost one Redis round trip before the provider
 * call (issue 7's budget): the auth hook marks the request pending instead of taking it; reserveTokens takes it with
 * the tokens; any other way out (an error, a cache hit, an idempotent replay) takes it with takePendingRequest first.
 */
export function deferRequest(ctx: Ctx): void {
  ctx.requestPending = true;
}

/** Takes the deferred request, if it is still pending: 429 rate_limit_exceeded when its windows are exhausted. */
export async function takePendingRequest(ctx: Ctx): Promise<void> {
  if (ctx.requestPending) await takeRequest(ctx);
}

/**
 * Before a provider call: takes `estimate` tokens from the key's and the project's token windows (all or nothing),
 * else 429 rate_limit_exceeded with the token window's headers. The operator has no token windows of its own: its
 * inference takes from the project's (its own request window is taken first, apart). A deferred
 * request is taken in the same call; when that call is refused nothing was taken, and the two steps run one after
 * the other (request, then tokens), so a refusal says exactly what it would have said with the request taken first.
 */
export async function reserveTokens(ctx: Ctx, estimate: number): Promise<TokenReservation> {
  const windows = tokenOwnerOf(ctx);
  if (!windows) {
    await takePendingRequest(ctx);
    return { tokens: 0, settled: false };
  }
  const tokens = Math.max(0, Math.ceil(estimate));
  const now = ctx.deps.clock.now();
  if (ctx.requestPending) {
    // The operator's own request window first (it has no token window); then the project's, with the tokens. The
    // pending request is no longer pending once the operator's window is taken: a refusal must not take it again.
    if (windows.kind === 'project') {
      ctx.requestPending = false;
      apply(ctx, await ctx.deps.limiter.takeRequest({ kind: 'operator' }, now));
    }
    const both = await ctx.deps.limiter.takeRequestAndTokens(windows, now, tokens);
    if (both.allowed) {
      ctx.requestPending = false;
      apply(ctx, both);
      return { tokens: tokensTaken(both), settled: false };
    }
    ctx.requestPending = false;
    apply(ctx, await ctx.deps.limiter.takeRequest(windows, now));
  }
  const decision = await ctx.deps.limiter.takeTokens(windows, ctx.deps.clock.now(), tokens);
  apply(ctx, decision);
  return { tokens: Math.max(...decision.applied), settled: false };
}

/**
 * After the call: corrects the token windows from the reservation to the real usage (a cache hit or a failed call
 * settles to 0, giving everything back; usage above the estimate leaves the windows in debt). Settling twice is a no-op.
 */
export async function settleTokens(ctx: Ctx, reservation: TokenReservation, actualTokens: number): Promise<void> {
  if (reservation.settled) return;
  reservation.settled = true;
  const windows = tokenOwnerOf(ctx);
  if (!windows) return;
  const delta = Math.max(0, Math.ceil(actualTokens)) - reservation.tokens;
  if (delta === 0) return;
  const decision = await ctx.deps.limiter.adjustTokens(windows, ctx.deps.clock.now(), delta);
  ctx.rateLimit = decision.state;
}
