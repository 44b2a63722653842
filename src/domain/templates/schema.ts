import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, Name, Nullable, ProjectIdField, ProjectIdFilter } from '../schema.ts';

/** CONTRACT §10: prompt templates. Each input's schema is the route schema and the service's check (parseInput). */

export const TEMPLATE_ROLES = ['system', 'developer', 'user', 'assistant'] as const;
export const MAX_TEMPLATE_MESSAGES = 100;
export const MAX_TEMPLATE_VARIABLES = 100;
/** A Mustache name a template may declare: letters, digits and "_", not starting with a digit. */
export const VARIABLE_NAME = '^[A-Za-z_][A-Za-z0-9_]{0,63}$';

export const TemplateMessage = Type.Object(
  {
    role: Type.Enum([...TEMPLATE_ROLES], says(`must be one of ${TEMPLATE_ROLES.join(', ')}, got {value}`)),
    content: Type.String({ maxLength: 100_000, description: 'Mustache text: {{variable}} (no HTML escaping).', ...says('must be a string') }),
  },
  { additionalProperties: false, ...says({ type: 'must be an object {role, content}' }) },
);
export type TemplateMessage = Static<typeof TemplateMessage>;

export const TemplateVariable = Type.Object(
  {
    name: Type.String({ pattern: VARIABLE_NAME, description: 'The Mustache name ({{name}}).', ...says('must be 1 to 64 letters, digits or "_", not starting with a digit') }),
    required: Type.Optional(Type.Boolean({ description: 'Default true: an inference or render without it (and with no default) is refused.' })),
    default: Type.Optional(Type.Unknown({ description: 'The value used when the variable is not given.' })),
  },
  { additionalProperties: false, ...says({ type: 'must be an object {name, required?, default?}' }) },
);
export type TemplateVariable = Static<typeof TemplateVariable>;

const Messages = Type.Array(TemplateMessage, {
  minItems: 1,
  maxItems: MAX_TEMPLATE_MESSAGES,
  ...says({ type: `must be a non-empty array of at most ${MAX_TEMPLATE_MESSAGES} messages`, minItems: 'must not be empty', maxItems: `must hold at most ${MAX_TEMPLATE_MESSAGES} messages` }),
});
const Variables = Type.Array(TemplateVariable, { maxItems: MAX_TEMPLATE_VARIABLES, ...says({ type: 'must be an array of variables' }) });

/** The inference parameters a template may set; a request's own value wins (CONTRACT §10). */
export const TemplateParams = Type.Object(
  {
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2, ...says('must be a number from 0 to 2') })),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1, ...says('must be a number from 0 to 1') })),
    max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, ...says('must be an integer from 1 to 1000000') })),
    presence_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2, ...says('must be a number from -2 to 2') })),
    frequency_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2, ...says('must be a number from -2 to 2') })),
    seed: Type.Optional(Type.Integer(says('must be an integer'))),
    stop: Type.Optional(Type.Array(Type.String(), { maxItems: 4, ...says('must be an array of at most 4 strings') })),
  },
  { additionalProperties: false, ...says({ type: 'must be an object of inference parameters' }) },
);
export type TemplateParams = Static<typeof TemplateParams>;

const Model = Type.String({ minLength: 1, maxLength: 200, description: 'The model used unless the request names one ("auto" routes by policy).', ...says('must be a model id') });
const Description = Nullable(Type.String({ maxLength: 1000, ...says('must be a string of at most 1000 characters') }));
const Version = Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'A version number, from 1.', ...says('must be a positive integer') });
// String wordings only: the inference request's validator (domain/inference/schema.ts) reads these too.
const VariableValues = Type.Record(Type.String(), Type.Unknown(), {
  description: 'Values by variable name: strings, numbers, booleans, or lists/objects for Mustache sections.',
  ...says('must be an object of values by variable name'),
});

/** POST /v1/templates: creates the template and publishes version 1. */
export const CreateTemplate = Input({
  project_id: ProjectIdField,
  name: Name('Unique in the project.'),
  description: Type.Optional(Description),
  messages: Messages,
  variables: Type.Optional(Variables),
  model: Type.Optional(Nullable(Model)),
  params: Type.Optional(Nullable(TemplateParams)),
});
export type CreateTemplate = Static<typeof CreateTemplate>;

/** POST /v1/templates/{id}/versions: an immutable version; `version` defaults to latest + 1. */
export const PublishTemplateVersion = Input({
  project_id: ProjectIdField,
  version: Type.Optional(Version),
  messages: Messages,
  variables: Type.Optional(Variables),
  model: Type.Optional(Nullable(Model)),
  params: Type.Optional(Nullable(TemplateParams)),
});
export type PublishTemplateVersion = Static<typeof PublishTemplateVersion>;

/** POST /v1/templates/{id}/render. */
export const RenderTemplate = Input({
  project_id: ProjectIdField,
  version: Type.Optional(Version),
  variables: Type.Optional(VariableValues),
});
export type RenderTemplate = Static<typeof RenderTemplate>;

/** The `template` field of an inference request (CONTRACT §10). */
export const InferenceTemplate = Type.Object(
  {
    id: Type.String({ minLength: 1, description: 'The template (tpl_…).', ...says('must be a template id') }),
    version: Type.Optional(Version),
    variables: Type.Optional(VariableValues),
  },
  { additionalProperties: false, ...says('must be an object {id, version?, variables}') },
);
export type InferenceTemplate = Static<typeof InferenceTemplate>;

export const ListTemplatesQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });
export type ListTemplatesQuery = Static<typeof ListTemplatesQuery>;

/** GET /v1/templates/{id}/versions: the cursor is the version number (CONTRACT §10). */
export const ListVersionsQuery = Input({
  limit: pageQueryProperties().limit,
  starting_after: Type.Optional(Version),
  ending_before: Type.Optional(Version),
  project_id: ProjectIdFilter,
});
export type ListVersionsQuery = Static<typeof ListVersionsQuery>;

export const TemplateIdParams = Type.Object({ template_id: Type.String({ description: 'The template (tpl_…).' }) });
export const TemplateVersionParams = Type.Object({
  template_id: Type.String({ description: 'The template (tpl_…).' }),
  version: Type.Integer({ minimum: 1, description: 'The version number.', ...says('must be a positive integer') }),
});
