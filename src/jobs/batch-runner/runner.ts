import { createHash } from 'node:crypto';
import type { Batch, BatchFile, BatchLine } from '../../generated/prisma/client.ts';
import { Prisma } from '../../generated/prisma/client.ts';
import type { Deps } from '../../deps.ts';
import { claimLeases, renewLease, updateLeased } from '../../db/leases.ts';
import { ERRORS, isErrorCode } from '../../errors/codes.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { Caller } from '../../domain/context.ts';

import { OPERATOR_KEY_ID, keyCaller } from '../../domain/auth/service.ts';
import { SCOPES } from '../../domain/keys/scopes.ts';
import { keyStatus } from '../../domain/keys/service.ts';
import { finishBatch } from '../../domain/batches/finalize.ts';
import { jsonlOf, readChunks } from '../../domain/batches/files.ts';
import { lineParser } from '../../domain/batches/lines.ts';
import { batchPortsOf, type BatchPorts } from '../../domain/batches/ports.ts';
import { errorLine, failedLine, lineRequestIdOf } from '../../domain/batches/service.ts';
import type { BatchEndpoint } from '../../domain/batches/schema.ts';
import type { IdempotencyStore } from '../../domain/idempotency/store.ts';
import { inferOnce, type CallLedger, type CallResult, type OncePorts } from '../../domain/inference/once.ts';
import { chatRequestOfResponse } from '../../domain/inference/responses.ts';
import { createEmbeddings, createInference, type InferenceInput } from '../../domain/inference/service.ts';
import type { EmbeddingsRequest, ResponsesRequest } from '../../domain/inference/schema.ts';
import { oncePorts } from '../model-calls.ts';
import { drainWithLease, LeasedPool } from '../leased-pool.ts';
// The live routes' presenters: a batch's output line carries the body a live call answers, tool_calls and svc included.
import { presentChatCompletion } from '../../domain/inference/protocols/openai.ts';
import { presentResponse } from '../../domain/inference/protocols/responses.ts';

type RunnerDeps = Pick<Deps, 'db' | 'clock' | 'log' | 'limiter' | 'ports' | 'outcomes' | 'redis' | 'config' | 'webhooks'>;

export interface BatchRunnerOptions {
  /** How long a claimed batch stays this worker's without a renewal (another worker takes it over after). */
  leaseMs?: number;
  pollMs?: number;
  /** Lines of one batch in flight at once (default 4). */
  concurrency?: number;
  /** Batches worked on at once by this process (default 2). */
  maxBatches?: number;
  /** Waits out a 429's Retry-After. Tests inject one that moves their clock. */
  sleep?: (ms: number) => Promise<void>;
  idempotency?: IdempotencyStore;
  /** Called once the batch shows `finalizing`, before its files are written (tests look at it there, or stop). */
  onFinalizing?: (batchId: string) => Promise<void>;
}

/** The key under which a call's stored content is the live body (a call recovered after a crash keeps only its text). */
const LIVE_BODY = 'svc_batch_body';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const base32 = (bytes: Buffer, n: number) => [...bytes.subarray(0, n)].map((b) => ALPHABET[b & 31]).join('');

/** A line's request id, the same after a restart: the batch's time part, then a hash of (batch, line, attempt). */
export function lineRequestId(batchId: string, index: number, attempt: number): string {
  const linePart = base32(createHash('sha256').update(`${batchId}:${index}`).digest(), 12);
  const tail = base32(createHash('sha256').update(`${batchId}:${index}:${attempt}`).digest(), 4);
  return `req_${batchId.slice(6, 16)}${linePart}${tail}`;
}

/** Lines read per query while a batch runs. */
const LINE_PAGE = 500;

const callKey = (batchId: string, index: number) => `svc-batch:${batchId}:${index}`;

type Stop = { kind: 'cancelled' | 'lost' | 'expired' } | { kind: 'budget'; message: string } | { kind: 'key' };

/**
 * The batch worker (CONTRACT §21). Claims a validating, running or cancelling batch with a lease (renewed while it
 * works; a worker that dies leaves it to the next after the lease), runs its pending lines `concurrency` at a time
 * through the same pipeline as a live call, as the creating key, each through inferOnce (at most one charge per line
 * across crashes), waits out 429s instead of failing a line, stops at budget_exceeded (the rest of the lines fail with
 * it), and ends the batch with its output and error files and batch.completed.
 */
