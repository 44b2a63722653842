import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher } from 'undici';
import type { EgressPolicy } from '../../kernel/egress.ts';
import { eventEnvelopeJson } from '../../domain/webhooks/envelope.ts';
import type { SecretBox } from '../../kernel/secret-box.ts';
import { signatureHeader } from '../../domain/webhooks/signing.ts';
import type { Claimed } from './claim.ts';

/** What one HTTP attempt gave: error null when the receiver answered 2xx. */
export interface SendResult {
  responseStatus: number | null;
  durationMs: number;
  error: string | null;
}

const RESPONSE_DRAIN_LIMIT = 64 * 1024;
const MAX_ERROR_LENGTH = 500;
/** Webhooks whose vetted url and opened secret are kept (see target()). */
const MAX_TARGETS = 1_000;

/** Signs and POSTs a delivery's envelope to its webhook, through the egress guard, within the receiver's deadline. */
export class DeliverySender {
  private readonly agent: Agent;
  private readonly targets = new Map<string, { url: URL; secret: string }>();

  constructor(
    private readonly deps: { secretBox: SecretBox; egress: EgressPolicy },
    private readonly timeoutMs: number,
    ca?: string | Buffer | Array<string | Buffer>,
  ) {
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      // Per receiver origin: a receiver that answers in 5 ms takes ~6,000 deliveries/s over these.
      connections: 32,
      connect: {
        timeout: timeoutMs,
        // The address connected to is the one the egress policy vetted; TLS still verifies the url's hostname.
        lookup: deps.egress.lookup,
        ...(ca ? { ca } : {}),
      },
    });
  }

  /**
   * The webhook's vetted url and opened signing secret, kept per webhook (keyed by its ciphertext and url too, so a
   * changed webhook is never served from an old entry): every delivery would otherwise decrypt the secret and parse
   * and vet the url again. The connect step vets hostnames on every connection; a literal address does no lookup, so it
   * is checked here, against the process's allowlist (which may have changed since the webhook was created).
   */
  private target(row: Claimed): { url: URL; secret: string } {
    const cacheKey = `${row.webhookId}\n${row.secretEncrypted}\n${row.url}`;
    const hit = this.targets.get(cacheKey);
    if (hit) return hit;
    const url = new URL(row.url);
    this.deps.egress.assertLiteralAllowed(url);
    const target = { url, secret: this.deps.secretBox.open(row.secretEncrypted, row.webhookId) };
    if (this.targets.size >= MAX_TARGETS) this.targets.clear();
    this.targets.set(cacheKey, target);
    return target;
  }

  /** One HTTP attempt, signed for `attemptedAt`; never throws (a failure is the result's error). */
  async send(row: Claimed, attemptedAt: Date): Promise<SendResult> {
    const started = performance.now();
    let responseStatus: number | null = null;
    let error: string | null = null;
    try {
      const body = eventEnvelopeJson({
        id: row.eventId,
        type: row.type,
        createdAt: new Date(row.eventCreatedAt),
        projectId: row.projectId,
        data: JSON.parse(row.dataJson),
      });
      const { url, secret } = this.target(row);
      responseStatus = await this.post(url, body, {
        'content-type': 'application/json',
        'user-agent': 'svc-webhooks/1',
        'x-svc-signature': signatureHeader(secret, body, Math.floor(attemptedAt.getTime() / 1000)),
        'x-svc-event': row.type,
        'x-svc-delivery-id': row.id,
        'x-svc-webhook-id': row.webhookId,
      });
      if (responseStatus >= 300 && responseStatus < 400) error = 'redirect not followed';
      else if (responseStatus < 200 || responseStatus >= 300) error = `receiver answered ${responseStatus}`;
    } catch (err) {
      error = describeError(err, performance.now() - started >= this.timeoutMs - 5);
    }
    const durationMs = Math.max(0, Math.round(performance.now() - started));
    return { responseStatus, durationMs, error };
  }

  /**
   * POSTs and resolves with the receiver's status once its body is read (up to RESPONSE_DRAIN_LIMIT, so that the
   * kept-alive connection can be reused; past it the connection is closed). On undici's dispatch API: no response
   * stream, and one timer for the whole attempt instead of an AbortSignal.timeout per delivery.
   */
  private post(url: URL, body: string, headers: Record<string, string>): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      let status = 0;
      let drained = 0;
      let done = false;
      let controller: Dispatcher.DispatchController | null = null;
      let timedOut: Error | null = null;
      const finish = (err: Error | null) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve(status);
      };
      const timer = setTimeout(() => {
        timedOut = new DOMException('the receiver did not answer within the deadline', 'TimeoutError');
        if (controller) controller.abort(timedOut);
        else finish(timedOut);
      }, this.timeoutMs);
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart: (c) => {
          controller = c;
          if (timedOut) c.abort(timedOut);
        },
        onResponseStart: (_c, statusCode) => {
          status = statusCode;
        },
        onResponseData: (c, chunk) => {
          drained += chunk.length;
          if (drained > RESPONSE_DRAIN_LIMIT) {
            // The answer is known; the rest of an oversized body is not read (the connection is closed instead).
            finish(null);
            c.abort(new Error('response body over the drain limit'));
          }
        },
        onResponseEnd: () => finish(null),
        // After the status line, a body cut short or slow still leaves the receiver's answer (as draining it did).
        onResponseError: (_c, err) => finish(status !== 0 ? null : err),
      };
      this.agent.dispatch(
        { origin: url.origin, path: `${url.pathname}${url.search}`, method: 'POST', headers, body, headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs },
        handler,
      );
    });
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => {});
  }
}

function describeError(err: unknown, timedOut: boolean): string {
  const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e?.code ?? e?.cause?.code;
  let text: string;
  if (timedOut || e?.name === 'TimeoutError' || e?.name === 'AbortError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    text = 'timeout: no response within the deadline';
  } else if (e?.name === 'EgressRefused' || code === 'EGRESS_REFUSED') {
    text = `egress refused: ${e.message ?? e.cause?.message}`;
  } else if (code === 'ECONNREFUSED') {
    text = 'connection refused';
  } else {
    text = `${code ? `${code}: ` : ''}${e?.message ?? String(err)}`;
  }
  return text.slice(0, MAX_ERROR_LENGTH);
}
