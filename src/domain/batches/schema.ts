import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';

/** CONTRACT §21: the endpoints a batch's lines may call. */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/responses'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** OpenAI's batch statuses. */
export const BATCH_STATUSES = ['validating', 'in_progress', 'finalizing', 'completed', 'failed', 'expired', 'cancelling', 'cancelled'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];
export const TERMINAL_STATUSES: readonly BatchStatus[] = ['completed', 'failed', 'expired', 'cancelled'];

/** As OpenAI: at most 50,000 lines a batch. */
export const MAX_BATCH_LINES = 50_000;
/** The one completion window OpenAI offers. */
export const COMPLETION_WINDOW_MS = 24 * 3600 * 1000;

/** OpenAI's metadata: at most 16 pairs, keys up to 64 characters, values up to 512. */
const Metadata = Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 512 }), {
  maxProperties: 16,
  description: 'Up to 16 key-value pairs (keys up to 64 characters, values up to 512).',
  ...says('must be an object of at most 16 string values (keys up to 64 characters, values up to 512)'),
});

/** POST /v1/batches, GraphQL createBatch. */
export const CreateBatch = Input({
  project_id: ProjectIdField,
  input_file_id: Type.String({ minLength: 1, maxLength: 100, description: 'The uploaded JSONL file (file-…, purpose "batch").', ...says('must be a file id') }),
  endpoint: Type.Enum(BATCH_ENDPOINTS, { description: 'What every line calls.', ...says(`must be one of ${BATCH_ENDPOINTS.join(', ')}`) }),
  completion_window: Type.Literal('24h', { description: 'The time the batch has to finish: "24h".', ...says('must be "24h"') }),
  metadata: Type.Optional(Type.Union([Metadata, Type.Null()], { description: 'Up to 16 key-value pairs (keys up to 64 characters, values up to 512).' })),
});
export type CreateBatch = Static<typeof CreateBatch>;

/** GET /v1/batches: the gateway's pagination, and OpenAI's `after` (the SDK's cursor) as starting_after. */
export const ListBatchesQuery = Input({
  ...pageQueryProperties(),
  after: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "OpenAI's name for starting_after.", ...says('must be an object id') })),
  project_id: ProjectIdFilter,
  status: Type.Optional(Type.Enum(BATCH_STATUSES, { description: 'Only batches in this status.', ...says(`must be one of ${BATCH_STATUSES.join(', ')}`) })),
});
export type ListBatchesQuery = Static<typeof ListBatchesQuery>;

export const CancelBatch = Input({ project_id: ProjectIdField });

/** The text fields of POST /v1/files (multipart). */
export const FileFields = Input({
  purpose: Type.Literal('batch', { description: 'What the file is for: "batch".', ...says('must be "batch"') }),
  project_id: ProjectIdField,
});
export type FileFields = Static<typeof FileFields>;

export const BatchIdParams = PathId('batch_id', "The batch's id (batch_…).");
export const FileIdParams = PathId('file_id', "The file's id (file-…).");
