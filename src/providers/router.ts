import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Clock } from '../kernel/clock.ts';
import { picosPerToken, type PicoPrice } from '../kernel/money.ts';
import { SvcError } from '../errors/svc-error.ts';
import type { ModelSpec, ProviderSpec } from './config-file.ts';
import { createProvider } from './registry-factory.ts';
import type { MockScript } from './mock.ts';
import {
  ProviderError,
  type Completion,
  type EmbeddingRequest,
  type EmbeddingResult,
  type Provider,
  type ProviderRequest,
  type ProviderSignal,
  type StreamPart,
} from './types.ts';

/** One provider serving one model: what routing chooses between. `id` is the spec's route, "<provider>/<model>". */
export interface Route {
  id: string;
  provider: Provider;
  model: ModelSpec & PicoPrice;
  /** Input plus output price per token (pico-dollars): the order of "cheapest". */
  price: bigint;
}

export interface RouterOptions {
  clock: Clock;
  /** Consecutive failures that open a provider's circuit. */
  failureThreshold: number;
  /** How long an open circuit skips its provider before one probe (on the injected clock). */
  cooldownMs: number;
  /** All hops of one inference together (CONTRACT §8: 408 routing_timeout). */
  routingTimeoutMs: number;
  log?: Logger;
  /** For the weighted strategy (domain/routing/plan.ts); tests pass a seeded one. */
  random?: () => number;
  /** Watches each provider hop (metrics, trace spans: src/observability); none by default. */
  hops?: HopObserver;
  /** What the mock kind answers by script (an evaluation's judge call: domain/evals/judge.ts); none by default. */
  mockScript?: MockScript;
}

/** How one provider hop ended, as a HopObserver sees it. */
export type HopOutcome = 'ok' | 'error' | 'timeout' | 'rejected' | 'aborted';

/**
 * Told of each hop as it starts; the function it returns is called once when the hop ends, with the provider's answer
 * (a Completion, or the accepted stream) or the error. Called on the request path: it must not block or throw.
 */
export interface HopObserver {
  start(route: Route, stream: boolean): (outcome: HopOutcome, result: unknown) => void;
}

/**
 * One provider hop of one inference as its caller's hop log keeps it (the request detail's timeline:
 * domain/usage/timeline.ts). Recorded at the HopObserver's points; a route skipped for its open circuit is a hop too.
 */
export interface ProviderHop {
  route: string;
  model: string;
  /** performance.now() when it began (the log's owner rebases it on the request's start). */
  startMs: number;
  durationMs: number;
  outcome: HopOutcome | 'circuit_open';
  /** What failed: `http_<status>`, or the error's kind (`connection`, `timeout`, `protocol`, …); null when ok. */
  error: string | null;
}

function logHop(log: ProviderHop[], route: Route, startMs: number, outcome: ProviderHop['outcome'], err: unknown): void {
  const error =
    outcome === 'ok' || outcome === 'circuit_open'
      ? null
      : err instanceof ProviderError
        ? err.status !== null ? `http_${err.status}` : err.kind
        : outcome;
  log.push({ route: route.id, model: route.model.id, startMs, durationMs: outcome === 'circuit_open' ? 0 : performance.now() - startMs, outcome, error });
}

function hopOutcome(ended: HopEnd, err: unknown): HopOutcome {
  if (ended === 'client') return 'aborted';
  if (ended === 'deadline' || ended === 'hop' || (err instanceof ProviderError && err.kind === 'timeout')) return 'timeout';
  return err instanceof ProviderError && !err.retryable ? 'rejected' : 'error';
}

/** A routing failure, with the last route tried (for the usage record), if any. */
export class RoutingError extends SvcError {
  constructor(
    code: 'routing_timeout' | 'model_unavailable' | 'invalid_request',
    readonly route: Route | null,
    message: string,
    param: string | null = null,
  ) {
    super(code, { message, param });
  }
}

type HopEnd = 'client' | 'deadline' | 'hop' | null;

/**
 * A hop's abort signal: what undici and the adapters read of one (ProviderSignal), as an EventEmitter rather than an
 * AbortController with EventTarget listeners on every provider call.
 */
class HopSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

/** The signal of one provider call: the client leaving, the hop's own timeout, or the routing deadline aborts it. */
class Hop {
  readonly signal = new HopSignal();
  private timer: NodeJS.Timeout | null;
  ended: HopEnd = null;
  private readonly onClientAbort = () => this.abort('client');

  constructor(
    private readonly client: AbortSignal | undefined,
    ms: number,
    private readonly timerMeans: 'deadline' | 'hop',
  ) {
    this.timer = setTimeout(() => this.abort(this.timerMeans), Math.max(1, Math.ceil(ms)));
    if (client?.aborted) this.abort('client');
    else client?.addEventListener('abort', this.onClientAbort, { once: true });
  }

  private abort(why: Exclude<HopEnd, null>): void {
    if (this.ended) return;
    this.ended = why;
    this.signal.abort(new DOMException(`provider call aborted (${why})`, 'AbortError'));
  }

  /** The provider accepted a stream: no more deadline, but a client that leaves still stops it. */
  keepForClientOnly(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.client?.removeEventListener('abort', this.onClientAbort);
  }
}

export function isAbortError(err: unknown): boolean {
  return (err instanceof Error || err instanceof DOMException) && (err as Error).name === 'AbortError';
}

export interface Routed<T> {
  route: Route;
  value: T;
  /** Providers tried, in order, including the one that answered. */
  attempts: string[];
}

/**
 * The providers of SVC_PROVIDERS_FILE, their routes and circuit breakers, and the fallback loop: each hop goes to the
 * next route whose circuit lets it through; 5xx, connection errors and timeouts fall through to the next; a 400 from the
 * provider does not (the request itself is wrong). Circuits are per replica (each learns a provider's health itself).
 */
export class ProviderRegistry {
  readonly routes: readonly Route[];
  private readonly byModel = new Map<string, Route[]>();
  private readonly byId = new Map<string, Route>();
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly providers: Provider[];
  /** The draw of the weighted strategy (domain/routing/plan.ts); RouterOptions.random, else Math.random. */
  readonly random: () => number;

  constructor(
    specs: readonly ProviderSpec[],
    private readonly opts: RouterOptions,
    make: (spec: ProviderSpec) => Provider = (spec) => createProvider(spec, opts.mockScript),
  ) {
    this.random = opts.random ?? Math.random;
    this.providers = specs.map(make);
    const routes: Route[] = [];
    specs.forEach((spec, i) => {
      const provider = this.providers[i]!;
      this.breakers.set(provider.name, new CircuitBreaker(opts.failureThreshold, opts.cooldownMs, opts.clock));
      for (const m of spec.models) {
        const model: ModelSpec & PicoPrice = { ...m, inputPicos: picosPerToken(m.inputPerMtok), outputPicos: picosPerToken(m.outputPerMtok) };
        if (m.cacheReadPerMtok !== undefined) model.cacheReadPicos = picosPerToken(m.cacheReadPerMtok);
        if (m.cacheWritePerMtok !== undefined) model.cacheWritePicos = picosPerToken(m.cacheWritePerMtok);
        const route: Route = { id: `${provider.name}/${m.id}`, provider, model, price: model.inputPicos + model.outputPicos };
        routes.push(route);
        this.byId.set(route.id, route);
      }
    });
    this.routes = Object.freeze(routes);
    for (const r of byPrice([...routes])) {
      const list = this.byModel.get(r.model.id) ?? [];
      list.push(r);
      this.byModel.set(r.model.id, list);
    }
  }

  isKnownModel(modelId: string): boolean {
    return this.byModel.has(modelId);
  }

  /** A configured model's type (CONTRACT §9: chat or embedding), undefined for an unknown model. */
  modelType(modelId: string): ModelSpec['type'] | undefined {
    return this.byModel.get(modelId)?.[0]?.model.type;
  }

  /** Every configured model id, sorted. */
  modelIds(): string[] {
    return [...this.byModel.keys()].sort();
  }

  /** The providers serving a model, cheapest first (ties in file order). */
  routesForModel(modelId: string): Route[] {
    return [...(this.byModel.get(modelId) ?? [])];
  }

