import type { Batch, BatchFile, Prisma } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { releaseLease } from '../../db/leases.ts';
import { newId, type IdPrefix } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { recordAudit } from '../audit/service.ts';
import type { Ctx } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { pageById, type Page } from '../pagination.ts';
import { documentLimitOf, showBytes } from '../rag/limits.ts';
import { addressed, requireProjectId, visibleProjectId } from '../tenancy.ts';
import { parseInput } from '../validation.ts';
import { checkBatchFile, parseBatchLines } from './lines.ts';
import type { BatchPorts } from './ports.ts';
import { CancelBatch, COMPLETION_WINDOW_MS, CreateBatch, FileFields, ListBatchesQuery, TERMINAL_STATUSES, type BatchStatus } from './schema.ts';

/**
 * The OpenAI Files and Batch APIs (CONTRACT §21). A file's content is sealed at rest (bound to its id) and kept for the
 * project's retention days; a zero-retention project keeps no files (403 zero_retention). A batch's lines run in
 * jobs/batch-runner as the creating key.
 */

const fileId = (ms: number) => `file-${newId('file' as IdPrefix, ms).slice(5)}`;
export const isTerminal = (status: string) => (TERMINAL_STATUSES as readonly string[]).includes(status);

function zeroRetention(): SvcError {
  return new SvcError('zero_retention', {
    message: 'The project keeps no content (zero retention, CONTRACT §12): batch files cannot be stored. Use live calls, or set standard retention.',
  });
}

/** Another project's file, a deleted one and an unknown id all look the same: 404. */
async function findVisibleFile(ctx: Ctx, id: string): Promise<BatchFile> {
  const projectId = await visibleProjectId(ctx, null);
  const file = await ctx.db.batchFile.findFirst({ where: { id, deletedAt: null, ...(projectId !== undefined ? { projectId } : {}) } });
  if (!file) throw new SvcError('not_found', { param: 'file_id', message: 'No such file.' });
  addressed(ctx, file.projectId);
  return file;
}

/**
 * POST /v1/files: a JSONL batch file, up to the plan's document limit (CONTRACT §13's figures: 413
 * document_too_large). Audits file.create.
 */
export async function createFile(ports: BatchPorts, ctx: Ctx, rawFields: unknown, file: { data: Buffer; bytes: number; filename: string }): Promise<BatchFile> {
  const fields = parseInput(FileFields, rawFields);
  const projectId = await requireProjectId(ctx, fields.project_id ?? ctx.caller.projectId);
  const project = await ctx.db.project.findUnique({ where: { id: projectId }, select: { plan: true } });
  const limit = documentLimitOf(project?.plan ?? 'starter');
  if (file.bytes > limit) {
    throw new SvcError('document_too_large', { param: 'file', message: `The file is over the ${project?.plan ?? 'starter'} plan's limit of ${showBytes(limit)} (${limit} bytes).` });
  }
  const retention = await ports.retentionOf(projectId);
  if (retention.mode === 'zero') throw zeroRetention();
  checkBatchFile(file.data);
  const now = ctx.now();
  const id = fileId(now.getTime());
  const filename = (file.filename || 'batch.jsonl').slice(0, 255);
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.batchFile.create({
      data: {
        id,
        projectId,
        keyId: ctx.caller.keyId,
        purpose: 'batch',
        filename,
        bytes: file.bytes,
        sealed: ports.sealer.seal(file.data.toString('utf8'), id),
        createdAt: now,
        expiresAt: new Date(now.getTime() + retention.days * 86_400_000),
      },
    });
    await recordAudit(tx, ctx, 'file.create', { projectId, targetId: id, data: { purpose: 'batch', bytes: file.bytes, filename } });
    return row;
  });
}

export async function getFile(ctx: Ctx, id: string): Promise<BatchFile> {
  return findVisibleFile(ctx, id);
}

