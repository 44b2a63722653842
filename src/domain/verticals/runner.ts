import { createHash } from 'node:crypto';
import type { Prisma, VerticalJob } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/client.ts';
import type { ErrorCode } from '../../errors/codes.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { Clock } from '../../kernel/clock.ts';
import { allows } from '../auth/actions.ts';
import { OPERATOR_KEY_ID, keyCaller } from '../auth/service.ts';
import type { Caller } from '../context.ts';
import { inferOnce, type CallResult } from '../inference/once.ts';
import type { InferenceInput } from '../inference/service.ts';
import { SCOPES, type Scope } from '../keys/scopes.ts';
import { keyStatus } from '../keys/service.ts';
import { workKind } from './kinds.ts';
import type { VerticalPorts } from './ports.ts';
import { promptRequest, schemaName, structuredResult } from './prompts.ts';
import * as store from './store.ts';
import type { WorkError } from './work.ts';

/** A job is tried this many times (transient failures: rate limits, providers down) before it fails for good. */
export const MAX_ATTEMPTS = 5;
const RETRYABLE = new Set(['rate_limit_exceeded', 'model_unavailable', 'routing_timeout', 'internal_error']);
/** 30 s, 1 min, 2 min, 4 min between tries. */
export const retryDelayMs = (attempt: number) => Math.min(30_000 * 2 ** Math.max(attempt - 1, 0), 600_000);

export interface WorkEnv {
  db: Db;
  clock: Clock;
}

export type JobOutcome = 'succeeded' | 'failed' | 'retrying' | 'lost';


/** The worker lost the job's lease to another worker (which now runs it): this run's result is dropped. */
class LeaseLost extends Error {}

/**
 * The job's model call was charged but its answer is not to be had (a crash in the instant between the charge and
 * the stored answer, in a project that keeps no content): the job fails for good rather than pay for a second call.
 */
class Interrupted extends Error {}

/** The Idempotency-Key of a job's model call (in the job's project's namespace, CONTRACT §5). */
export const jobCallKey = (jobId: string) => `svc-vertical:${jobId}`;

/** The answer of the job's call, or the error it ended with, as the work sees it. */
function answerOf(called: CallResult | null): { content: string; inferenceId: string | null } {
  if (called === null) throw new LeaseLost();
  if (!called.ok) {
    if (called.code === 'interrupted') throw new Interrupted(called.message);
    throw new SvcError(called.code as ErrorCode, { message: called.message });
  }
  if (called.dropped) {
    throw new Interrupted(
      'The worker stopped after the model answered, and the project keeps no answers (zero retention); the call was charged once and is not made again.',
    );
  }
  return { content: called.content, inferenceId: called.inferenceId ?? null };
}

/** The key that asked for the work, as it is now: revoked, expired or no longer allowed inference fails the job. */
async function callerOf(db: Db, job: VerticalJob, now: Date): Promise<Caller> {
  if (job.keyId === OPERATOR_KEY_ID) return { kind: 'operator', keyId: OPERATOR_KEY_ID, projectId: null, scopes: SCOPES };
  const key = await db.apiKey.findFirst({ where: { id: job.keyId, projectId: job.projectId } });
  if (!key || keyStatus(key, now) !== 'active') {
    throw new SvcError('invalid_api_key', { message: `The key that asked for this work (${job.keyId}) is no longer active.` });
  }
  const scopes = key.scopes as Scope[];
  if (!allows('inference.create', scopes)) {
    throw new SvcError('insufficient_scope', { message: `The key that asked for this work (${job.keyId}) no longer holds inference:write.` });
  }
  return keyCaller(key);
}

const errorOf = (err: unknown): WorkError =>
  err instanceof SvcError
    ? { code: err.code, message: err.message }
    : err instanceof Interrupted
      ? { code: 'internal_error', message: err.message }
      : { code: 'internal_error', message: 'The model work failed unexpectedly.' };

/**
 * Runs one claimed job: renders its prompt (the project's own template of that name, else the built-in), calls the
 * SAME inference pipeline as POST /v1/inference as the key that asked (its rate limits, budget, usage record, cost and
 * inference.completed apply; model `auto` is the project's default routing), checks a structured answer against the
 * prompt's schema, and writes the result onto the subject in the transaction that finishes the job. A transient
 * failure puts the job back in the queue (MAX_ATTEMPTS tries); any other failure is written onto the subject.
 *
 * The call is made at most once (inferOnce, under the job's own Idempotency-Key): a worker that dies after the
 * provider answered and before the job's commit leaves the answer stored, and the worker that resumes the job replays
 * it instead of calling (and charging) again.
 */
