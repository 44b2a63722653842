import { SvcError } from '../errors/svc-error.ts';
import type { CustomerWindows, Decision, Limiter, RateLimitState, TokenOwner, WindowOwner } from './limiter.ts';

/** The limiter calls a ticket makes. */
export type TicketLimiter = Pick<Limiter, 'takeRequest' | 'takeTokens' | 'takeRequestAndTokens' | 'adjustTokens'>;

/** Who calls, as far as the windows care (the domain's Caller fits). */
export interface TicketCaller {
  /** `session`: a console operator (issue 22), windowed as a key of the project it addresses. */
  kind: 'operator' | 'key' | 'session';
  keyId: string;
  /** The key's project; null for the operator. */
  projectId: string | null;
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

/**
 * Of a decision: the tokens taken from the token windows (the second half of the buckets). A take larger than a window
 * is cut to its capacity, so windows of different sizes (an end customer's beside the key's) may have taken different
 * amounts: the smallest is what the settlement corrects from, so no window is given back more than it took.
 */
const tokensTaken = (d: Decision) => Math.max(0, Math.min(...d.applied.slice(d.applied.length / 2)));

function refused(decision: Decision): SvcError {
  const s = decision.state;
  const whose =
    s.owner === 'operator' ? "The operator key's" : s.owner === 'key' ? "The key's" : s.owner === 'customer' ? "The customer's" : "The project's";
  return new SvcError('rate_limit_exceeded', {
    message: `${whose} ${s.resource} window is exhausted (limit ${s.limit}); retry after ${s.retryAfter} s.`,
    headers: rateLimitHeaders(s),
    // CONTRACT §22: an end customer's window names the customer.
    ...(s.owner === 'customer' ? { param: 'customer' } : {}),
  });
}

/** A 429 of the request windows (not of the token windows): the check that comes before everything else. */
export function isRequestWindowRefusal(err: unknown): boolean {
  return err instanceof SvcError && err.code === 'rate_limit_exceeded' && err.headers?.['X-Svc-RateLimit-Resource'] === 'requests';
}

/**
 * One request's hold on its rate-limit windows (CONTRACT §7), created by the rate-limit hook for every authenticated
 * request and handed to whoever draws on it (the inference service). It knows what was taken (the request, the
 * tokens reserved), the binding window state (the X-Svc-RateLimit-* headers, errors included), and how to settle or
 * refund the tokens.
 *
 * Every request takes one request from the key's and the project's request windows (`take`). Inference defers it
 * (`defer`) to the token reservation, so that limits cost one Redis round trip before the provider call: `reserve`
 * takes it with the tokens; any other way out (an error, a cache hit, an idempotent replay) calls `takeDeferred`
 * first. The operator's control-plane calls take from its own window; its inference, once it has `address`ed a
 * project, also takes from that project's request and token windows (the project's windows bind every caller).
 */
export class RateLimitTicket {
  private binding: RateLimitState | undefined;
  private deferred = false;
  /** The operator's inference: the project whose windows it draws on. */
  private project: string | null = null;
  private reservation: { tokens: number; settled: boolean } | null = null;
  /** The binding state before the reservation: what a withdrawn reservation leaves the headers saying. */
  private beforeReserve: RateLimitState | undefined;
  /** After a reservation refused for its tokens: the state once the request alone was taken. */
  private requestTaken: RateLimitState | undefined;
  /** The end customer the inference names, with windows of its own (CONTRACT §22): drawn on beside the key's. */
  private customer: CustomerWindows | undefined;

  constructor(
    private readonly limiter: TicketLimiter,
    private readonly clock: { now(): number },
    private readonly caller: TicketCaller,
  ) {}

  /** The binding window after the last limiter call: the response's X-Svc-RateLimit-* headers (none before any call). */
  get state(): RateLimitState | undefined {
    return this.binding;
  }

  /** The request is deferred and not taken yet. */
  get pending(): boolean {
    return this.deferred;
  }

  /** Tokens the reservation took from each token window (0 before `reserve`). */
  get tokens(): number {
    return this.reservation?.tokens ?? 0;
  }

  /**
   * The inference names an end customer with windows of its own (CONTRACT §22): from now on (the deferred request, the
   * reservation, the settlement) its windows are taken in the same call as the key's and the project's.
   */
  bindCustomer(windows: CustomerWindows): void {
    this.customer = windows;
  }

  /** The operator's inference names its project: from now on the project's windows bind it too. */
  address(projectId: string): void {
    if (this.caller.kind === 'operator') this.project = projectId;
  }

