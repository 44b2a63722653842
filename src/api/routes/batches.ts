import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Batch } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import { batchPortsOf } from '../../domain/batches/ports.ts';
import { BatchIdParams, CancelBatch, CreateBatch, ListBatchesQuery } from '../../domain/batches/schema.ts';
import { cancelBatch, createBatch, getBatch, listBatches } from '../../domain/batches/service.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { sendList } from '../list.ts';
import { Int, Json, NullableStr, Num, ObjectType, Str, Unix, UnixOrNull } from '../response-fields.ts';

/** OpenAI's batch object (CONTRACT §21), plus project_id, key_id and cost_usd. */
export const BatchObject = Type.Object(
  {
    id: Str('The batch id (batch_…).'),
    object: ObjectType('batch'),
    endpoint: Str('What every line calls.'),
    errors: Json('Why the batch failed validation, {object: "list", data: [{code, message, param, line}]}, or null.'),
    input_file_id: Str('The input file.'),
    completion_window: Str('"24h".'),
    status: Str('validating, in_progress, finalizing, completed, failed, expired, cancelling or cancelled.'),
    output_file_id: NullableStr('The output file (answered lines), or null.'),
    error_file_id: NullableStr('The error file (failed lines), or null.'),
    created_at: Unix('Created'),
    in_progress_at: UnixOrNull('Started'),
    expires_at: Unix('Its completion window ends'),
    finalizing_at: UnixOrNull('Finalizing began'),
    completed_at: UnixOrNull('Completed'),
    failed_at: UnixOrNull('Failed'),
    expired_at: UnixOrNull('Expired'),
    cancelling_at: UnixOrNull('Cancel asked'),
    cancelled_at: UnixOrNull('Cancelled'),
    request_counts: Type.Object({ total: Int('Lines.'), completed: Int('Lines answered.'), failed: Int('Lines failed.') }, { description: 'Lines so far.' }),
    metadata: Json('Your key-value pairs, or null.'),
    project_id: Str('The project it runs in.'),
    key_id: Str('The key it runs as (its limits and budget apply).'),
    cost_usd: Num('What its lines cost so far, in USD.'),
  },
  { description: "OpenAI's batch object." },
);

export function presentBatch(b: Batch) {
  return {
    id: b.id,
    object: 'batch' as const,
    endpoint: b.endpoint,
    errors: b.errors ?? null,
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: b.outputFileId,
    error_file_id: b.errorFileId,
    created_at: unixSeconds(b.createdAt),
    in_progress_at: unixOrNull(b.inProgressAt),
    expires_at: unixSeconds(b.expiresAt),
    finalizing_at: unixOrNull(b.finalizingAt),
    completed_at: unixOrNull(b.completedAt),
    failed_at: unixOrNull(b.failedAt),
    expired_at: unixOrNull(b.expiredAt),
    cancelling_at: unixOrNull(b.cancellingAt),
    cancelled_at: unixOrNull(b.cancelledAt),
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata ?? null,
    project_id: b.projectId,
    key_id: b.keyId,
    cost_usd: microsToUsd(b.costMicros),
  };
}

/** The list envelope with OpenAI's first_id and last_id (what the SDK's pages read). */
const BatchList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(BatchObject),
  has_more: Type.Boolean(),
  url: Type.String(),
  first_id: NullableStr('The first batch of the page, or null.'),
  last_id: NullableStr('The last batch of the page: the next page is after it.'),
});

export const batchesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/batches', { config: { action: 'batch.create' }, schema: { body: CreateBatch, response: { 200: BatchObject } } }, async (req) =>
    presentBatch(await createBatch(batchPortsOf(app.ports.inference), req.ctx, req.body)),
  );

  app.get('/v1/batches', { config: { action: 'batch.list' }, schema: { querystring: ListBatchesQuery, response: { 200: BatchList } } }, async (req, reply) => {
    const list = sendList(reply, await listBatches(req.ctx, req.query), '/v1/batches', presentBatch);
    return { ...list, first_id: list.data[0]?.id ?? null, last_id: list.data.at(-1)?.id ?? null };
  });

  app.get('/v1/batches/:batch_id', { config: { action: 'batch.read' }, schema: { params: BatchIdParams, response: { 200: BatchObject } } }, async (req) => presentBatch(await getBatch(req.ctx, req.params.batch_id)));

  app.post('/v1/batches/:batch_id/cancel', { config: { action: 'batch.cancel' }, schema: { params: BatchIdParams, body: CancelBatch, response: { 200: BatchObject } } }, async (req) =>
    presentBatch(await cancelBatch(req.ctx, req.params.batch_id, req.body ?? {})),
  );
};