/** A file's content, opened; past its retention (or purged): 404 record_not_retained. */
export function openFile(ports: BatchPorts, file: BatchFile, now: Date): string {
  if (!file.sealed || (file.expiresAt && file.expiresAt <= now)) {
    throw new SvcError('record_not_retained', { param: 'file_id', message: "The file's content is past the project's retention." });
  }
  return ports.sealer.open(file.sealed, file.id);
}

/** GET /v1/files/{id}/content. */
export async function fileContent(ports: BatchPorts, ctx: Ctx, id: string): Promise<string> {
  return openFile(ports, await findVisibleFile(ctx, id), ctx.now());
}

/**
 * DELETE /v1/files/{id}: the content is dropped at once. The input file of a batch still running is refused (400:
 * cancel the batch first). Audits file.delete.
 */
export async function deleteFile(ctx: Ctx, id: string): Promise<BatchFile> {
  const file = await findVisibleFile(ctx, id);
  const running = await ctx.db.batch.findFirst({ where: { projectId: file.projectId, inputFileId: file.id, status: { in: ['validating', 'in_progress', 'finalizing', 'cancelling'] } }, select: { id: true } });
  if (running) throw invalid('file_id', `The file is the input of ${running.id}, which is still running: cancel it first.`);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.batchFile.update({ where: { id: file.id }, data: { deletedAt: now, sealed: null } });
    await recordAudit(tx, ctx, 'file.delete', { projectId: file.projectId, targetId: file.id, data: {} });
    return row;
  });
}

/**
 * POST /v1/batches: reads the input file, checks every line (a bad one goes to the error file with its line number)
 * and queues the batch (status validating) for jobs/batch-runner. A file without one good line: the batch is failed at
 * once with the lines' errors. Audits batch.create.
 */
export async function createBatch(ports: BatchPorts, ctx: Ctx, raw: unknown): Promise<Batch> {
  const input = parseInput(CreateBatch, raw);
  const projectId = await requireProjectId(ctx, input.project_id ?? ctx.caller.projectId);
  const file = await ctx.db.batchFile.findFirst({ where: { id: input.input_file_id, projectId, deletedAt: null } });
  if (!file) throw new SvcError('not_found', { param: 'input_file_id', message: 'No such file.' });
  if (file.purpose !== 'batch') throw invalid('input_file_id', 'The file is not a batch input file (purpose "batch").');
  if ((await ports.retentionOf(projectId)).mode === 'zero') throw zeroRetention();
  const now = ctx.now();
  const lines = parseBatchLines(ports, openFile(ports, file, now), input.endpoint);
  const good = lines.filter((l) => 'body' in l).length;
  const id = newId('batch' as IdPrefix, now.getTime());
  const failedNow = good === 0;
  return ctx.db.$transaction(async (tx) => {
    const created = await tx.batch.create({
      data: {
        id,
        projectId,
        keyId: ctx.caller.keyId,
        endpoint: input.endpoint,
        inputFileId: file.id,
        completionWindow: input.completion_window,
        metadata: input.metadata ?? undefined,
        status: failedNow ? 'failed' : 'validating',
        total: lines.length,
        failed: lines.length - good,
        createdAt: now,
        expiresAt: new Date(now.getTime() + COMPLETION_WINDOW_MS),
        ...(failedNow
          ? {
              failedAt: now,
              errors: {
                object: 'list',
                data: lines.slice(0, 100).map((l) => ('error' in l ? { code: l.error.code, message: l.error.message, param: l.error.param, line: l.line } : null)).filter((x) => x !== null),
              },
            }
          : {}),
      },
    });
    // newId is strictly increasing within a process: line ids sort in line order.
    const rows = lines.map((l) => {
      const lineId = newId('bln' as IdPrefix, now.getTime());
      return {
        id: lineId,
        batchId: id,
        index: l.index,
        customId: l.customId,
        status: 'error' in l ? 'failed' : 'pending',
        result: 'error' in l ? ports.sealer.seal(JSON.stringify(errorLine(lineId, l.customId, null, { code: l.error.code, message: l.error.message, param: l.error.param, line: l.line })), lineId) : null,
      };
    });
    for (let i = 0; i < rows.length; i += 1000) await tx.batchLine.createMany({ data: rows.slice(i, i + 1000) });
    await recordAudit(tx, ctx, 'batch.create', { projectId, targetId: id, data: { endpoint: input.endpoint, input_file_id: file.id, lines: lines.length, invalid_lines: lines.length - good } });
    if (failedNow) await enqueueEvent(tx, now, projectId, 'batch.completed', completedEventData(created));
    return created;
    // Up to 50,000 line rows in one transaction: more than the default 5 s on a busy embedded database.
  }, { timeout: 60_000 });
}