  private owner(): WindowOwner {
    // A console session addressing no project (its project list) draws on the operator's own window.
    return this.caller.kind === 'operator' || this.caller.projectId === null
      ? { kind: 'operator' }
      : { kind: 'key', keyId: this.caller.keyId, projectId: this.caller.projectId!, ...(this.customer ? { customer: this.customer } : {}) };
  }

  /** The token windows: a key's (its own and its project's); the operator's addressed project's; else none. */
  private tokenOwner(): TokenOwner | null {
    const customer = this.customer ? { customer: this.customer } : {};
    if (this.caller.kind !== 'operator' && this.caller.projectId !== null) return { kind: 'key', keyId: this.caller.keyId, projectId: this.caller.projectId, ...customer };
    return this.project ? { kind: 'project', projectId: this.project, ...customer } : null;
  }

  private apply(decision: Decision): void {
    this.binding = decision.state;
    if (!decision.allowed) throw refused(decision);
  }

  /** Takes the request now: 429 rate_limit_exceeded when its windows are exhausted. */
  async take(): Promise<void> {
    this.deferred = false;
    const now = this.clock.now();
    this.apply(await this.limiter.takeRequest(this.owner(), now));
    const windows = this.tokenOwner();
    if (windows?.kind === 'project') this.apply(await this.limiter.takeRequest(windows, now));
  }

  /** Leaves the request to `reserve` (or to `takeDeferred`). */
  defer(): void {
    this.deferred = true;
  }

  /** Takes the deferred request, if it is still pending: 429 rate_limit_exceeded when its windows are exhausted. */
  async takeDeferred(): Promise<void> {
    if (this.deferred) await this.take();
  }

  /**
   * Before a provider call: takes `estimate` tokens from the token windows (all or nothing), else 429
   * rate_limit_exceeded with the token window's headers; returns the tokens taken. A deferred request is taken in the
   * same call; when that call is refused nothing was taken, and the two steps run one after the other (request, then
   * tokens), so a refusal says exactly what it would have said with the request taken first. The operator has no
   * token windows of its own: its own request window is taken first, apart.
   */
  async reserve(estimate: number): Promise<number> {
    this.beforeReserve = this.binding;
    const windows = this.tokenOwner();
    if (!windows) {
      await this.takeDeferred();
      this.reservation = { tokens: 0, settled: false };
      return 0;
    }
    const tokens = Math.max(0, Math.ceil(estimate));
    const now = this.clock.now();
    if (this.deferred) {
      // The pending request is no longer pending once the operator's window is taken: a refusal must not take it again.
      if (windows.kind === 'project') {
        this.deferred = false;
        this.apply(await this.limiter.takeRequest({ kind: 'operator' }, now));
      }
      const both = await this.limiter.takeRequestAndTokens(windows, now, tokens);
      this.deferred = false;
      if (both.allowed) {
        this.apply(both);
        this.reservation = { tokens: tokensTaken(both), settled: false };
        return this.reservation.tokens;
      }
      this.apply(await this.limiter.takeRequest(windows, now));
      this.requestTaken = this.binding;
    }
    const decision = await this.limiter.takeTokens(windows, this.clock.now(), tokens);
    this.apply(decision);
    this.reservation = { tokens: tokensTaken(decision), settled: false };
    return this.reservation.tokens;
  }

  /**
   * After the call: corrects the token windows from the reservation to the real usage (usage above the estimate leaves
   * the windows in debt). Settling twice, or with nothing reserved, is a no-op.
   */
  async settle(actualTokens: number): Promise<void> {
    const reservation = this.reservation;
    if (!reservation || reservation.settled) return;
    reservation.settled = true;
    const windows = this.tokenOwner();
    if (!windows) return;
    const delta = Math.max(0, Math.ceil(actualTokens)) - reservation.tokens;
    if (delta === 0) return;
    this.binding = (await this.limiter.adjustTokens(windows, this.clock.now(), delta)).state;
  }

  /** Gives every reserved token back (a cache hit, a failed call): settles to 0. */
  refund(): Promise<void> {
    return this.settle(0);
  }

  /**
   * A cache hit (one request, zero tokens) after a reservation asked for speculatively in the same call as the lookup:
   * the request stays taken, the tokens go back. A reservation refused for its tokens had taken the request alone:
   * the headers describe the windows as that left them, as if the request had been taken by itself.
   */
  async keepRequestOnly(): Promise<void> {
    if (this.deferred) return this.take();
    if (this.reservation) return this.refund();
    if (this.requestTaken !== undefined) this.binding = this.requestTaken;
  }

  /**
   * As if the reservation had never been asked for (a request refused for another reason meanwhile): the tokens
   * back, and the headers describe the windows as they were before it.
   */
  async withdraw(): Promise<void> {
    await this.refund();
    if (this.beforeReserve !== undefined) this.binding = this.beforeReserve;
  }
}