export async function runJob(ports: VerticalPorts, env: WorkEnv, job: VerticalJob): Promise<JobOutcome> {
  const now = () => new Date(env.clock.now());
  const kind = workKind(job.kind);
  const inferenceIds: string[] = [];
  let callEnded = false;
  try {
    if (!kind) throw new Error(`no vertical work kind ${job.kind}`);
    const caller = await callerOf(env.db, job, now());
    if (kind.started) await env.db.$transaction((tx) => kind.started!(tx, job, now()));
    const template = kind.prompt;
    const variables = await kind.variables(env.db, job);
    const format = template.schema
      ? { response_format: { type: 'json_schema' as const, json_schema: { name: schemaName(template), schema: template.schema, strict: true } } }
      : {};
    // The project's own template of the prompt's name, when it has one: rendered by the pipeline's template stage.
    const request: InferenceInput = {
      ...(await promptRequest(ports.prompts, env.db, job.projectId, template, variables)),
      metadata: { vertical_job_id: job.id, vertical_work: job.kind },
      ...format,
    };
    // CONTRACT §12 zero retention: the idempotency store keeps the call's figures, not its answer.
    const zero = (await ports.inference.projects.get(job.projectId))?.privacy?.retentionMode === 'zero';
    const key = jobCallKey(job.id);
    let called: CallResult | null;
    try {
      called = await inferOnce(ports, env, {
        projectId: job.projectId,
        key,
        input: request,
        // The key names the job's call: a resumed job replays its answer even if its subject changed meanwhile.
        requestHash: createHash('sha256').update(key).digest('hex'),
        caller,
        resuming: job.requestId !== null,
        ledger: { last: () => store.lastCall(env.db, job.id), begin: () => store.beginCall(env.db, job, now()) },
        dropContent: zero,
        rerun: (err) => RETRYABLE.has(err.code),
      });
    } catch (err) {
      // A refusal or failure before any charge: the call was forgotten, and the next try makes it afresh.
      if (err instanceof SvcError) callEnded = true;
      throw err;
    }
    const answer = answerOf(called);
    if (answer.inferenceId) inferenceIds.push(answer.inferenceId);
    const result = structuredResult(template, answer.content);
    await env.db.$transaction(async (tx) => {
      const at = now();
      if (!(await store.finish(tx, job, { status: 'succeeded', result: result as Prisma.InputJsonValue, inferenceIds, now: at }))) throw new LeaseLost();
      await kind.completed(tx, job, result, at);
    });
    return 'succeeded';
  } catch (err) {
    if (err instanceof LeaseLost) return 'lost';
    const error = errorOf(err);
    // An interrupted call is final: trying again would pay for it a second time.
    const transient = !(err instanceof Interrupted) && (!(err instanceof SvcError) || RETRYABLE.has(err.code));
    // The key's rate limits apply to its work: refused by them, the job waits for the window (Retry-After) and the
    // try is not counted, so a burst of work beyond the limit is spread out rather than failed.
    if (err instanceof SvcError && err.code === 'rate_limit_exceeded' && kind) {
      const retryAfterS = Number(err.headers?.['Retry-After'] ?? 0) || 1;
      await store.requeue(env.db, job, new Date(now().getTime() + retryAfterS * 1000), error as unknown as Prisma.InputJsonObject, now(), { uncounted: true, callEnded });
      return 'retrying';
    }
    if (transient && kind && job.attempts < MAX_ATTEMPTS) {
      await store.requeue(env.db, job, new Date(now().getTime() + retryDelayMs(job.attempts)), error as unknown as Prisma.InputJsonObject, now(), { callEnded });
      return 'retrying';
    }
    const finished = await env.db.$transaction(async (tx) => {
      const at = now();
      if (!(await store.finish(tx, job, { status: 'failed', error: error as unknown as Prisma.InputJsonObject, inferenceIds, now: at }))) return false;
      await kind?.failed(tx, job, error, at);
      return true;
    });
    return finished ? 'failed' : 'lost';
  }
}

export { nextDueMs } from './store.ts';