export class BatchRunner {
  private readonly leaseMs: number;
  private readonly concurrency: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly once: OncePorts;
  private readonly ports: BatchPorts;
  private readonly onFinalizing: ((batchId: string) => Promise<void>) | undefined;
  /** The claim-and-fill loop (jobs/leased-pool.ts): up to `maxBatches` batches at once, `concurrency` lines each. */
  private readonly pool: LeasedPool<Batch>;

  constructor(
    private readonly deps: RunnerDeps,
    opts: BatchRunnerOptions = {},
  ) {
    this.leaseMs = opts.leaseMs ?? deps.config.evalLeaseMs;
    this.concurrency = opts.concurrency ?? 4;
    this.onFinalizing = opts.onFinalizing;
    this.pool = new LeasedPool<Batch>(
      deps.log,
      {
        name: 'batch runner',
        idField: 'batch_id',
        claim: async (_limit, working) => {
          const batch = await this.claim(working);
          return batch ? [batch] : [];
        },
        idOf: (batch) => batch.id,
        work: (batch) => this.work(batch),
      },
      { pollMs: opts.pollMs ?? 1_000, maxActive: opts.maxBatches ?? 2 },
    );
    this.sleep = opts.sleep ?? ((ms) => this.pool.sleep(ms));
    this.once = oncePorts(deps, opts.idempotency);
    this.ports = batchPortsOf(deps.ports.inference);
  }

  get owner(): string {
    return this.pool.owner;
  }

  private get stopped(): boolean {
    return this.pool.stopped;
  }

  /**
   * Polls for claimable batches and works on up to `maxBatches` at once (one tenant's long batch does not hold the
   * others back); each batch runs `concurrency` lines at a time.
   */
  start(): void {
    this.pool.start();
  }

  stop(): Promise<void> {
    return this.pool.stop();
  }

  private now(): Date {
    return new Date(this.deps.clock.now());
  }

  /** Works every batch it can claim until none is left; returns how many. */
  async runPending(): Promise<number> {
    return (await this.pool.runPending()).length;
  }

  /** A batch to work on: queued, under way, or finalizing (its worker died while writing the files). */
  private async claim(working: ReadonlySet<string>): Promise<Batch | null> {
    const now = this.now();
    const [row] = await claimLeases(this.deps.db, 'batches', {
      now,
      until: new Date(now.getTime() + this.leaseMs),
      limit: 1,
      owner: this.owner,
      due: Prisma.sql`d.status IN ('validating', 'in_progress', 'finalizing', 'cancelling')${working.size > 0 ? Prisma.sql` AND d.id <> ALL(${[...working]}::text[])` : Prisma.empty}`,
      orderBy: Prisma.sql`d.id`,
      set: Prisma.sql`status = CASE WHEN u.status = 'validating' THEN 'in_progress' ELSE u.status END, in_progress_at = COALESCE(u.in_progress_at, ${now})`,
    });
    return row ? this.deps.db.batch.findUnique({ where: { id: row.id } }) : null;
  }

  /** Renews the lease while the batch is in progress; false when it was cancelled, or taken over. */
  private renew(batch: Batch): Promise<boolean> {
    return renewLease(this.deps.db, 'batches', { id: batch.id, owner: this.owner }, new Date(this.deps.clock.now() + this.leaseMs), { status: 'in_progress' });
  }

  private async callerOf(batch: Batch): Promise<Caller | null> {
    if (batch.keyId === OPERATOR_KEY_ID) return { kind: 'operator', keyId: OPERATOR_KEY_ID, projectId: null, scopes: SCOPES };
    const key = await this.deps.db.apiKey.findFirst({ where: { id: batch.keyId, projectId: batch.projectId } });
    if (!key || keyStatus(key, this.now()) !== 'active') return null;
    return keyCaller(key);
  }