  findRoute(providerName: string, modelId: string): Route | undefined {
    return this.byId.get(`${providerName}/${modelId}`);
  }

  hasProvider(name: string): boolean {
    return this.breakers.has(name);
  }

  circuitState(providerName: string): CircuitState | undefined {
    return this.breakers.get(providerName)?.current;
  }

  /** `log`: the caller's hop log (ProviderHop), filled hop by hop (the same for embed and openStream). */
  complete(routes: readonly Route[], req: Omit<ProviderRequest, 'signal' | 'model'>, client?: AbortSignal, log?: ProviderHop[]): Promise<Routed<Completion>> {
    return this.attempt(routes, client, false, (route, signal) => route.provider.complete({ ...req, model: route.model.id, signal }), log);
  }

  /** POST /v1/embeddings: the first route that answers, with the same fallback, circuits and deadlines as chat. */
  embed(routes: readonly Route[], req: Omit<EmbeddingRequest, 'signal' | 'model'>, client?: AbortSignal, log?: ProviderHop[]): Promise<Routed<EmbeddingResult>> {
    return this.attempt(routes, client, false, (route, signal) => {
      if (!route.provider.embed) throw new ProviderError('rejected', `${route.provider.name} (kind ${route.provider.kind}) serves no embeddings`);
      return route.provider.embed({ ...req, model: route.model.id, signal });
    }, log);
  }

  /**
   * Opens a stream on the first route that accepts it (fallback applies until then, within the routing timeout).
   * Afterwards only the client's signal stops it; a failure mid-stream counts against the provider's circuit.
   */
  async openStream(
    routes: readonly Route[],
    req: Omit<ProviderRequest, 'signal' | 'model'>,
    client: AbortSignal,
    hops?: ProviderHop[],
  ): Promise<Routed<AsyncIterable<StreamPart>>> {
    const open = (route: Route, signal: ProviderSignal) => route.provider.openStream({ ...req, model: route.model.id, signal });
    const routed = await this.attempt(routes, client, true, open, hops);
    const breaker = this.breakers.get(routed.route.provider.name)!;
    const hop = routed.hop!;
    const log = this.opts.log;
    const upstream = routed.value;
    const parts = (async function* () {
      try {
        yield* upstream;
      } catch (err) {
        if (!client.aborted) {
          breaker.onFailure();
          log?.warn({ route: routed.route.id, err: (err as Error).message }, 'provider failed mid-stream');
        }
        throw err;
      } finally {
        hop.dispose();
      }
    })();
    return { route: routed.route, value: parts, attempts: routed.attempts };
  }

