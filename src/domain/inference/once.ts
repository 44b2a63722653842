import { createHash } from 'node:crypto';
import type { Db } from '../../db/client.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { Clock } from '../../kernel/clock.ts';
import { RateLimitTicket, type TicketLimiter } from '../../limits/requests.ts';
import { headerNames, makeCtx, type Caller, type Ctx } from '../context.ts';
import type { IdempotencyStore } from '../idempotency/store.ts';
import type { RetainedContent } from '../privacy/stage.ts';
import type { InferencePorts } from './ports.ts';
import { createInference, type InferenceInput, type InferenceResult } from './service.ts';

/**
 * A model call that background work makes at most once, however often its worker dies and is resumed (the evaluation
 * runner's cases, the verticals' jobs). The call is begun under an Idempotency-Key of its own in the gateway's
 * idempotency store (sealed; a zero-retention project's answer is not kept) before the provider is asked, and its
 * answer is stored there once its usage record is durable. A worker that resumes the work then finds:
 * - the answer stored: it is replayed, nothing is called or charged again;
 * - no usage record of the call begun last: it was not charged, and is made again (once a call begun then has surely
 *   ended, and a dead process's usage-stream entries have been taken over);
 * - a usage record without a stored answer (a crash in the instant between the two): the answer is taken from the
 *   retained inference written with the usage record (CONTRACT §12, standard retention), else the call is reported
 *   `interrupted`, charged once and never made again.
 */

/** What one model call left: its answer or error, with its figures (what the idempotency store keeps for a replay). */
export type CallResult =
  | {
      ok: true;
      content: string;
      requestId: string;
      /** The inference's `inf_` id (absent from answers stored before it was kept). */
      inferenceId?: string;
      promptTokens: number;
      completionTokens: number;
      costMicros: string;
      latencyMs: number;
      /** Zero retention: the answer was not kept, only its figures. */
      dropped?: true;
    }
  | { ok: false; code: string; message: string; requestId: string; /** The field the error names, when it names one. */ param?: string };

/** What a call made once needs from outside: the inference pipeline, the key's limiter, where calls are begun. */
export interface OncePorts {
  inference: InferencePorts;
  limiter: TicketLimiter;
  /** The gateway's idempotency store (sealed): where each call is begun and its answer kept. */
  idempotency: IdempotencyStore;
  /**
   * Resolves once the usage records this process accepted are durable: with Redis, the stream entry createInference
   * awaited already is; without, the in-process batch is written first (a quick local write).
   */
  durable(): Promise<unknown>;
  /** SVC_ROUTING_TIMEOUT_MS: a call begun before a crash has surely ended this long after it began (plus a margin). */
  routingTimeoutMs: number;
  /** With a Redis usage stream: how long a dead consumer's entries may wait before they are written (0 without). */
  outcomeTakeoverMs: number;
}

/** Where the work records the attempts of one call (a row the worker holds a lease on). */
export interface CallLedger {
  /** The attempt of this call begun last (its request id, and when), or null when none was. */
  last(): Promise<{ requestId: string; startedAt: Date | null } | null>;
  /**
   * Records a new attempt right before the provider is asked, and returns its request id; null when the work is no
   * longer this worker's (its lease passed and another worker took it over, or it was canceled): no call is made.
   */
  begin(): Promise<string | null>;
}

export interface OnceCall {
  /** The project: the Idempotency-Key's namespace (CONTRACT §5). */
  projectId: string;
  /** The call's Idempotency-Key, the same on every worker that runs the work (`svc-eval:<run>:<case>:<part>`, …). */
  key: string;
  input: InferenceInput;
  /** What the key is checked against; default: a hash of `input`. */
  requestHash?: string;
  /** The key the work runs as. */
  caller: Caller;
  /** The work was begun by a worker that stopped: look for the usage record of its last call before calling. */
  resuming: boolean;
  ledger: CallLedger;
  /** CONTRACT §12 zero retention: the stored result keeps the figures, not the answer. */
  dropContent: boolean;
  /**
   * Errors after which the call is forgotten (the key abandoned) and thrown, for the work to try again later; always
   * rate_limit_exceeded (nothing was charged). Any other SvcError is the call's result, stored and replayed.
   */
  rerun?: (err: SvcError) => boolean;
  /**
   * The call itself, when it is not createInference (a batch's embeddings line): what it answers is kept as the
   * result's `content` (text the caller reads back).
   */
  invoke?: (ctx: Ctx, ticket: RateLimitTicket) => Promise<Pick<InferenceResult, 'id' | 'content' | 'promptTokens' | 'completionTokens' | 'costMicros'>>;
}

/** How much longer than SVC_ROUTING_TIMEOUT_MS a call may take to end (its usage record handed over). */
const CALL_END_MARGIN_MS = 2_000;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * Makes the call at most once (see above). Returns its result (an answer, or the error it ended with), or null when
 * the work is no longer this worker's. Throws rate_limit_exceeded and the `rerun` errors (nothing was charged; the
 * call is forgotten), and any unexpected error.
 */
