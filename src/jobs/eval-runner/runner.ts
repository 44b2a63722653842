import { createHash } from 'node:crypto';
import type { EvalCase, EvalRun } from '../../generated/prisma/client.ts';
import type { Deps } from '../../deps.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { Caller } from '../../domain/context.ts';
import { OPERATOR_KEY_ID, keyCaller } from '../../domain/auth/service.ts';
import { SCOPES } from '../../domain/keys/scopes.ts';
import { keyStatus } from '../../domain/keys/service.ts';
import { judgeLocally } from '../../domain/evals/assertions.ts';
import { finishEvalRun, refreshCanceledSummary, type StoredCaseInput } from '../../domain/evals/service.ts';
import { claimRun, renewRun } from '../../domain/evals/store.ts';
import type { IdempotencyStore } from '../../domain/idempotency/store.ts';
import { inferOnce, type CallLedger, type CallResult, type OncePorts } from '../../domain/inference/once.ts';
import type { InferenceInput } from '../../domain/inference/service.ts';
import { judgeMessages, parseJudgeVerdict } from '../../domain/evals/judge.ts';
import { oncePorts } from '../model-calls.ts';
import { drainWithLease, LeasedPool } from '../leased-pool.ts';

type RunnerDeps = Pick<Deps, 'db' | 'clock' | 'log' | 'limiter' | 'ports' | 'outcomes' | 'redis' | 'config' | 'webhooks'>;

export interface EvalRunnerOptions {
  /** How long a claimed run stays this worker's without a renewal (CONTRACT §14 resume: another worker takes it after). */
  leaseMs?: number;
  /** How often the worker looks for queued runs (wall time). */
  pollMs?: number;
  /** Runs worked on at once by this process (default 4). */
  maxRuns?: number;
  /** Waits out a 429's Retry-After. Tests inject one that moves their clock instead of sleeping. */
  sleep?: (ms: number) => Promise<void>;
  idempotency?: IdempotencyStore;
}

/** Why the rest of a run stops: a cancel, the budget, a revoked key, or a lost lease. */
interface Stop {
  kind: 'canceled' | 'failed' | 'lost';
  error?: { code: string; message: string };
}

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const base32 = (bytes: Buffer, n: number) => [...bytes.subarray(0, n)].map((b) => ALPHABET[b & 31]).join('');

/**
 * A case's request id, the same after a restart: the run's time part, then a hash of (run, case, call, attempt), so
 * that the usage records of one case can be found by its prefix (`req_` + 22 characters) and no two attempts share one.
 */
export function caseRequestId(runId: string, index: number, part: 'main' | 'judge', attempt: number): string {
  const casePart = base32(createHash('sha256').update(`${runId}:${index}`).digest(), 12);
  const tail = base32(createHash('sha256').update(`${runId}:${index}:${part}:${attempt}`).digest(), 4);
  return `req_${runId.slice(4, 14)}${casePart}${tail}`;
}

/** The Idempotency-Key of one call of a case (in the run's project's namespace, CONTRACT §5). */
const callKey = (runId: string, index: number, part: string) => `svc-eval:${runId}:${index}:${part}`;

/**
 * The evaluation worker (CONTRACT §14). Claims a queued or abandoned run with a lease (renewed while it runs), runs its
 * unfinished cases `concurrency` at a time through createInference, the same pipeline as POST /v1/inference, as the
 * key that created the run (its scopes, windows and budget), and ends it with eval.run.completed.
 *
 * At most one charge per case: each call is made through inferOnce (domain/inference/once.ts) under the case's
 * Idempotency-Key (run, case, call), with the attempt's request id written on the case. After a restart, a finished
 * call is replayed from the store (nothing runs again), a call cut off before its usage record existed is run again,
 * and one whose usage record exists but whose answer was lost is recovered from its retained inference or reported
 * errored rather than paid twice. A finished case is never run again.
 */
export class EvalRunner {
  private readonly leaseMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly once: OncePorts;
  /** The claim-and-fill loop (jobs/leased-pool.ts): up to `maxRuns` runs at once, each with its own `concurrency`. */
  private readonly pool: LeasedPool<EvalRun>;