  private async work(batch: Batch): Promise<void> {
    const { db } = this.deps;
    const state: { stop: Stop | null } = { stop: batch.status === 'cancelling' ? { kind: 'cancelled' } : null };
    if (!state.stop) {
      const file = await db.batchFile.findFirst({ where: { id: batch.inputFileId, projectId: batch.projectId } });
      const zero = (await this.ports.retentionOf(batch.projectId)).mode === 'zero';
      let renewedAt = 0;
      // The creating key, looked up again at most once a second (a revoked key stops the batch within that).
      let caller: { at: number; value: Caller | null } | null = null;
      const callerNow = async () => {
        if (!caller || Date.now() - caller.at > 1_000) caller = { at: Date.now(), value: await this.callerOf(batch) };
        return caller.value;
      };
      // The lines left, a page at a time (keyset by index), each page's requests read from the input file's chunks
      // that hold them: memory stays flat whatever the batch's size.
      let after = -1;
      while (!state.stop && !this.stopped) {
        const queue = await db.batchLine.findMany({ where: { batchId: batch.id, status: { in: ['pending', 'started'] }, index: { gt: after } }, orderBy: { index: 'asc' }, take: LINE_PAGE });
        if (queue.length === 0) break;
        after = queue.at(-1)!.index;
        const bodies = file ? await this.bodiesOf(file, batch.endpoint as BatchEndpoint, queue[0]!.index, after) : new Map<number, Record<string, unknown>>();
        await drainWithLease(
          queue,
          this.concurrency,
          () => state.stop !== null || this.stopped,
          async (line) => {
            if (this.deps.clock.now() >= batch.expiresAt.getTime()) {
              state.stop ??= { kind: 'expired' };
              return;
            }
            // A cancel is seen here at most a second late (and always right before a call: the ledger renews).
            if (Date.now() - renewedAt > 1_000) {
              if (!(await this.renew(batch))) {
                state.stop ??= await this.whyNotMine(batch);
                return;
              }
              renewedAt = Date.now();
            }
            const caller = await callerNow();
            if (!caller) {
              state.stop ??= { kind: 'key' };
              return;
            }
            const body = bodies.get(line.index);
            if (!body) {
              await this.finishLine(line, 'failed', errorLine(line.id, line.customId, { code: 'invalid_request', message: 'The line could not be read from the input file.' }), 0n);
              return;
            }
            const stop = await this.runLine(batch, line, body, caller, zero, () => state.stop !== null || this.stopped);
            if (stop) state.stop ??= stop;
          },
          { everyMs: Math.floor(this.leaseMs / 3), renew: () => this.renew(batch) },
        );
      }
    }
    if (this.stopped && !state.stop) return; // shutting down: the lease passes and a worker resumes the batch
    if (state.stop?.kind === 'lost') return;
    if (!state.stop) {
      // OpenAI's `finalizing`: every line has run, the output and error files are being written. A worker that dies
      // here leaves the batch finalizing; the next one to claim it finds no line left and writes the files.
      const now = this.now();
      const entered = await updateLeased(db, 'batches', { id: batch.id, owner: this.owner }, {
        where: { status: { in: ['in_progress', 'finalizing'] } },
        data: { status: 'finalizing', finalizingAt: batch.finalizingAt ?? now, leaseUntil: new Date(now.getTime() + this.leaseMs) },
      });
      if (!entered) {
        // A cancel that came after the last line began: the batch ends cancelled, not completed.
        state.stop = await this.whyNotMine(batch);
        if (state.stop.kind === 'lost') return;
      } else if (this.onFinalizing) {
        await this.onFinalizing(batch.id);
      }
    }
    const stop = state.stop;
    // The lines that will not run: in the error file with why.
    const why =
      stop?.kind === 'budget'
        ? { code: 'budget_exceeded', message: stop.message }
        : stop?.kind === 'expired'
          ? { code: 'batch_expired', message: 'This line was not run before the batch expired (completion window 24h).' }
          : stop?.kind === 'cancelled'
            ? { code: 'batch_cancelled', message: 'This line was not run: the batch was cancelled.' }
            : stop?.kind === 'key'
              ? { code: 'invalid_api_key', message: `The key that created this batch (${batch.keyId}) was revoked or has expired.` }
              : null;
    if (why) {
      for (let after = -1; ; ) {
        const rest = await db.batchLine.findMany({ where: { batchId: batch.id, status: { in: ['pending', 'started'] }, index: { gt: after } }, orderBy: { index: 'asc' }, take: LINE_PAGE, select: { id: true, index: true, customId: true, batchId: true } });
        for (const l of rest) await this.finishLine(l, 'failed', errorLine(l.id, l.customId, why), 0n);
        if (rest.length < LINE_PAGE) break;
        after = rest.at(-1)!.index;
      }
    }
    const status: 'completed' | 'expired' | 'cancelled' = stop?.kind === 'expired' ? 'expired' : stop?.kind === 'cancelled' ? 'cancelled' : 'completed';
    // Writing the files of a long batch can take longer than the lease: it is renewed meanwhile, whatever the status.
    const keepAlive = setInterval(
      () => void renewLease(db, 'batches', { id: batch.id, owner: this.owner }, new Date(this.deps.clock.now() + this.leaseMs)).catch(() => undefined),
      Math.max(250, Math.floor(this.leaseMs / 3)),
    );
    keepAlive.unref();
    let ended: string | null;
    try {
      // A cancel that comes while finalizing: every line ran, and finishBatch ends the batch cancelled with its files.
      const fresh = (await db.batch.findUnique({ where: { id: batch.id } })) ?? batch;
      ended = await finishBatch(db, this.ports, fresh, this.owner, this.now(), status);
    } finally {
      clearInterval(keepAlive);
    }
    if (ended) this.deps.log.info({ batch_id: batch.id, status: ended }, 'batch ended');
  }

