import { errors as undiciErrors, type Dispatcher, type Pool } from 'undici';
import type { ProviderSignal } from './types.ts';

/** A provider's answer read to its end: what every call that does not stream needs of it. */
export interface WholeAnswer {
  statusCode: number;
  /** The body as UTF-8 text (a leading byte-order mark dropped, as undici's body.text() does). */
  text: string;
}

export interface WholeRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
  signal: ProviderSignal;
}

/**
 * One POST through a keep-alive pool, its answer read whole, on undici's dispatch API: no response stream, no body
 * mixin and no promise per chunk. pool.request() wraps every answer in a Readable stream, which cost the api process
 * 15-25 µs per call against a local server (same answers, same pool); a non-streaming call reads the body whole anyway.
 *
 * As postThroughPool (upstream.ts): sent again once, on a fresh connection, when the connection it went out on was
 * closed by the provider before any answer ("other side closed"); the body is text, so it is sent again as it was.
 * The hop's signal aborts it; the rejection is then the signal's reason (undici's RequestAbortedError without one).
 * Failures are undici's own errors (HeadersTimeoutError, BodyTimeoutError, SocketError, …), as pool.request's are.
 */
export async function postWhole(pool: Pool, req: WholeRequest): Promise<WholeAnswer> {
  const first = new WholeAnswerHandler(req.signal);
  try {
    return await first.send(pool, req);
  } catch (err) {
    if (!(err instanceof undiciErrors.SocketError) || req.signal.aborted || first.answered) throw err;
    return new WholeAnswerHandler(req.signal).send(pool, req);
  }
}

type Controller = Dispatcher.DispatchController;

class WholeAnswerHandler implements Dispatcher.DispatchHandler {
  /** Whether the provider started answering (status line and headers read). */
  answered = false;
  private statusCode = 0;
  private chunks: Buffer[] = [];
  private controller: Controller | null = null;
  private resolve!: (answer: WholeAnswer) => void;
  private reject!: (err: unknown) => void;
  private readonly onAbort = () => this.controller?.abort(this.abortReason());

  constructor(private readonly signal: ProviderSignal) {}

  send(pool: Pool, req: WholeRequest): Promise<WholeAnswer> {
    return new Promise<WholeAnswer>((resolve, reject) => {
      if (this.signal.aborted) {
        reject(this.abortReason());
        return;
      }
      this.resolve = resolve;
      this.reject = reject;
      listen(this.signal, this.onAbort);
      pool.dispatch({ method: 'POST', path: req.path, headers: req.headers, body: req.body }, this);
    });
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    if (this.signal.aborted) controller.abort(this.abortReason());
  }

  onResponseStart(_controller: Controller, statusCode: number): void {
    this.answered = true;
    this.statusCode = statusCode;
  }

  onResponseData(_controller: Controller, chunk: Buffer): void {
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    unlisten(this.signal, this.onAbort);
    const chunks = this.chunks;
    let text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    this.resolve({ statusCode: this.statusCode, text });
  }

  onResponseError(_controller: Controller, err: Error): void {
    unlisten(this.signal, this.onAbort);
    this.reject(err);
  }

  private abortReason(): Error {
    return (this.signal.reason as Error | undefined) ?? new undiciErrors.RequestAbortedError();
  }
}

/** An AbortSignal or the router's EventEmitter signal (providers/router.ts), as undici itself listens to either. */
function listen(signal: ProviderSignal, fn: () => void): void {
  if ('addEventListener' in signal) signal.addEventListener('abort', fn, { once: true });
  else signal.once('abort', fn);
}

function unlisten(signal: ProviderSignal, fn: () => void): void {
  if ('removeEventListener' in signal) signal.removeEventListener('abort', fn);
  else signal.removeListener('abort', fn);
}
