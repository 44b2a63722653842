import type { Ctx } from '../domain/context.ts';
import { SvcError } from '../errors/svc-error.ts';
import type { Decision, RateLimitState, WindowOwner } from './limiter.ts';

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

/** Every authenticated request, REST or GraphQL: one request from the key's and the project's request windows. */
export async function takeRequest(ctx: Ctx): Promise<void> {
  ctx.requestPending = false;
  apply(ctx, await ctx.deps.limiter.takeRequest(ownerOf(ctx), ctx.deps.clock.now()));
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
 * else 429 rate_limit_exceeded with the token window's headers. The operator has no token windows. A deferred
 * request is taken in the same call; when that call is refused nothing was taken, and the two steps run one after
 * the other (request, then tokens), so a refusal says exactly what it would have said with the request taken first.
 */
export async function reserveTokens(ctx: Ctx, estimate: number): Promise<TokenReservation> {
  const owner = ownerOf(ctx);
  if (owner.kind === 'operator') {
    await takePendingRequest(ctx);
    return { tokens: 0, settled: false };
  }
  const tokens = Math.max(0, Math.ceil(estimate));
  const now = ctx.deps.clock.now();
  if (ctx.requestPending) {
    const both = await ctx.deps.limiter.takeRequestAndTokens(owner, now, tokens);
    if (both.allowed) {
      ctx.requestPending = false;
      apply(ctx, both);
      return { tokens: Math.max(...both.applied.slice(2)), settled: false };
    }
    await takeRequest(ctx);
  }
  const decision = await ctx.deps.limiter.takeTokens(owner, ctx.deps.clock.now(), tokens);
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
  const owner = ownerOf(ctx);
  if (owner.kind === 'operator') return;
  const delta = Math.max(0, Math.ceil(actualTokens)) - reservation.tokens;
  if (delta === 0) return;
  const decision = await ctx.deps.limiter.adjustTokens(owner, ctx.deps.clock.now(), delta);
  ctx.rateLimit = decision.state;
}