/** An error file's line (OpenAI's shape): `response` when the request reached the pipeline, else null. */
export function errorLine(lineId: string, customId: string, response: { status_code: number; request_id: string; body: unknown } | null, error: Record<string, unknown>) {
  return { id: `batch_req_${lineId.slice(4)}`, custom_id: customId, response, error };
}

/** GET /v1/batches: newest first; OpenAI's `after` is starting_after. */
export async function listBatches(ctx: Ctx, raw: unknown): Promise<Page<Batch>> {
  const query = parseInput(ListBatchesQuery, raw ?? {});
  const projectId = await visibleProjectId(ctx, query.project_id);
  if (query.after !== undefined && query.starting_after !== undefined) throw invalid('after', 'Pass after or starting_after, not both.');
  const { after, project_id: _p, status, ...page } = query;
  const where: Prisma.BatchWhereInput = { ...(projectId !== undefined ? { projectId } : {}), ...(status ? { status } : {}) };
  return pageById({ ...page, ...(after !== undefined ? { starting_after: after } : {}) }, ctx.db.batch, where);
}

async function findVisibleBatch(ctx: Ctx, id: string): Promise<Batch> {
  const projectId = await visibleProjectId(ctx, null);
  const batch = await ctx.db.batch.findFirst({ where: { id, ...(projectId !== undefined ? { projectId } : {}) } });
  if (!batch) throw new SvcError('not_found', { param: 'batch_id', message: 'No such batch.' });
  addressed(ctx, batch.projectId);
  return batch;
}

export function getBatch(ctx: Ctx, id: string): Promise<Batch> {
  return findVisibleBatch(ctx, id);
}

/**
 * POST /v1/batches/{id}/cancel: a batch not ended becomes `cancelling`; the worker stops before the next line, writes
 * the files of what finished and ends it `cancelled` (batch.completed). Cancelling a cancelling or cancelled batch
 * returns it unchanged; an ended one is 400. Audits batch.cancel.
 */
export async function cancelBatch(ctx: Ctx, id: string, raw: unknown = {}): Promise<Batch> {
  const input = parseInput(CancelBatch, raw ?? {});
  if (input.project_id) await visibleProjectId(ctx, input.project_id);
  const batch = await findVisibleBatch(ctx, id);
  if (batch.status === 'cancelling' || batch.status === 'cancelled') return batch;
  if (isTerminal(batch.status)) throw invalid('batch_id', `This batch is already ${batch.status}.`);
  const now = ctx.now();
  const updated = await ctx.db.$transaction(async (tx) => {
    const { count } = await tx.batch.updateMany({ where: { id: batch.id, status: { in: ['validating', 'in_progress', 'finalizing'] } }, data: { status: 'cancelling', cancellingAt: now } });
    if (count === 0) return null;
    await recordAudit(tx, ctx, 'batch.cancel', { projectId: batch.projectId, targetId: batch.id, data: { status_before: batch.status } });
    return tx.batch.findUnique({ where: { id: batch.id } });
  });
  return updated ?? findVisibleBatch(ctx, id);
}