  constructor(
    private readonly deps: RunnerDeps,
    opts: EvalRunnerOptions = {},
  ) {
    this.leaseMs = opts.leaseMs ?? deps.config.evalLeaseMs;
    this.pool = new LeasedPool<EvalRun>(
      deps.log,
      {
        name: 'eval runner',
        idField: 'eval_id',
        // A queued run, or a running one whose lease has passed (its worker died), leased to this worker.
        claim: async (_limit, working) => {
          const now = this.now();
          const run = await claimRun(this.deps.db, now, new Date(now.getTime() + this.leaseMs), this.owner, [...working]);
          return run ? [run] : [];
        },
        idOf: (run) => run.id,
        work: (run) => this.work(run),
      },
      { pollMs: opts.pollMs ?? 1_000, maxActive: opts.maxRuns ?? 4 },
    );
    // A shutdown ends a wait at once: the case stays unfinished and resumes on the next start.
    this.sleep = opts.sleep ?? ((ms) => this.pool.sleep(ms));
    this.once = oncePorts(deps, opts.idempotency);
  }

  get owner(): string {
    return this.pool.owner;
  }

  private get stopped(): boolean {
    return this.pool.stopped;
  }

  /** Polls for claimable runs and works on up to `maxRuns` at once. */
  start(): void {
    this.pool.start();
  }

  stop(): Promise<void> {
    return this.pool.stop();
  }

  private now(): Date {
    return new Date(this.deps.clock.now());
  }

  /** Runs every run it can claim until none is left; returns how many it ran. */
  async runPending(): Promise<number> {
    return (await this.pool.runPending()).length;
  }

  /** Renews the lease; false when the run is no longer this worker's (canceled, or taken over). */
  private renew(run: EvalRun): Promise<boolean> {
    return renewRun(this.deps.db, run.id, this.owner, new Date(this.deps.clock.now() + this.leaseMs));
  }

  /** The creating key as it is now; null (the run fails) when it was revoked or has expired. */
  private async callerOf(run: EvalRun): Promise<Caller | null> {
    if (run.keyId === OPERATOR_KEY_ID) return { kind: 'operator', keyId: OPERATOR_KEY_ID, projectId: null, scopes: SCOPES };
    const key = await this.deps.db.apiKey.findFirst({ where: { id: run.keyId, projectId: run.projectId } });
    if (!key || keyStatus(key, this.now()) !== 'active') return null;
    return keyCaller(key);
  }

  private async work(run: EvalRun): Promise<void> {
    const { db } = this.deps;
    const state: { stop: Stop | null } = { stop: null };
    const keyGone = (): Stop => ({
      kind: 'failed',
      error: { code: 'invalid_api_key', message: `The key that created this run (${run.keyId}) was revoked or has expired.` },
    });
    const queue = await db.evalCase.findMany({ where: { runId: run.id, status: { in: ['pending', 'started'] } }, orderBy: { index: 'asc' } });
    // The lease is also renewed on a timer: one slow case (a provider near its timeout, then a judge call) must not let
    // it pass while this worker is alive, or another worker would take the run over and make the same calls.
    await drainWithLease(
      queue,
      run.concurrency,
      () => state.stop !== null || this.stopped,
      async (c) => {
        // Before each case: still this worker's and not canceled (renewing the lease), and the key still valid.
        if (!(await this.renew(run))) {
          const current = await db.evalRun.findUnique({ where: { id: run.id }, select: { status: true } });
          state.stop ??= { kind: current?.status === 'canceled' ? 'canceled' : 'lost' };
          return;
        }
        const caller = await this.callerOf(run);
        if (!caller) {
          state.stop ??= keyGone();
          return;
        }
        const result = await this.runCase(run, c, caller, () => state.stop !== null || this.stopped);
        if (result) state.stop ??= result;
      },
      { everyMs: Math.floor(this.leaseMs / 3), renew: () => this.renew(run) },
    );
    if (this.stopped && !state.stop) return; // shutting down: the lease passes and a worker resumes the run
    if (state.stop?.kind === 'lost') return;
    if (state.stop?.kind === 'canceled') {
      await refreshCanceledSummary(db, run);
      return;
    }
    if (state.stop?.kind === 'failed') {
      // CONTRACT §14: budget_exceeded (or a revoked key) fails the remaining cases and the run.
      await db.evalCase.updateMany({
        where: { runId: run.id, status: { in: ['pending', 'started'] } },
        data: { status: 'errored', reason: `${state.stop.error!.code}: ${state.stop.error!.message}`, finishedAt: this.now() },
      });
    }
    const ended = await finishEvalRun(db, run, this.owner, this.now(), state.stop?.kind === 'failed' ? { status: 'failed', error: state.stop.error } : { status: 'completed' });
    if (ended) this.deps.log.info({ eval_id: run.id, status: state.stop ? 'failed' : 'completed' }, 'evaluation run ended');
  }