  private async attempt<T>(
    routes: readonly Route[],
    client: AbortSignal | undefined,
    stream: boolean,
    call: (route: Route, signal: ProviderSignal) => Promise<T>,
    log?: ProviderHop[],
  ): Promise<Routed<T> & { hop?: Hop }> {
    const deadline = performance.now() + this.opts.routingTimeoutMs;
    const attempts: string[] = [];
    let last: Route | null = null;
    let timedOut = 0;
    for (const route of routes) {
      if (client?.aborted) throw client.reason ?? new DOMException('aborted', 'AbortError');
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw this.timeout(last);
      const breaker = this.breakers.get(route.provider.name)!;
      if (!breaker.tryAcquire()) {
        if (log) logHop(log, route, performance.now(), 'circuit_open', null);
        continue;
      }
      attempts.push(route.id);
      last = route;
      const timeoutMs = route.provider.timeoutMs;
      const hop = new Hop(client, Math.min(timeoutMs, remaining), remaining <= timeoutMs ? 'deadline' : 'hop');
      const observed = this.opts.hops?.start(route, stream);
      const startedAt = log ? performance.now() : 0;
      try {
        const value = await call(route, hop.signal);
        observed?.('ok', value);
        if (log) logHop(log, route, startedAt, 'ok', null);
        breaker.onSuccess();
        if (stream) hop.keepForClientOnly();
        else hop.dispose();
        return { route, value, attempts, hop: stream ? hop : undefined };
      } catch (err) {
        hop.dispose();
        if (observed || log) {
          const outcome = hopOutcome(hop.ended, err);
          observed?.(outcome, err);
          if (log) logHop(log, route, startedAt, outcome, err);
        }
        if (hop.ended === 'client') {
          breaker.release();
          throw err;
        }
        if (hop.ended === 'deadline') {
          breaker.onFailure();
          throw this.timeout(route);
        }
        if (err instanceof ProviderError && !err.retryable) {
          // The provider is healthy; the request is not.
          breaker.onSuccess();
          throw new RoutingError('invalid_request', route, `The provider rejected the request: ${err.message}`, err.param);
        }
        breaker.onFailure();
        // The hop's own timer, or the HTTP client's timeout of the same length firing first.
        if (hop.ended === 'hop' || (err instanceof ProviderError && err.kind === 'timeout')) timedOut++;
        this.opts.log?.warn(
          { route: route.id, reason: hop.ended === 'hop' ? 'timeout' : (err as Error).message },
          'provider call failed; falling back',
        );
      }
    }
    // Every hop tried ran into its provider's timeout: the hops exceeded their timeout (spec §7), not an unhealthy provider.
    if (attempts.length > 0 && timedOut === attempts.length) {
      throw this.timeout(last, `The model provider hops timed out: ${attempts.length} provider(s) tried, none answered within its timeout.`);
    }
    throw new RoutingError(
      'model_unavailable',
      last,
      attempts.length === 0
        ? 'No healthy model provider is available: every candidate is out of service (circuit open).'
        : `No healthy model provider is available: ${attempts.length} provider(s) tried, all failed.`,
    );
  }

  private timeout(route: Route | null, message = `The model provider hops exceeded the routing timeout of ${this.opts.routingTimeoutMs} ms.`): RoutingError {
    return new RoutingError('routing_timeout', route, message);
  }

  async close(): Promise<void> {
    await Promise.all(this.providers.map((p) => p.close()));
  }
}

/** Cheapest first (input plus output price per token); equal prices keep the providers file's order. */
export function byPrice(routes: Route[]): Route[] {
  // Array.prototype.sort is stable: equal prices keep the providers file's order.
  return routes.sort((a, b) => (a.price < b.price ? -1 : a.price > b.price ? 1 : 0));
}

// ---- the circuit breaker ----

export type CircuitState = 'closed' | 'open' | 'half_open';

/**
 * One per provider, per replica. Closed: requests flow and consecutive failures are counted; at the threshold it opens.
 * Open: the provider is skipped until the cool-down (on the injected clock) has passed; then half-open lets exactly one
 * probe through. The probe's success closes the circuit, its failure opens it for another cool-down.
 */
export class CircuitBreaker {
  private state: CircuitState = 'closed';
  private failures = 0;
  private openedAt = 0;
  private probing = false;

  constructor(
    private readonly threshold: number,
    private readonly cooldownMs: number,
    private readonly clock: Clock,
  ) {}

  /** The state as a caller would see it now (an open circuit past its cool-down reads half_open). */
  get current(): CircuitState {
    if (this.state === 'open' && this.clock.now() - this.openedAt >= this.cooldownMs) return 'half_open';
    return this.state;
  }

  /** Whether a request may go to the provider now; a true in half-open makes this request the probe. */
  tryAcquire(): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (this.clock.now() - this.openedAt < this.cooldownMs) return false;
      this.state = 'half_open';
    }
    if (this.probing) return false;
    this.probing = true;
    return true;
  }

  onSuccess(): void {
    this.state = 'closed';
    this.failures = 0;
    this.probing = false;
  }

  onFailure(): void {
    this.probing = false;
    if (this.state === 'half_open') {
      this.open();
      return;
    }
    this.failures += 1;
    if (this.state === 'closed' && this.failures >= this.threshold) this.open();
  }

  /** The call ended without a verdict on the provider's health (the client left): let another request probe. */
  release(): void {
    this.probing = false;
  }

  private open(): void {
    this.state = 'open';
    this.openedAt = this.clock.now();
    this.failures = 0;
  }
}
