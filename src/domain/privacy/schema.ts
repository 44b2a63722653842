import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { Input, PathId, ProjectIdField } from '../schema.ts';

/** CONTRACT §12: retention days 1 to 365, default 30. */
export const DEFAULT_RETENTION_DAYS = 30;
export const RETENTION_MODES = ['standard', 'zero'] as const;
export type RetentionMode = (typeof RETENTION_MODES)[number];

/** The `pii` option of /v1/inference and /v1/chat/completions (CONTRACT §11). */
export const PiiOption = Type.Object(
  {
    redact: Type.Boolean({ description: 'Replace e-mail addresses, phone numbers, card numbers, IBANs, US SSNs and IPs by placeholders before the provider sees them.' }),
    restore: Type.Optional(Type.Union([Type.Boolean(), Type.Null()], { description: 'Put the originals back into the answer.' })),
  },
  { additionalProperties: false, ...says('must be {redact: boolean, restore?: boolean}') },
);
export type PiiOption = Static<typeof PiiOption>;

/** PUT /v1/projects/{project_id}/pii, GraphQL setProjectPii. */
export const SetPii = Input({
  project_id: ProjectIdField,
  redact: Type.Boolean({ description: 'Redact PII in every inference of the project unless the request says otherwise.', ...says('must be a boolean') }),
});
export type SetPii = Static<typeof SetPii>;

/** PUT /v1/projects/{project_id}/retention, GraphQL setProjectRetention. */
export const SetRetention = Input({
  project_id: ProjectIdField,
  mode: Type.Enum(RETENTION_MODES, { description: 'standard: content kept encrypted for `days`; zero: no content stored anywhere.', ...says('must be one of standard, zero') }),
  days: Type.Optional(
    Type.Union([Type.Integer({ minimum: 1, maximum: 365 }), Type.Null()], {
      description: `How long content is kept under standard retention, 1 to 365 (default ${DEFAULT_RETENTION_DAYS}).`,
      ...says('must be an integer from 1 to 365, got {value}'),
    }),
  ),
});
export type SetRetention = Static<typeof SetRetention>;

export const InferenceIdParams = PathId('inference_id', 'The inference\'s id (inf_…; also the chat completion\'s and the response\'s id).');