export async function inferOnce(ports: OncePorts, env: { db: Db; clock: Clock }, call: OnceCall): Promise<CallResult | null> {
  const { db, clock } = env;
  const { idempotency: idem } = ports;
  const hash = call.requestHash ?? sha256(JSON.stringify(call.input));
  let resuming = call.resuming;
  let abandoned = false;
  for (;;) {
    const begun = await idem.begin(call.projectId, call.key, hash, clock.now());
    if (begun.kind === 'replay') return JSON.parse(begun.body) as CallResult;
    // A finished call of another request under this key: abandoning it (which forgets only a running one) cannot help.
    if (begun.kind === 'conflict' && begun.reason === 'different_request' && abandoned) {
      throw new Error(`the model call ${call.key} was made with another request`);
    }
    // "running" (the worker died during the call) or, past the store's lease, begun afresh: was it charged?
    if (begun.kind === 'conflict' || resuming) {
      resuming = false;
      const settled = await chargedAndLost(ports, env, call);
      if (settled) return settled;
      if (begun.kind === 'conflict') {
        await idem.abandon(call.projectId, call.key);
        abandoned = true;
        continue;
      }
    }
    // Still this worker's right before the provider is asked: a worker that stalled and lost its lease meanwhile
    // leaves the call to the one that took the work over.
    const requestId = await call.ledger.begin();
    if (requestId === null) return null;
    const ctx = makeCtx({ db, clock }, { requestId, caller: call.caller, ip: null, project: headerNames(call.projectId) });
    const ticket = new RateLimitTicket(ports.limiter, clock, call.caller);
    ticket.defer();
    const started = performance.now();
    let result: CallResult;
    try {
      const r = call.invoke ? await call.invoke(ctx, ticket) : await createInference(ports.inference, ctx, ticket, call.input);
      result = {
        ok: true,
        content: r.content,
        requestId,
        inferenceId: r.id,
        promptTokens: r.promptTokens,
        completionTokens: r.completionTokens,
        costMicros: r.costMicros.toString(),
        latencyMs: Math.round(performance.now() - started),
      };
    } catch (err) {
      if (!(err instanceof SvcError) || err.code === 'rate_limit_exceeded' || call.rerun?.(err)) {
        await idem.abandon(call.projectId, call.key);
        throw err;
      }
      result = { ok: false, code: err.code, message: err.message, requestId, ...(err.param !== null ? { param: err.param } : {}) };
    }
    // The answer is kept as soon as its usage record is durable. A restart then finds the answer, or no charge, or (a
    // crash in the instant between) a charge without an answer, which it recovers or reports, never repeats.
    await ports.durable();
    await idem.complete(call.projectId, call.key, 200, JSON.stringify(stored(result, call.dropContent)));
    return result;
  }
}

const stored = (result: CallResult, dropContent: boolean): CallResult =>
  result.ok && dropContent ? { ...result, content: '', dropped: true } : result;

/**
 * The attempt a stopped worker began: if it left a charged usage record, its result is settled without calling again
 * (the key completed with it): the answer from the retained inference when the project keeps content, else
 * `interrupted`. Null: it was not charged, so the call may be made again. Before concluding that, the record is
 * looked for until a call begun at the attempt's start has surely ended (SVC_ROUTING_TIMEOUT_MS after it: a worker
 * that lost its lease while stalled may still be in that call) and, with Redis, until the usage-stream entries of a
 * dead consumer have been taken over and written (SVC_OUTCOME_LEASE_MS).
 */
async function chargedAndLost(ports: OncePorts, env: { db: Db; clock: Clock }, call: OnceCall): Promise<CallResult | null> {
  const last = await call.ledger.last();
  if (!last) return null; // no attempt of this call was begun: nothing can have been charged
  const { requestId } = last;
  const callEnds = last.startedAt ? last.startedAt.getTime() + ports.routingTimeoutMs + CALL_END_MARGIN_MS - env.clock.now() : 0;
  const takeover = ports.outcomeTakeoverMs;
  const until = Date.now() + Math.min(Math.max(callEnds, takeover, 0), ports.routingTimeoutMs + CALL_END_MARGIN_MS + takeover);
  for (;;) {
    const record = await env.db.usageRecord.findFirst({ where: { requestId, projectId: call.projectId } });
    // Charged: a success, or a failure that was paid for (a structured answer that never validated).
    if (record && (record.status === 'succeeded' || record.costMicros > 0n)) {
      const settled: CallResult =
        record.status === 'succeeded'
          ? ((call.dropContent ? null : await retainedAnswer(ports, env.db, call.projectId, requestId, record.latencyMs)) ?? {
              ok: false,
              code: 'interrupted',
              message: 'The worker stopped after the model answered and before the answer was stored; the call was charged once and is not made again.',
              requestId,
            })
          : {
              ok: false,
              code: record.errorCode ?? 'internal_error',
              message: `The call failed (${record.errorCode ?? 'internal_error'}) after it was charged, before the worker stopped; it is not made again.`,
              requestId,
            };
      await ports.idempotency.complete(call.projectId, call.key, 200, JSON.stringify(stored(settled, call.dropContent)));
      return settled;
    }
    if (record || Date.now() >= until) return null;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The answer of a charged call as its retained inference keeps it (written with its usage record); null: none kept. */
async function retainedAnswer(ports: OncePorts, db: Db, projectId: string, requestId: string, latencyMs: number): Promise<CallResult | null> {
  const row = await db.retainedInference.findFirst({ where: { requestId, projectId, status: 'succeeded', sealed: { not: null } } });
  if (!row?.sealed) return null;
  const response = (JSON.parse(ports.inference.privacy.sealer.open(row.sealed, row.id)) as RetainedContent).response;
  if (!response) return null;
  return {
    ok: true,
    content: response.content,
    requestId,
    inferenceId: row.id,
    promptTokens: response.promptTokens,
    completionTokens: response.completionTokens,
    costMicros: response.costMicros,
    latencyMs,
  };
}
