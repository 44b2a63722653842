import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, Nullable, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';

/** CONTRACT §13: the content types a document may have. */
export const CONTENT_TYPES = ['text/plain', 'text/markdown', 'text/html', 'application/pdf'] as const;
export type ContentType = (typeof CONTENT_TYPES)[number];

export const QUERY_MODES = ['hybrid', 'keyword', 'vector'] as const;
export type QueryMode = (typeof QUERY_MODES)[number];

export const MAX_TOP_K = 50;
export const DEFAULT_TOP_K = 5;
/** Documents a query or an inference's rag option may name. */
export const MAX_DOCUMENT_IDS = 100;

const Metadata = Type.Record(
  Type.String({ minLength: 1, maxLength: 40 }),
  Type.Union([Type.String({ maxLength: 500 }), Type.Number(), Type.Boolean(), Type.Null()]),
  { maxProperties: 50, description: 'Up to 50 keys (1 to 40 characters), values strings (at most 500 characters), numbers, booleans or null.', ...says('must be an object of at most 50 keys with string, number, boolean or null values') },
);

const DocName = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S', description: 'The document\'s name, 1 to 200 characters.', ...says('must be a non-empty string of at most 200 characters') });

/** POST /v1/rag/documents as JSON, GraphQL uploadDocument. The multipart form carries the same fields beside `file`. */
export const UploadDocument = Input({
  project_id: ProjectIdField,
  name: DocName,
  content: Type.String({ description: 'The document\'s text (text/plain unless content_type says otherwise).', ...says('must be a string') }),
  content_type: Type.Optional(
    Type.Enum(['text/plain', 'text/markdown', 'text/html'], { description: 'text/plain (default), text/markdown or text/html.', ...says('must be one of text/plain, text/markdown, text/html') }),
  ),
  metadata: Type.Optional(Nullable(Metadata)),
});
export type UploadDocument = Static<typeof UploadDocument>;

/** The multipart form's fields (all text); `metadata` is a JSON object in a string. */
export const UploadFields = Input({
  project_id: Type.Optional(Type.String({ ...says('must be a project id') })),
  name: Type.Optional(DocName),
  metadata: Type.Optional(Type.String({ description: 'A JSON object.', ...says('must be a JSON object in a string') })),
});

/** GET /v1/rag/documents, GraphQL ragDocuments. */
export const ListDocumentsQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  status: Type.Optional(Type.Enum(['processing', 'ready', 'failed'], { description: 'Only documents in this status.', ...says('must be one of processing, ready, failed') })),
});
export type ListDocumentsQuery = Static<typeof ListDocumentsQuery>;

export const DocumentIdParams = PathId('document_id', 'The document\'s id (doc_…).');

const TopK = Type.Integer({ minimum: 1, maximum: MAX_TOP_K, description: `Chunks to return, 1 to ${MAX_TOP_K} (default ${DEFAULT_TOP_K}).`, ...says(`must be an integer from 1 to ${MAX_TOP_K}`) });
const DocumentIds = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
  maxItems: MAX_DOCUMENT_IDS,
  description: 'Search only these documents.',
  ...says(`must be an array of at most ${MAX_DOCUMENT_IDS} document ids`),
});
const QueryText = Type.String({ minLength: 1, maxLength: 10_000, pattern: '\\S', ...says('must be a non-empty string of at most 10000 characters') });

/** POST /v1/rag/query, GraphQL ragQuery (CONTRACT §13). */
export const RagQuery = Input({
  project_id: ProjectIdField,
  query: QueryText,
  top_k: Type.Optional(TopK),
  document_ids: Type.Optional(DocumentIds),
  mode: Type.Optional(Type.Enum(QUERY_MODES, { description: 'hybrid, keyword or vector. Default: hybrid when the project has an embedding model, else keyword.', ...says('must be one of hybrid, keyword, vector') })),
});
export type RagQuery = Static<typeof RagQuery>;

/** The inference option `rag` (CONTRACT §13): query defaults to the last user message. */
export const RagOption = Type.Object(
  {
    query: Type.Optional(QueryText),
    document_ids: Type.Optional(DocumentIds),
    top_k: Type.Optional(TopK),
  },
  { additionalProperties: false, ...says('must be an object {query?, document_ids?, top_k?}') },
);
export type RagOption = Static<typeof RagOption>;

/** PUT /v1/projects/{project_id}/rag, GraphQL setRagSettings: the embedding model, or null for keyword search only. */
export const SetRagSettings = Input({
  project_id: ProjectIdField,
  embedding_model: Nullable(Type.String({ minLength: 1, maxLength: 200, description: 'A model of type embedding (GET /v1/models), e.g. mock-embed-1; null: none.' }), {
    ...says('must be an embedding model id or null'),
  }),
});
export type SetRagSettings = Static<typeof SetRagSettings>;
