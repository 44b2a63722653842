import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';
import { Instructions, Metadata, Text } from '../verticals/schema.ts';

export const GIT_HOSTS = ['github', 'gitlab', 'bitbucket', 'other'] as const;
export type GitHost = (typeof GIT_HOSTS)[number];
export const REPOSITORY_STATUSES = ['indexing', 'ready', 'failed'] as const;
export const TASK_STATUSES = ['queued', 'running', 'completed', 'failed'] as const;
/** Files one POST …/files may carry (each at most the plan's document limit, dev/limits.ts). */
export const MAX_FILES_PER_CALL = 1000;
export const MAX_PATH_CHARS = 1000;
export const MAX_TOP_K = 20;
export const DEFAULT_TOP_K = 5;

const GitHostField = Type.Enum(GIT_HOSTS, { description: `Where the repository lives: ${GIT_HOSTS.join(', ')}.`, ...says(`must be one of ${GIT_HOSTS.join(', ')}`) });
const Branch = Text(255, 'The default branch (default main).');
const CommentsAllowed = Type.Boolean({
  description: "Whether your Git app may post review comments on this repository (post_comments). Default: true on github, gitlab and bitbucket, false on other.",
  ...says('must be true or false'),
});
const RepositoryIdField = Type.String({ minLength: 1, maxLength: 200, description: 'The repository (rep_…).', ...says('must be a repository id') });
/** A diff in unified format; its cap is the plan's (dev/limits.ts: 409 diff_too_large), so the schema sets none. */
const Diff = Type.String({ minLength: 1, description: 'The change as a unified diff (git diff). At most the plan\'s cap in UTF-8 bytes: starter 200 KB, growth 1 MB, enterprise 5 MB (409 diff_too_large).', ...says('must be a non-empty string') });

/** A file path within the repository: relative, / separated, no . or .. segment. */
export const FilePath = Type.String({
  minLength: 1,
  maxLength: MAX_PATH_CHARS,
  pattern: '^(?!/)(?!.*(^|/)\\.{1,2}(/|$))(?!.*//)[^\\u0000\\\\]*[^/\\u0000\\\\]$',
  description: 'The file\'s path in the repository, relative and / separated (src/app.ts).',
  ...says(`must be a relative path of at most ${MAX_PATH_CHARS} characters, / separated, without . or .. segments`),
});

/** POST /v1/dev/repositories, GraphQL createDevRepository. */
export const CreateRepository = Input({
  project_id: ProjectIdField,
  name: Text(200, 'The repository\'s name (acme/api).'),
  git_host: Type.Optional(GitHostField),
  comments_allowed: Type.Optional(CommentsAllowed),
  default_branch: Type.Optional(Branch),
  metadata: Type.Optional(Metadata),
});
export type CreateRepository = Static<typeof CreateRepository>;

/** PATCH /v1/dev/repositories/{repository_id}, GraphQL updateDevRepository. */
export const UpdateRepository = Input({
  project_id: ProjectIdField,
  name: Type.Optional(Text(200, 'The repository\'s name.')),
  git_host: Type.Optional(GitHostField),
  comments_allowed: Type.Optional(CommentsAllowed),
  default_branch: Type.Optional(Branch),
  metadata: Type.Optional(Metadata),
});
export type UpdateRepository = Static<typeof UpdateRepository>;

export const ListRepositoriesQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });

const PostedFile = Type.Object(
  {
    path: FilePath,
    content: Type.String({ description: 'The file\'s text (UTF-8). At most the plan\'s document limit: starter 1 MB, growth 10 MB, enterprise 50 MB (413 document_too_large).', ...says('must be a string') }),
  },
  { additionalProperties: false, ...says('must be an object {path, content}') },
);

/** POST /v1/dev/repositories/{repository_id}/files, GraphQL postDevRepositoryFiles: (re)indexes the files posted. */
export const PostFiles = Input({
  project_id: ProjectIdField,
  files: Type.Array(PostedFile, {
    minItems: 1,
    maxItems: MAX_FILES_PER_CALL,
    description: `1 to ${MAX_FILES_PER_CALL} files {path, content}; a path posted before is replaced, an unchanged one left as it is.`,
    ...says(`must be a list of 1 to ${MAX_FILES_PER_CALL} files {path, content}`),
  }),
  replace: Type.Optional(
    Type.Boolean({ description: 'true: the repository\'s files become exactly those posted (the others are removed). Default false.', ...says('must be true or false') }),
  ),
});
export type PostFiles = Static<typeof PostFiles>;

export const ListFilesQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });

/** POST /v1/dev/repositories/{repository_id}/questions, GraphQL askDevRepository. */
export const AskQuestion = Input({
  project_id: ProjectIdField,
  question: Text(10_000, 'The question about the code.'),
  top_k: Type.Optional(
    Type.Integer({ minimum: 1, maximum: MAX_TOP_K, description: `Chunks of the repository's files given to the model, 1 to ${MAX_TOP_K} (default ${DEFAULT_TOP_K}).`, ...says(`must be an integer from 1 to ${MAX_TOP_K}`) }),
  ),
});
export type AskQuestion = Static<typeof AskQuestion>;

/** POST /v1/dev/reviews, GraphQL createDevReview. */
export const CreateReview = Input({
  project_id: ProjectIdField,
  repository_id: RepositoryIdField,
  diff: Diff,
  title: Type.Optional(Text(500, 'The pull request\'s title.')),
  post_comments: Type.Optional(
    Type.Boolean({
      description: 'true: dev.review.completed carries the comments for your Git app to post (403 git_host_forbidden when the repository\'s comments_allowed is false). Default false.',
      ...says('must be true or false'),
    }),
  ),
});
export type CreateReview = Static<typeof CreateReview>;

/** POST /v1/dev/pull-requests/summaries, GraphQL summarizePullRequest. */
export const SummarizePullRequest = Input({
  project_id: ProjectIdField,
  repository_id: Type.Optional(RepositoryIdField),
  title: Text(500, 'The pull request\'s title.'),
  description: Type.Optional(Text(20_000, 'The pull request\'s description.')),
  diff: Diff,
});
export type SummarizePullRequest = Static<typeof SummarizePullRequest>;

/** POST /v1/dev/tests, GraphQL generateDevTest. */
export const GenerateTest = Input({
  project_id: ProjectIdField,
  repository_id: RepositoryIdField,
  path: FilePath,
  framework: Type.Optional(Text(100, 'The test framework (vitest, jest, pytest, go test…); default: the model picks the usual one for the language.')),
  instructions: Instructions,
});
export type GenerateTest = Static<typeof GenerateTest>;

const ByRepository = Type.Optional(Type.String({ description: 'Only those of this repository (rep_…).', ...says('must be a repository id') }));
const ByStatus = Type.Optional(Type.Enum(TASK_STATUSES, { description: 'Only those in this status.', ...says(`must be one of ${TASK_STATUSES.join(', ')}`) }));
export const ListTasksQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter, repository_id: ByRepository, status: ByStatus });
export type ListTasksQuery = Static<typeof ListTasksQuery>;

export const RepositoryIdParams = PathId('repository_id', "The repository's id (rep_…).");
export const ReviewIdParams = PathId('review_id', "The review's id (rev_…).");
export const SummaryIdParams = PathId('summary_id', "The pull-request summary's id (prs_…).");
export const TestIdParams = PathId('test_id', "The test generation's id (tst_…).");