  /** One case: its call (and the judge's), its verdict, its row. Returns a Stop when the run must stop. */
  private async runCase(run: EvalRun, c: EvalCase, caller: Caller, stopping: () => boolean): Promise<Stop | null> {
    const input = c.input as unknown as StoredCaseInput;
    // CONTRACT §12 zero retention: no answer is stored, neither in the results nor in the idempotency store.
    const zero = (await this.deps.ports.inference.projects.get(run.projectId))?.privacy?.retentionMode === 'zero';
    const main = await this.call(run, c, 'main', this.inferenceInputOf(run, input), caller, stopping, zero);
    if (main === null) return null; // stopped while waiting out a 429: the case stays for the resume
    if (main.ok && main.dropped) {
      await this.finishCase(c, {
        status: 'errored',
        reason: 'interrupted: the worker stopped after the model answered, and the project keeps no answers (zero retention); the call was charged once and is not made again.',
        requestId: main.requestId,
        promptTokens: main.promptTokens,
        completionTokens: main.completionTokens,
        costMicros: BigInt(main.costMicros),
      });
      return null;
    }
    const shown = (output: string) => (zero ? undefined : output);
    if (!main.ok) {
      await this.finishCase(c, { status: 'errored', reason: `${main.code}: ${main.message}`, requestId: main.requestId });
      return main.code === 'budget_exceeded' ? { kind: 'failed', error: { code: main.code, message: main.message } } : null;
    }
    const figures = { promptTokens: main.promptTokens, completionTokens: main.completionTokens, costMicros: BigInt(main.costMicros), latencyMs: main.latencyMs };
    if (input.assert.type !== 'llm_judge') {
      const v = judgeLocally(input.assert, input.expected ?? null, main.content);
      await this.finishCase(c, { status: v.passed ? 'passed' : 'failed', reason: v.reason, output: shown(main.content), requestId: main.requestId, ...figures });
      return null;
    }
    const judgeInput: InferenceInput = {
      model: input.assert.judge_model!,
      project_id: run.projectId,
      messages: judgeMessages({ rubric: input.assert.rubric!, expected: input.expected ?? null, output: main.content }),
      temperature: 0,
    } as InferenceInput;
    const judged = await this.call(run, c, 'judge', judgeInput, caller, stopping, zero);
    if (judged === null) return null;
    if (judged.ok && judged.dropped) {
      await this.finishCase(c, {
        status: 'errored',
        reason: 'interrupted: the worker stopped after the judge answered, and the project keeps no answers (zero retention); the calls were charged once and are not made again.',
        requestId: main.requestId,
        ...figures,
      });
      return null;
    }
    if (!judged.ok) {
      await this.finishCase(c, { status: 'errored', reason: `judge ${judged.code}: ${judged.message}`, output: shown(main.content), requestId: main.requestId, ...figures });
      return judged.code === 'budget_exceeded' ? { kind: 'failed', error: { code: judged.code, message: judged.message } } : null;
    }
    const withJudge = {
      ...figures,
      promptTokens: figures.promptTokens + judged.promptTokens,
      completionTokens: figures.completionTokens + judged.completionTokens,
      costMicros: figures.costMicros + BigInt(judged.costMicros),
    };
    const verdict = parseJudgeVerdict(judged.content);
    if (!verdict) {
      await this.finishCase(c, { status: 'errored', reason: zero ? 'The judge gave no PASS/FAIL verdict.' : `The judge gave no PASS/FAIL verdict: "${judged.content.slice(0, 200)}"`, output: shown(main.content), requestId: main.requestId, ...withJudge });
      return null;
    }
    await this.finishCase(c, { status: verdict.passed ? 'passed' : 'failed', reason: `judge: ${verdict.reason || (verdict.passed ? 'PASS' : 'FAIL')}`, output: shown(main.content), requestId: main.requestId, ...withJudge });
    return null;
  }

