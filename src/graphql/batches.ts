import type { Batch } from '../generated/prisma/client.ts';
import { batchPortsOf } from '../domain/batches/ports.ts';
import { cancelBatch, createBatch, getBatch, listBatches } from '../domain/batches/service.ts';
import { microsToUsd } from '../kernel/money.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { listFilters } from './inputs.ts';

const RequestCountsRef = builder.objectRef<Batch>('BatchRequestCounts').implement({
  fields: (t) => ({
    total: t.exposeInt('total'),
    completed: t.exposeInt('completed'),
    failed: t.exposeInt('failed'),
  }),
});

export const BatchRef = builder.objectRef<Batch>('Batch').implement({
  description: "A batch (REST's OpenAI batch object, CONTRACT §21).",
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    keyId: t.exposeString('keyId', { description: 'The key its lines run as.' }),
    endpoint: t.exposeString('endpoint'),
    inputFileId: t.exposeString('inputFileId'),
    completionWindow: t.exposeString('completionWindow'),
    status: t.exposeString('status', { description: 'validating, in_progress, finalizing, completed, failed, expired, cancelling or cancelled.' }),
    errors: t.field({ type: 'JSON', nullable: true, resolve: (b) => b.errors ?? null }),
    metadata: t.field({ type: 'JSON', nullable: true, resolve: (b) => b.metadata ?? null }),
    requestCounts: t.field({ type: RequestCountsRef, resolve: (b) => b }),
    costUsd: t.float({ resolve: (b) => microsToUsd(b.costMicros) }),
    outputFileId: t.exposeString('outputFileId', { nullable: true }),
    errorFileId: t.exposeString('errorFileId', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    inProgressAt: t.expose('inProgressAt', { type: 'UnixSeconds', nullable: true }),
    expiresAt: t.expose('expiresAt', { type: 'UnixSeconds' }),
    finalizingAt: t.expose('finalizingAt', { type: 'UnixSeconds', nullable: true }),
    completedAt: t.expose('completedAt', { type: 'UnixSeconds', nullable: true }),
    failedAt: t.expose('failedAt', { type: 'UnixSeconds', nullable: true }),
    expiredAt: t.expose('expiredAt', { type: 'UnixSeconds', nullable: true }),
    cancellingAt: t.expose('cancellingAt', { type: 'UnixSeconds', nullable: true }),
    cancelledAt: t.expose('cancelledAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

builder.queryFields((t) => ({
  batches: t.connection(
    {
      type: BatchRef,
      nullable: true,
      authScopes: { action: 'batch.list' },
      description: 'Newest first; status filters.',
      args: { projectId: t.arg.id(), status: t.arg.string() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listBatches(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'BatchConnection' },
    { name: 'BatchEdge' },
  ),
  batch: t.field({
    type: BatchRef,
    nullable: true,
    authScopes: { action: 'batch.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getBatch(ctx, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  createBatch: t.field({
    type: BatchRef,
    nullable: true,
    authScopes: { action: 'batch.create' },
    description: 'Queues a batch over an uploaded JSONL file (POST /v1/files). Audits batch.create.',
    args: {
      projectId: t.arg.id(),
      inputFileId: t.arg.string({ required: true }),
      endpoint: t.arg.string({ required: true }),
      completionWindow: t.arg.string({ required: true }),
      metadata: t.arg({ type: 'JSON' }),
    },
    resolve: (_root, args, { ctx, ports }) => {
      const input: Record<string, unknown> = { input_file_id: args.inputFileId, endpoint: args.endpoint, completion_window: args.completionWindow };
      if (args.projectId != null) input.project_id = String(args.projectId);
      if (args.metadata != null) input.metadata = args.metadata;
      return createBatch(batchPortsOf(ports.inference), ctx, input);
    },
  }),
  cancelBatch: t.field({
    type: BatchRef,
    nullable: true,
    authScopes: { action: 'batch.cancel' },
    description: 'A batch not ended becomes cancelling; the worker ends it cancelled (batch.completed). An ended one is invalid_request.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => cancelBatch(ctx, String(args.id)),
  }),
}));
