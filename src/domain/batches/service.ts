import type { Batch, BatchFile, Prisma } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { newId, type IdPrefix } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, requireProjectId, visibleProjectId, type Ctx } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { pageById, type Page } from '../pagination.ts';
import { documentLimitOf, showBytes } from '../rag/limits.ts';
import { parseInput } from '../validation.ts';
import { dropContent, hasContent, jsonlOf, readChunks, storeChunks } from './files.ts';
import { checkBatchFile, lineParser } from './lines.ts';
import type { BatchPorts } from './ports.ts';
import { CancelBatch, COMPLETION_WINDOW_MS, CreateBatch, FileFields, ListBatchesQuery, TERMINAL_STATUSES } from './schema.ts';

/**
 * The OpenAI Files and Batch APIs (CONTRACT §21). A file's content is sealed at rest in chunks (files.ts) and kept for
 * the project's retention days; a zero-retention project keeps no files (403 zero_retention). A batch's lines run in
 * jobs/batch-runner as the creating key.
 */

/** Line rows written per statement when a batch is created. */
const LINE_PAGE = 1000;

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
  return ctx.db.$transaction(
    async (tx) => {
      const row = await tx.batchFile.create({
        data: { id, projectId, keyId: ctx.caller.keyId, purpose: 'batch', filename, bytes: file.bytes, sealed: null, createdAt: now, expiresAt: new Date(now.getTime() + retention.days * 86_400_000) },
      });
      // Sealed a chunk at a time: the upload is never one string.
      await storeChunks(tx, ports.sealer, id, file.data);
      await recordAudit(tx, ctx, 'file.create', { projectId, targetId: id, data: { purpose: 'batch', bytes: file.bytes, filename } });
      return row;
    },
    { timeout: 60_000 },
  );
}

export async function getFile(ctx: Ctx, id: string): Promise<BatchFile> {
  return findVisibleFile(ctx, id);
}

/**
 * Refuses a file whose content is gone: past its retention, purged, deleted, or its project keeps no content (zero
 * retention): 404 record_not_retained.
 */
async function requireContent(ports: BatchPorts, db: Tx, file: BatchFile, now: Date): Promise<void> {
  const gone = (message = "The file's content is past the project's retention.") => new SvcError('record_not_retained', { param: 'file_id', message });
  if ((file.expiresAt && file.expiresAt <= now) || file.deletedAt) throw gone();
  if ((await ports.retentionOf(file.projectId)).mode === 'zero') throw gone('The project keeps no content (zero retention): its files are not kept.');
  if (!(await hasContent(db, file))) throw gone();
}

/**
 * GET /v1/files/{id}/content: the file's size and its bytes, read a chunk at a time as they are sent (a file is never
 * held whole).
 */
export async function fileContent(ports: BatchPorts, ctx: Ctx, id: string): Promise<{ bytes: number; body: AsyncIterable<Buffer> }> {
  const file = await findVisibleFile(ctx, id);
  await requireContent(ports, ctx.db, file, ctx.now());
  const db = ctx.db;
  async function* body() {
    for await (const c of readChunks(db, ports.sealer, file)) yield Buffer.from(c.text, 'utf8');
  }
  return { bytes: file.bytes, body: body() };
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
    await dropContent(tx, [file.id]);
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
  await requireContent(ports, ctx.db, file, now);
  const id = newId('batch' as IdPrefix, now.getTime());
  const parse = lineParser(ports, input.endpoint);
  return ctx.db.$transaction(
    async (tx) => {
      await tx.batch.create({
        data: {
          id,
          projectId,
          keyId: ctx.caller.keyId,
          endpoint: input.endpoint,
          inputFileId: file.id,
          completionWindow: input.completion_window,
          metadata: input.metadata ?? undefined,
          status: 'validating',
          createdAt: now,
          expiresAt: new Date(now.getTime() + COMPLETION_WINDOW_MS),
        },
      });
      // The file read a chunk at a time, its lines written a page at a time: a batch is never held whole.
      let total = 0;
      let bad = 0;
      const errors: { code: string; message: string; param: string | null; line: number }[] = [];
      let rows: Prisma.BatchLineCreateManyInput[] = [];
      for await (const l of jsonlOf(readChunks(tx, ports.sealer, file))) {
        const p = parse(l);
        // newId is strictly increasing within a process: line ids sort in line order.
        const lineId = newId('bln' as IdPrefix, now.getTime());
        total++;
        let result: string | null = null;
        if ('error' in p) {
          bad++;
          const error = { code: p.error.code, message: p.error.message, param: p.error.param, line: p.line };
          if (errors.length < 100) errors.push(error);
          result = ports.sealer.seal(JSON.stringify(errorLine(lineId, p.customId, error)), lineId);
        }
        rows.push({ id: lineId, batchId: id, index: p.index, customId: p.customId, status: 'error' in p ? 'failed' : 'pending', result });
        if (rows.length === LINE_PAGE) {
          await tx.batchLine.createMany({ data: rows });
          rows = [];
        }
      }
      if (rows.length > 0) await tx.batchLine.createMany({ data: rows });
      const failedNow = total === bad;
      const created = await tx.batch.update({
        where: { id },
        data: { total, failed: bad, ...(failedNow ? { status: 'failed', failedAt: now, errors: { object: 'list', data: errors } } : {}) },
      });
      await recordAudit(tx, ctx, 'batch.create', { projectId, targetId: id, data: { endpoint: input.endpoint, input_file_id: file.id, lines: total, invalid_lines: bad } });
      if (failedNow) await enqueueEvent(tx, now, projectId, 'batch.completed', completedEventData(created));
      return created;
    },
    // Up to 50,000 line rows in one transaction: more than the default 5 s on a busy embedded database.
    { timeout: 60_000 },
  );
}

/** An output or error file's line id: batch_req_ and the line's. */
export const lineRequestIdOf = (lineId: string) => `batch_req_${lineId.slice(4)}`;

/**
 * An error file's line for a line that got no answer (OpenAI's shape): `response` null, `error` {code, message, …}.
 * A line the pipeline refused has its answer instead (failedLine).
 */
export function errorLine(lineId: string, customId: string, error: Record<string, unknown>) {
  return { id: lineRequestIdOf(lineId), custom_id: customId, response: null, error };
}

/**
 * An error file's line for a line the pipeline refused: the answer in `response` (OpenAI's shape: its HTTP status and
 * the error body the live call answers on the OpenAI routes, the spec's error object, §7: `{type: "svc.error", code,
 * message, param, request_id, doc_url}`), and `error` `{code, message}` as on every error line (CONTRACT §21: the line
 * fails with its code in the error file).
 */
export function failedLine(
  lineId: string,
  customId: string,
  answer: { status: number; requestId: string; code: string; message: string; param: string | null; docsBase: string | null },
) {
  const error = { type: 'svc.error', code: answer.code, message: answer.message, param: answer.param, request_id: answer.requestId, doc_url: `${answer.docsBase ?? ''}/docs/errors#${answer.code}` };
  return { id: lineRequestIdOf(lineId), custom_id: customId, response: { status_code: answer.status, request_id: answer.requestId, body: { error } }, error: { code: answer.code, message: answer.message } };
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
