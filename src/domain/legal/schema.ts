import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, Nullable, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';
import { Instructions, Text } from '../verticals/schema.ts';

export const MATTER_STATUSES = ['open', 'closed'] as const;
/** How many fields one mapping may ask for. */
export const MAX_MAPPING_FIELDS = 50;
/** The content types a contract sent as JSON may declare (PDF only as a file, multipart). */
export const JSON_CONTENT_TYPES = ['text/plain', 'text/markdown', 'text/html'] as const;

/** POST /v1/legal/matters, GraphQL createLegalMatter. */
export const CreateMatter = Input({
  project_id: ProjectIdField,
  name: Text(200, 'What the matter is (e.g. "Acme supply agreement").'),
  client: Type.Optional(Text(200, 'Whom the matter is for.')),
  description: Type.Optional(Text(10_000, 'The matter in more words.')),
});
export type CreateMatter = Static<typeof CreateMatter>;

/** PATCH /v1/legal/matters/{matter_id}, GraphQL updateLegalMatter: only while open (409 matter_closed). */
export const UpdateMatter = Input({
  project_id: ProjectIdField,
  name: Type.Optional(Text(200, 'What the matter is.')),
  client: Type.Optional(Nullable(Text(200, 'Whom the matter is for; null clears it.'))),
  description: Type.Optional(Nullable(Text(10_000, 'The matter in more words; null clears it.'))),
});
export type UpdateMatter = Static<typeof UpdateMatter>;

/** POST /v1/legal/matters/{matter_id}/close, GraphQL closeLegalMatter: closing a closed matter returns it unchanged. */
export const CloseMatter = Input({ project_id: ProjectIdField, reason: Type.Optional(Text(4000, 'Why the matter is closed.')) });
export type CloseMatter = Static<typeof CloseMatter>;

/** GET /v1/legal/matters, GraphQL legalMatters. */
export const ListMattersQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  status: Type.Optional(Type.Enum(MATTER_STATUSES, { description: 'Only matters in this status.', ...says('must be open or closed') })),
});
export type ListMattersQuery = Static<typeof ListMattersQuery>;

const ContractName = Text(200, "The contract's name (a multipart upload defaults to the file's name).");

/**
 * POST /v1/legal/matters/{matter_id}/contracts as JSON, GraphQL createLegalContract. A multipart form carries `file`
 * (text/plain, text/markdown, text/html or application/pdf) and the fields of ContractFields instead.
 */
export const CreateContract = Input({
  project_id: ProjectIdField,
  name: ContractName,
  content: Type.String({ description: "The contract's text (text/plain unless content_type says otherwise).", ...says('must be a string') }),
  content_type: Type.Optional(
    Type.Enum(JSON_CONTENT_TYPES, { description: 'text/plain (default), text/markdown or text/html.', ...says(`must be one of ${JSON_CONTENT_TYPES.join(', ')}`) }),
  ),
});
export type CreateContract = Static<typeof CreateContract>;

/** The multipart form's text fields, beside `file`. */
export const ContractFields = Input({
  project_id: Type.Optional(Type.String({ ...says('must be a project id') })),
  name: Type.Optional(ContractName),
});

export const ListQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });
export type ListQuery = Static<typeof ListQuery>;

const MappingField = Type.Object(
  {
    name: Text(100, 'The field\'s name, as the result names it (e.g. "governing_law"); unique in the mapping.'),
    description: Type.Optional(Text(1000, 'What the field means, for the model.')),
  },
  { additionalProperties: false, ...says({ type: 'must be an object {name, description?}' }) },
);

/** POST /v1/legal/contracts/{contract_id}/mappings, GraphQL requestLegalMapping: model work, queued. */
export const RequestMapping = Input({
  project_id: ProjectIdField,
  fields: Type.Array(MappingField, {
    minItems: 1,
    maxItems: MAX_MAPPING_FIELDS,
    description: `The fields to extract (1 to ${MAX_MAPPING_FIELDS}), each with a value and a verbatim quote.`,
    ...says(`must be a list of 1 to ${MAX_MAPPING_FIELDS} fields {name, description?}`),
  }),
  instructions: Instructions,
});
export type RequestMapping = Static<typeof RequestMapping>;

/** POST /v1/legal/contracts/{contract_id}/redlines, GraphQL requestLegalRedline: a playbook, instructions, or both. */
export const RequestRedline = Input({
  project_id: ProjectIdField,
  playbook: Type.Optional(Text(20_000, "The positions to hold (your playbook's text): what to accept, change or refuse.")),
  instructions: Instructions,
});
export type RequestRedline = Static<typeof RequestRedline>;

export const MatterIdParams = PathId('matter_id', "The matter's id (mat_…).");
export const ContractIdParams = PathId('contract_id', "The contract's id (ctr_…).");
export const MappingIdParams = PathId('mapping_id', "The mapping's id (map_…).");
export const RedlineIdParams = PathId('redline_id', "The redline's id (red_…).");
