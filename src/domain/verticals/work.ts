import type { Prisma, VerticalJob } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import type { Ctx } from '../context.ts';
import type { PromptTemplate } from './prompts.ts';

/** The error a failed piece of work keeps (and shows on its object). */
export interface WorkError {
  code: string;
  message: string;
}

/**
 * One kind of model work of a vertical (`risk.assessment`, `ops.postmortem`, …): its built-in prompt, how to read the
 * prompt's variables from the subject when the work runs, and how to write the result (or the failure) onto the
 * subject, inside the transaction that finishes the job (so the object's status, its events and the job agree).
 * Dev and Legal add theirs to kinds.ts the same way.
 */
export interface WorkKind {
  kind: string;
  prompt: PromptTemplate;
  variables(db: Db, job: VerticalJob): Promise<Record<string, unknown>>;
  /** The subject is being worked on (status running); optional. */
  started?(tx: Tx, job: VerticalJob, now: Date): Promise<void>;
  completed(tx: Tx, job: VerticalJob, result: unknown, now: Date): Promise<void>;
  failed(tx: Tx, job: VerticalJob, error: WorkError, now: Date): Promise<void>;
}

/**
 * Queues model work in the caller's transaction, as the calling key: the worker (jobs/vertical-work) runs it with that
 * key's limits, budget and usage, through the same inference pipeline as a direct call. Returns the job's id.
 */
export async function enqueueWork(
  tx: Tx,
  ctx: Ctx,
  work: { projectId: string; kind: string; subjectId: string; input?: Prisma.InputJsonObject },
): Promise<string> {
  const now = ctx.now();
  const id = newId('vjb', now.getTime());
  await tx.verticalJob.create({
    data: {
      id,
      projectId: work.projectId,
      kind: work.kind,
      subjectId: work.subjectId,
      keyId: ctx.caller.keyId,
      status: 'queued',
      runAfter: now,
      input: work.input ?? {},
      createdAt: now,
      updatedAt: now,
    },
  });
  return id;
}