  /**
   * The inference request of a case: a model run sends the case's messages; a template run sends
   * `template: {id, version, variables}` (the version pinned at creation), its messages appended, the run's model if
   * it named one (else the template's).
   */
  private inferenceInputOf(run: EvalRun, input: StoredCaseInput): InferenceInput {
    const template = run.template as { id: string; version: number } | null;
    if (!template) return { model: run.model!, project_id: run.projectId, messages: input.messages } as InferenceInput;
    return {
      project_id: run.projectId,
      template: { id: template.id, version: template.version, variables: input.variables ?? {} },
      ...(run.model ? { model: run.model } : {}),
      ...(input.messages ? { messages: input.messages } : {}),
    } as InferenceInput;
  }

  private async finishCase(
    c: EvalCase,
    r: { status: 'passed' | 'failed' | 'errored'; reason: string; output?: string; requestId?: string; promptTokens?: number; completionTokens?: number; costMicros?: bigint; latencyMs?: number },
  ): Promise<void> {
    // Only a case not finished yet (a cancel marks unfinished cases skipped; the result of a call already made still counts).
    await this.deps.db.evalCase.updateMany({
      where: { id: c.id, status: { in: ['pending', 'started', 'skipped'] } },
      data: {
        status: r.status,
        reason: r.reason.slice(0, 2000),
        output: r.output ?? null,
        requestId: r.requestId ?? null,
        promptTokens: r.promptTokens ?? 0,
        completionTokens: r.completionTokens ?? 0,
        costMicros: r.costMicros ?? 0n,
        latencyMs: r.latencyMs ?? null,
        finishedAt: this.now(),
      },
    });
  }

  /**
   * One model call of a case, at most once (inferOnce): replayed from the idempotency store when an earlier worker
   * finished it; a 429 rate_limit_exceeded waits for its window (Retry-After) and tries again as a new attempt. Null:
   * stopped, or the run is no longer this worker's.
   */
  private async call(
    run: EvalRun,
    c: EvalCase,
    part: 'main' | 'judge',
    input: InferenceInput,
    caller: Caller,
    stopping: () => boolean,
    /** Zero retention: the stored result keeps the figures, not the answer (a replay then reports the case interrupted). */
    dropContent: boolean,
  ): Promise<CallResult | null> {
    // A case this worker resumes: its last attempt of this call was begun by a worker that stopped.
    let resuming = c.status === 'started' && c.requestId !== null && c.requestId === caseRequestId(run.id, c.index, part, c.attempts);
    for (;;) {
      if (stopping()) return null;
      try {
        return await inferOnce(this.once, this.deps, {
          projectId: run.projectId,
          key: callKey(run.id, c.index, part),
          input,
          caller,
          resuming,
          ledger: this.ledger(run, c, part),
          dropContent,
        });
      } catch (err) {
        if (!(err instanceof SvcError) || err.code !== 'rate_limit_exceeded') throw err;
        // Nothing was charged: the window is waited out and the call made again (CONTRACT §14).
        resuming = false;
        const seconds = Number(err.headers?.['Retry-After'] ?? '1');
        await this.sleep(Math.max(1, Number.isFinite(seconds) ? seconds : 1) * 1000);
        if (!(await this.renew(run))) return null; // canceled (or taken over) meanwhile
      }
    }
  }

  /** The attempts of one call of a case, on the case's row: each with its request id, derived from (run, case, call, attempt). */
  private ledger(run: EvalRun, c: EvalCase, part: 'main' | 'judge'): CallLedger {
    const { db } = this.deps;
    return {
      last: async () => {
        const row = await db.evalCase.findUnique({ where: { id: c.id }, select: { requestId: true, attemptStartedAt: true, attempts: true } });
        // The case's last attempt, if it was one of this call (the judge's call follows the main one on the same row).
        if (!row?.requestId || row.requestId !== caseRequestId(run.id, c.index, part, row.attempts)) return null;
        return { requestId: row.requestId, startedAt: row.attemptStartedAt };
      },
      begin: async () => {
        const row = await db.evalCase.update({
          where: { id: c.id },
          data: { status: 'started', attempts: { increment: 1 }, attemptStartedAt: this.now() },
          select: { attempts: true },
        });
        const requestId = caseRequestId(run.id, c.index, part, row.attempts);
        await db.evalCase.update({ where: { id: c.id }, data: { requestId } });
        return (await this.renew(run)) ? requestId : null;
      },
    };
  }
}

export function startEvalRunner(deps: RunnerDeps, opts: EvalRunnerOptions = {}): EvalRunner {
  const runner = new EvalRunner(deps, opts);
  runner.start();
  return runner;
}