/** batch.completed's data (CONTRACT §21). */
export function completedEventData(b: Pick<Batch, 'id' | 'status' | 'total' | 'completed' | 'failed' | 'costMicros'>): Prisma.InputJsonObject {
  return { batch_id: b.id, status: b.status, request_counts: { total: b.total, completed: b.completed, failed: b.failed }, cost_usd: microsToUsd(b.costMicros) };
}

/**
 * The worker's end of a batch it holds: the output and error files (sealed; none under zero retention), the final
 * status and batch.completed, in one transaction, only while it still holds the lease. False: the lease was lost, or
 * (for `completed`) the batch is being cancelled.
 */
export async function finishBatch(
  db: Db,
  ports: BatchPorts,
  batch: Batch,
  owner: string,
  now: Date,
  status: Extract<BatchStatus, 'completed' | 'expired' | 'cancelled' | 'failed'>,
): Promise<boolean> {
  const retention = await ports.retentionOf(batch.projectId);
  const lines = await db.batchLine.findMany({ where: { batchId: batch.id }, orderBy: { index: 'asc' }, select: { id: true, status: true, result: true } });
  const out: string[] = [];
  const err: string[] = [];
  for (const l of lines) {
    if (!l.result) continue;
    const text = ports.sealer.open(l.result, l.id);
    (l.status === 'succeeded' ? out : err).push(text);
  }
  return db.$transaction(async (tx: Tx) => {
    const counts = await tx.batchLine.groupBy({ by: ['status'], where: { batchId: batch.id }, _count: { _all: true }, _sum: { costMicros: true } });
    const n = (s: string) => counts.find((c) => c.status === s)?._count._all ?? 0;
    const cost = counts.reduce((a, c) => a + (c._sum.costMicros ?? 0n), 0n);
    const keep = retention.mode !== 'zero';
    const file = async (lines: string[]) => {
      if (!keep || lines.length === 0) return null;
      const id = fileId(now.getTime());
      const text = lines.join('\n') + '\n';
      await tx.batchFile.create({
        data: { id, projectId: batch.projectId, keyId: null, purpose: 'batch_output', filename: `${batch.id}_${lines === out ? 'output' : 'error'}.jsonl`, bytes: Buffer.byteLength(text), sealed: ports.sealer.seal(text, id), createdAt: now, expiresAt: new Date(now.getTime() + retention.days * 86_400_000) },
      });
      return id;
    };
    const stamp = { completed: { completedAt: now }, expired: { expiredAt: now }, cancelled: { cancelledAt: now }, failed: { failedAt: now } }[status];
    const data = { status, completed: n('succeeded'), failed: n('failed'), costMicros: cost, finalizingAt: batch.finalizingAt ?? now, ...stamp };
    // Completed only from finalizing (a cancel that came meanwhile wins: the worker ends the batch cancelled instead).
    const from = status === 'completed' ? ['in_progress', 'finalizing'] : ['in_progress', 'finalizing', 'cancelling', 'validating'];
    const ended = await releaseLease(tx, 'batches', { id: batch.id, owner }, { where: { status: { in: from } }, data });
    if (!ended) return false;
    const outputFileId = await file(out);
    const errorFileId = await file(err);
    // The files hold the results now (or, under zero retention, nothing does).
    await tx.batchLine.updateMany({ where: { batchId: batch.id }, data: { result: null } });
    const row = await tx.batch.update({ where: { id: batch.id }, data: { outputFileId, errorFileId } });
    await enqueueEvent(tx, now, batch.projectId, 'batch.completed', completedEventData(row));
    return true;
  }, { timeout: 60_000 });
}

/**
 * CONTRACT §12: file content past the project's retention is dropped (the row stays, its content answers 404
 * record_not_retained). Returns how many files were purged.
 */
export async function purgeExpiredFiles(db: Db, now: Date): Promise<number> {
  const { count } = await db.batchFile.updateMany({ where: { sealed: { not: null }, expiresAt: { lte: now } }, data: { sealed: null } });
  return count;
}
