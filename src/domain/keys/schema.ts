import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, Nullable, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';
import { SCOPES } from './scopes.ts';
import { McpToolGrants } from '../mcp/schema.ts';
import { MAX_KEY_MODELS } from '../auth/actions.ts';

/** CONTRACT §3: the rotate overlap, in hours. */
/** A key name's length in code points after trimming (domain/validation.ts normalizeName: NFC, no invisible or mixed-script names). */
export const MAX_KEY_NAME_CHARS = 100;
export const MAX_OVERLAP_HOURS = 168;
/** 9999-12-31T23:59:59Z, the last second PostgreSQL's timestamp and JavaScript's Date both hold. */
export const MAX_UNIX_SECONDS = 253_402_300_799;
/** The largest budget a key or a project may have, in USD. */
export const MAX_BUDGET_USD = 1e12;

/** A budget in USD (micro-dollar precision); the rounding rule is the service's (keys/service.ts budgetMicros). */
export const BudgetUsd = (description: string, nullMeans: string) =>
  Nullable(Type.Number({ minimum: 0, maximum: MAX_BUDGET_USD }), {
    description,
    ...says({ minimum: `must be a number of at least 0${nullMeans}`, type: `must be a number of at least 0${nullMeans}`, maximum: 'is too large' }),
  });

const MODELS_SHAPE = 'must be a non-empty array of model ids, provider/model or provider/* entries';

/** `models` of CreateKey: checked entry by entry by checkKeyModels (the refusal names the list, not an index). */
export const KeyModels = Nullable(
  // Each entry's shape and length are checked by checkKeyModels, so that the refusal names the list, not an index.
  Type.Array(Type.String(says('must be entries of the form model, provider/model or provider/*')), {
    minItems: 1,
    maxItems: MAX_KEY_MODELS,
    ...says({ type: MODELS_SHAPE, minItems: `${MODELS_SHAPE} (null: every model)`, maxItems: `must list at most ${MAX_KEY_MODELS} entries` }),
  }),
  {
    description:
      'The models the key may use: a model id (`gpt-4o-mini`), `provider/model` or `provider/*` (the provider\'s name or kind in the providers file). null or absent: every model.',
  },
);

/** POST /v1/keys, GraphQL createKey. Checked by the service besides: the name's characters, the scope subset, expiry in the future. */
export const CreateKey = Input({
  project_id: ProjectIdField,
  name: Type.String({
    description: `1 to ${MAX_KEY_NAME_CHARS} characters after trimming, unique in the project ignoring case and compatibility forms.`,
    ...says(`must be a non-empty string of at most ${MAX_KEY_NAME_CHARS} characters`),
  }),
  scopes: Type.Array(Type.Enum(SCOPES, says('Unknown scope: {raw}')), {
    minItems: 1,
    description: 'The scopes the key holds (spec §5); a key can grant only scopes it holds itself.',
    ...says({ type: 'must be a non-empty array of scopes', minItems: 'must be a non-empty array of scopes' }),
  }),
  budget_usd: Type.Optional(
    BudgetUsd('Monthly spend limit of the key in USD; null or absent: none (the project\'s budget still applies).', ''),
  ),
  expires_at: Type.Optional(
    Nullable(Type.Integer({ maximum: MAX_UNIX_SECONDS }), {
      description: 'When the key stops authenticating, in Unix seconds; must be in the future. null or absent: never.',
      ...says({ type: 'must be a Unix time in seconds in the future', maximum: 'is too far in the future' }),
    }),
  ),
  mcp_tools: Type.Optional(McpToolGrants),
  models: Type.Optional(KeyModels),
});
export type CreateKey = Static<typeof CreateKey>;

/**
 * POST /v1/keys/{key_id}, GraphQL updateKey (beyond the contract: docs/DECISIONS.md): the fields given change, the
 * others stay; null clears budget_usd, expires_at, mcp_tools and models. Scopes never change (create a new key instead).
 */
export const UpdateKeyFields = Input({
  project_id: ProjectIdField,
  name: Type.Optional(CreateKey.properties.name),
  budget_usd: CreateKey.properties.budget_usd,
  expires_at: CreateKey.properties.expires_at,
  mcp_tools: CreateKey.properties.mcp_tools,
  models: CreateKey.properties.models,
});
export const UpdateKey = Nullable(UpdateKeyFields, says({ type: 'must be a JSON object' }));
export type UpdateKey = Static<typeof UpdateKey>;

/** POST /v1/keys/{key_id}/rotate (the body may be absent), GraphQL rotateKey. */
export const RotateKey = Nullable(
  Input({
    project_id: ProjectIdField,
    overlap_hours: Type.Optional(
      Nullable(Type.Integer({ minimum: 0, maximum: MAX_OVERLAP_HOURS }), {
        description: `How long the previous secret keeps working, 0 to ${MAX_OVERLAP_HOURS} hours (default 0).`,
        ...says(`must be an integer from 0 to ${MAX_OVERLAP_HOURS}`),
      }),
    ),
  }),
  says({ type: 'must be a JSON object' }),
);
export type RotateKey = Static<typeof RotateKey>;

/** GET /v1/keys, GraphQL keys. */
export const ListKeysQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });
export type ListKeysQuery = Static<typeof ListKeysQuery>;

export const KeyIdParams = PathId('key_id', 'The key\'s id (key_…).');