  /**
   * The requests of the lines from index `from` to `to`, read from the input file's chunks that hold them (checked
   * again as when the batch was created; a line that no longer passes gets no request).
   */
  private async bodiesOf(file: BatchFile, endpoint: BatchEndpoint, from: number, to: number): Promise<Map<number, Record<string, unknown>>> {
    const bodies = new Map<number, Record<string, unknown>>();
    const parse = lineParser(this.ports, endpoint);
    for await (const l of jsonlOf(readChunks(this.deps.db, this.ports.sealer, file, from))) {
      if (l.index > to) break;
      if (l.index < from) continue;
      const p = parse(l);
      if ('body' in p) bodies.set(l.index, p.body);
    }
    return bodies;
  }

  /** Why the batch is no longer this worker's: cancelled, or taken over by another worker. */
  private async whyNotMine(batch: Batch): Promise<Stop> {
    const current = await this.deps.db.batch.findUnique({ where: { id: batch.id }, select: { status: true } });
    return { kind: current?.status === 'cancelling' ? 'cancelled' : 'lost' };
  }

  /** One line: its call at most once, its result line sealed on its row. Returns a Stop when the batch must stop. */
  private async runLine(batch: Batch, line: BatchLine, body: Record<string, unknown>, caller: Caller, zero: boolean, stopping: () => boolean): Promise<Stop | null> {
    const endpoint = batch.endpoint as BatchEndpoint;
    const input = (endpoint === '/v1/responses' ? chatRequestOfResponse(body as ResponsesRequest) : body) as InferenceInput;
    const withProject = { ...input, project_id: batch.projectId } as InferenceInput;
    type Invoke = NonNullable<Parameters<typeof inferOnce>[2]['invoke']>;
    const invoke: Invoke =
      endpoint === '/v1/embeddings'
        ? async (ctx, ticket) => {
            const r = await createEmbeddings(this.deps.ports.inference, ctx, ticket, { ...(body as EmbeddingsRequest), project_id: batch.projectId });
            return { ...r.result, content: JSON.stringify(r.vectors) };
          }
        : async (ctx, ticket) => {
            // The body a live call answers is what the line's result keeps (tool_calls, finish_reason, svc and all).
            const r = await createInference(this.deps.ports.inference, ctx, ticket, withProject);
            const live = endpoint === '/v1/responses' ? presentResponse(body as ResponsesRequest, r, r) : presentChatCompletion(r);
            return { ...r, content: JSON.stringify({ [LIVE_BODY]: live }) };
          };
    let resuming = line.status === 'started' && line.requestId !== null && line.requestId === lineRequestId(batch.id, line.index, line.attempts);
    let result: CallResult | null = null;
    for (;;) {
      if (stopping()) return null;
      try {
        result = await inferOnce(this.once, this.deps, {
          projectId: batch.projectId,
          key: callKey(batch.id, line.index),
          input: withProject,
          caller,
          resuming,
          ledger: this.ledger(batch, line),
          dropContent: zero,
          invoke,
        });
        break;
      } catch (err) {
        if (!(err instanceof SvcError) || err.code !== 'rate_limit_exceeded') throw err;
        // CONTRACT §21: the window is waited for, never exceeded; nothing was charged.
        resuming = false;
        const seconds = Number(err.headers?.['Retry-After'] ?? '1');
        await this.sleep(Math.max(1, Number.isFinite(seconds) ? seconds : 1) * 1000);
        if (!(await this.renew(batch))) return null;
      }
    }
    if (result === null) return this.whyNotMine(batch); // cancelled or taken over right before the call
    if (!result.ok) {
      const status = isErrorCode(result.code) ? ERRORS[result.code].http : 500;
      // OpenAI's line for a refused request: the live call's status and error body in `response`, `error` null.
      const answer = { status, requestId: result.requestId, code: result.code, message: result.message, param: result.param ?? null, docsBase: this.deps.config.publicUrl };
      await this.finishLine(line, 'failed', failedLine(line.id, line.customId, answer), 0n);
      // CONTRACT §22: an end customer's budget fails that customer's lines only; the key's or the project's stops the batch.
      return result.code === 'budget_exceeded' && result.param !== 'customer' ? { kind: 'budget', message: result.message } : null;
    }
    const cost = BigInt(result.costMicros);
    if (result.dropped) {
      const error = { code: 'interrupted', message: 'The worker stopped after the model answered, and the project keeps no answers (zero retention); the line was charged once and is not run again.' };
      await this.finishLine(line, 'failed', errorLine(line.id, line.customId, error), cost);
      return null;
    }
    let responseBody: unknown;
    try {
      responseBody = this.present(endpoint, String(body.model), result);
    } catch {
      const error = { code: 'interrupted', message: 'The answer could not be recovered after a restart; the line was charged once and is not run again.' };
      await this.finishLine(line, 'failed', errorLine(line.id, line.customId, error), cost);
      return null;
    }
    // Zero retention (set after the batch began): the answer is not kept, only its figures.
    const kept = zero ? { id: result.inferenceId ?? result.requestId, model: String(body.model), usage: { prompt_tokens: result.promptTokens, completion_tokens: result.completionTokens }, content_dropped: true } : responseBody;
    await this.finishLine(line, 'succeeded', { id: lineRequestIdOf(line.id), custom_id: line.customId, response: { status_code: 200, request_id: result.requestId, body: kept }, error: null }, cost);
    return null;
  }

