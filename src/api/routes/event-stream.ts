import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CacheStatus, InferenceResult, InferenceStream, StreamEvent } from '../../domain/inference/service.ts';
import type { SvcError } from '../../errors/svc-error.ts';
import { errorBody, routeErrorBody } from '../error-body.ts';
import { keptAnswer } from '../hooks/idempotency.ts';

/**
 * How one surface writes a stream: svc events on /v1/inference, OpenAI chunks on /v1/chat/completions, Anthropic's
 * events on /v1/messages, Gemini's partial responses on :streamGenerateContent.
 */
export interface StreamFormat {
  start(head: InferenceStream['head']): string[];
  event(e: StreamEvent): string[];
  /** After the last event of a stream that did not fail. */
  end(): string[];
  /** The JSON an idempotent retry of a finished stream gets back (one object, not a stream). */
  replay(result: InferenceResult): unknown;
  /**
   * Set: the writer answers an error after the first token itself, as the route answers any error (its errorShape:
   * Anthropic's, Google's, else the spec's error object), in one SSE event (named `event` when given), and writes
   * nothing after it (no end()). `rename` puts the error's field in the protocol's names first. Unset: the format's
   * event() gets the error event.
   */
  errors?: { event?: string; rename?: (err: SvcError) => SvcError };
}

/** An error after the first token, as the route's error shape in one event. */
function errorEvent(req: FastifyRequest, error: SvcError, how: NonNullable<StreamFormat['errors']>): string {
  const err = how.rename ? how.rename(error) : error;
  return sse(routeErrorBody(req, err.http, errorBody(req, err.code, err.message, err.param)), how.event);
}

export const sse = (data: unknown, event?: string): string =>
  `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

/**
 * The headers an answer carries for its cache status (`reply.headers(cacheHeaders[result.cacheStatus])`, whole or
 * streamed, on every surface): X-Svc-Cache `hit` or `miss` when caching applied; `unavailable` when the store did not
 * answer and the request went on uncached (the spec's cache_unavailable: no retry needed). None when the request did
 * not ask for caching. A table, so that a whole answer's route reads it without entering the stream writer.
 */
export const cacheHeaders: Readonly<Record<CacheStatus, Readonly<Record<string, string>>>> = Object.freeze({
  off: Object.freeze({}),
  hit: Object.freeze({ 'X-Svc-Cache': 'hit' }),
  miss: Object.freeze({ 'X-Svc-Cache': 'miss' }),
  unavailable: Object.freeze({ 'X-Svc-Cache': 'unavailable' }),
});

/**
 * Server-sent events for `stream: true`. A client that goes away aborts the provider call (the signal reaches undici);
 * the service records the usage all the same. Errors before the first token are ordinary JSON errors.
 *
 * Idempotency-Key: the generic hook cannot keep a stream, so the route takes the record over: while the stream runs a
 * duplicate gets 409; once it finishes, the final result is stored and a retry gets it as one JSON object with
 * Idempotent-Replayed: true (nothing runs or is charged again). A stream that fails or is cut off is forgotten, so a
 * retry runs again.
 */
export async function sendEventStream(
  req: FastifyRequest,
  reply: FastifyReply,
  start: (signal: AbortSignal) => Promise<InferenceStream>,
  format: StreamFormat,
): Promise<FastifyReply> {
  const controller = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableFinished) controller.abort(new DOMException('the client closed the connection', 'AbortError'));
  };
  reply.raw.on('close', onClose);
  const idem = req.idempotency;
  let stream: InferenceStream;
  try {
    stream = await start(controller.signal);
  } catch (err) {
    reply.raw.off('close', onClose);
    if (controller.signal.aborted) {
      // The client left before the first token (its usage is recorded): nobody to answer, nothing to replay.
      req.idempotency = undefined;
      if (idem) await req.server.idempotencyStore.abandon(idem.scope, idem.key).catch(() => {});
      reply.hijack();
      reply.raw.destroy();
      return reply;
    }
    throw err;
  }
  req.idempotency = undefined;
  const store = req.server.idempotencyStore;
  const log = req.log;

  async function* body(): AsyncGenerator<string> {
    let replay: unknown = null;
    let failed = false;
    try {
      for (const s of format.start(stream.head)) yield s;
      for await (const e of stream.events) {
        if (e.type === 'done') replay = format.replay(e.result);
        if (e.type === 'error' && format.errors) {
          failed = true;
          yield errorEvent(req, e.error, format.errors);
          continue;
        }
        for (const s of format.event(e)) yield s;
      }
      if (!failed) for (const s of format.end()) yield s;
    } finally {
      reply.raw.off('close', onClose);
      if (idem) {
        try {
          if (replay !== null) {
            const kept = keptAnswer(req, 200, JSON.stringify(replay));
            await store.complete(idem.scope, idem.key, kept.status, kept.body);
          }
          else await store.abandon(idem.scope, idem.key);
        } catch (err) {
          log.error({ err }, 'could not settle the Idempotency-Key of a stream');
        }
      }
    }
  }

  reply
    .code(200)
    .header('Content-Type', 'text/event-stream; charset=utf-8')
    .header('Cache-Control', 'no-cache')
    .header('X-Accel-Buffering', 'no')
    .headers(cacheHeaders[stream.head.cacheStatus]);
  return reply.send(Readable.from(body(), { objectMode: false }));
}
