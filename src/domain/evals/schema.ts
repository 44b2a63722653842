import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { ChatMessageSchema, MAX_MESSAGES } from '../inference/schema.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, Name, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';

/** CONTRACT §14: at most 1,000 cases a run; concurrency 1 to 16, default 4. */
export const MAX_CASES = 1_000;
export const MAX_CONCURRENCY = 16;
export const DEFAULT_CONCURRENCY = 4;
export const ASSERT_TYPES = ['exact', 'contains', 'regex', 'json_schema', 'llm_judge'] as const;
export type AssertType = (typeof ASSERT_TYPES)[number];
export const EVAL_STATUSES = ['queued', 'running', 'completed', 'failed', 'canceled'] as const;
export type EvalStatus = (typeof EVAL_STATUSES)[number];
/** Regex assertions: a pattern longer than this is refused (see assertions.ts for the rest of the guard). */
export const MAX_REGEX_LENGTH = 500;
const MAX_TEXT = 100_000;

const Text = (description: string, max = MAX_TEXT) =>
  Type.String({ maxLength: max, description, ...says(`must be a string of at most ${max} characters`) });

export const EvalAssert = Type.Object(
  {
    type: Type.Enum(ASSERT_TYPES, { description: 'How the output is judged.', ...says(`must be one of ${ASSERT_TYPES.join(', ')}`) }),
    value: Type.Optional(Text('exact / contains: the text (default: the case\'s expected); regex: the pattern.')),
    schema: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), { description: 'json_schema: a JSON Schema (2020-12) the output must satisfy.', ...says('must be a JSON Schema object') }),
    ),
    judge_model: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'llm_judge: the model that judges.', ...says('must be a model id') })),
    rubric: Type.Optional(Text('llm_judge: what a passing output must do.', 10_000)),
  },
  { additionalProperties: false, ...says({ type: 'must be an object {type, value?, schema?, judge_model?, rubric?}' }) },
);
export type EvalAssert = Static<typeof EvalAssert>;

export const EvalCaseInput = Type.Object(
  {
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Your id for the case (default case_<n>).', ...says('must be a string of 1 to 100 characters') })),
    messages: Type.Optional(Type.Array(ChatMessageSchema, { minItems: 1, maxItems: MAX_MESSAGES, description: 'The conversation (runs with a model).' })),
    variables: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'The template variables (runs with a template).', ...says('must be an object') })),
    expected: Type.Optional(Text('The expected output (exact, contains, and the judge\'s reference).')),
    assert: EvalAssert,
  },
  { additionalProperties: false, ...says({ type: 'must be an object {id?, messages | variables, expected?, assert}' }) },
);
export type EvalCaseInput = Static<typeof EvalCaseInput>;

/** POST /v1/evals, GraphQL createEvalRun (CONTRACT §14). */
export const CreateEvalRun = Input({
  project_id: ProjectIdField,
  name: Name('The run\'s name.'),
  model: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The model each case runs on (or "auto").', ...says('must be a model id') })),
  template: Type.Optional(
    Type.Object(
      {
        id: Type.String({ minLength: 1, maxLength: 100, description: 'The template (tpl_…).' }),
        version: Type.Optional(Type.Integer({ minimum: 1, description: 'Its version (default the latest).' })),
      },
      { additionalProperties: false, ...says({ type: 'must be an object {id, version?}' }) },
    ),
  ),
  cases: Type.Array(EvalCaseInput, {
    minItems: 1,
    maxItems: MAX_CASES,
    description: `The cases, 1 to ${MAX_CASES}.`,
    ...says({ type: 'must be an array of cases', minItems: 'must hold at least one case', maxItems: `must hold at most ${MAX_CASES} cases` }),
  }),
  concurrency: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_CONCURRENCY,
      description: `Cases run at once, 1 to ${MAX_CONCURRENCY} (default ${DEFAULT_CONCURRENCY}).`,
      ...says(`must be an integer from 1 to ${MAX_CONCURRENCY}`),
    }),
  ),
});
export type CreateEvalRun = Static<typeof CreateEvalRun>;

/** GET /v1/evals, GraphQL evalRuns. */
export const ListEvalRunsQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  status: Type.Optional(Type.Enum(EVAL_STATUSES, { description: 'Only runs in this status.', ...says(`must be one of ${EVAL_STATUSES.join(', ')}`) })),
});
export type ListEvalRunsQuery = Static<typeof ListEvalRunsQuery>;

/** GET /v1/evals/{eval_id}/results: in case order; the cursor is a result's id (evc_…). */
export const ListEvalResultsQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });
export type ListEvalResultsQuery = Static<typeof ListEvalResultsQuery>;

/** POST /v1/evals/{eval_id}/cancel. */
export const CancelEvalRun = Input({ project_id: ProjectIdField });

export const EvalIdParams = PathId('eval_id', 'The run\'s id (evr_…).');