  /** The body a live call would have answered, in OpenAI's shape for the endpoint. */
  private present(endpoint: BatchEndpoint, model: string, r: Extract<CallResult, { ok: true }>): unknown {
    if (endpoint !== '/v1/embeddings' && r.content.startsWith(`{"${LIVE_BODY}":`)) return (JSON.parse(r.content) as Record<string, unknown>)[LIVE_BODY];
    // A call recovered from its retained inference after a crash: its text, in the endpoint's shape.
    const created = Math.floor(this.deps.clock.now() / 1000);
    const id = r.inferenceId ?? r.requestId;
    if (endpoint === '/v1/embeddings') {
      const vectors = JSON.parse(r.content) as number[][];
      if (!Array.isArray(vectors)) throw new Error('not vectors');
      return { object: 'list', data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })), model, usage: { prompt_tokens: r.promptTokens, total_tokens: r.promptTokens } };
    }
    if (endpoint === '/v1/responses') {
      return {
        id: `resp_${id.replace(/^inf_/, '')}`,
        object: 'response',
        created_at: created,
        status: 'completed',
        model,
        output: [{ type: 'message', id: `msg_${id.replace(/^inf_/, '')}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: r.content, annotations: [] }] }],
        usage: { input_tokens: r.promptTokens, output_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
      };
    }
    return {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: r.content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
      system_fingerprint: null,
    };
  }

  /**
   * A line's result, sealed on its row, counted on the batch once (a line already finished is left as it is): one
   * statement, the line's update and the batch's counters together.
   */
  private async finishLine(line: Pick<BatchLine, 'id' | 'batchId'>, status: 'succeeded' | 'failed', result: unknown, cost: bigint): Promise<void> {
    const sealed = this.ports.sealer.seal(JSON.stringify(result), line.id);
    const ok = status === 'succeeded' ? 1 : 0;
    await this.deps.db.$executeRaw`
      WITH l AS (
        UPDATE batch_lines SET status = ${status}, result = ${sealed}, cost_micros = ${cost}
        WHERE id = ${line.id} AND status IN ('pending', 'started')
        RETURNING batch_id
      )
      UPDATE batches AS b SET completed = b.completed + ${ok}, failed = b.failed + ${1 - ok}, cost_micros = b.cost_micros + ${cost}
      FROM l WHERE b.id = l.batch_id`;
  }

  /** The attempts of a line's call, on its row: each with its request id, derived from (batch, line, attempt). */
  private ledger(batch: Batch, line: BatchLine): CallLedger {
    const { db } = this.deps;
    return {
      last: async () => {
        const row = await db.batchLine.findUnique({ where: { id: line.id }, select: { requestId: true, attemptStartedAt: true } });
        return row?.requestId ? { requestId: row.requestId, startedAt: row.attemptStartedAt } : null;
      },
      begin: async () => {
        // Only this worker writes the line while it holds the lease: the attempt number is known without reading it.
        const attempt = ++line.attempts;
        const requestId = lineRequestId(batch.id, line.index, attempt);
        await db.batchLine.update({ where: { id: line.id }, data: { status: 'started', attempts: attempt, attemptStartedAt: this.now(), requestId } });
        return (await this.renew(batch)) ? requestId : null;
      },
    };
  }
}


export function startBatchRunner(deps: RunnerDeps, opts: BatchRunnerOptions = {}): BatchRunner {
  const runner = new BatchRunner(deps, opts);
  runner.start();
  return runner;
}
