import { Type } from 'typebox';
import { Bool, Int, Json, NullableInt, NullableStr, Num, ObjectType, Str, TokenUsage, Unix, UnixOrNull } from '../response-fields.ts';

/** The response schemas of api/routes/dev.ts, field for field as its presenters write them. */

export const DevRepository = Type.Object(
  {
    id: Str('The repository id.'),
    object: ObjectType('svc.dev_repository'),
    project_id: Str('The project it belongs to.'),
    name: Str('Its name.'),
    git_host: Str('Where it is hosted (github, gitlab…).'),
    comments_allowed: Bool('Whether reviews may post comments.'),
    default_branch: Str('Its default branch.'),
    status: Str('indexing, ready or failed.'),
    files: Int('Files posted.'),
    file_counts: Type.Object(
      { indexing: Int('Files being indexed.'), ready: Int('Files indexed.'), failed: Int('Files that failed to index.') },
      { description: 'Files by indexing state.' },
    ),
    error: NullableStr('The first failed file\'s error, "<path>: <code>: <message>", or null.'),
    metadata: Json('The metadata given (a JSON object).'),
    created_at: Unix('Created'),
    updated_at: Unix('Last changed'),
  },
  { description: 'A repository indexed from posted files.' },
);

export const DevRepositoryFile = Type.Object(
  {
    id: Str('The file id.'),
    object: ObjectType('svc.dev_repository_file'),
    repository_id: Str('The repository.'),
    path: Str('Its path in the repository.'),
    bytes: Int('Its size, in bytes.'),
    sha256: Str('SHA-256 of its content, hex.'),
    status: Str('indexing, ready or failed.'),
    chunks: Int('Chunks indexed.'),
    error: NullableStr('Why indexing failed, or null.'),
    created_at: Unix('First posted'),
    updated_at: Unix('Last posted'),
  },
  { description: 'A file of a repository.' },
);

const taskHead = {
  id: Str('The task id.'),
  project_id: Str('The project it belongs to.'),
  repository_id: NullableStr('The repository it reads, or null.'),
  status: Str('queued, running, completed or failed.'),
  error: Json("A failed task's why, {code, message}, or null."),
  created_at: Unix('Requested'),
  completed_at: UnixOrNull('Finished'),
};

export const DevReview = Type.Object(
  {
    ...taskHead,
    object: ObjectType('svc.dev_review'),
    title: NullableStr('The change\'s title, or null.'),
    post_comments: Bool('Whether the comments are posted to the git host.'),
    diff_bytes: NullableInt('Size of the diff reviewed, in bytes.'),
    summary: Json("The model's summary; null until completed."),
    comments: Type.Array(Json('A comment: path, line, severity, body.'), { description: "The model's comments (empty until completed)." }),
  },
  { description: 'A code review (rev_).' },
);

export const DevPullRequestSummary = Type.Object(
  {
    ...taskHead,
    object: ObjectType('svc.dev_pull_request_summary'),
    title: NullableStr('The pull request\'s title, or null.'),
    description: NullableStr('Its description, or null.'),
    diff_bytes: NullableInt('Size of the diff, in bytes.'),
    summary: Json("The model's summary; null until completed."),
    changes: Type.Array(Json('A change: path and description.'), { description: 'The changes, file by file (empty until completed).' }),
    risk: Json("The model's risk rating; null until completed."),
  },
  { description: 'A pull-request summary (prs_).' },
);

export const DevTestGeneration = Type.Object(
  {
    ...taskHead,
    object: ObjectType('svc.dev_test_generation'),
    path: NullableStr('The file to test.'),
    framework: Json('The test framework (asked for, or chosen by the model), or null.'),
    instructions: NullableStr('Instructions given, or null.'),
    test_file: Json('The generated test, {path, content}; null until completed.'),
    notes: Json("The model's notes; null until completed."),
  },
  { description: 'A test generation (tst_).' },
);

export const DevAnswer = Type.Object(
  {
    id: Str("The inference's id."),
    object: ObjectType('svc.dev_answer'),
    project_id: Str('The project.'),
    repository_id: Str('The repository asked about.'),
    question: Str('The question.'),
    answer: Str("The model's answer, citing sources as [n]."),
    citations: Type.Array(
      Type.Object({
        source: Int('The source number the answer cites as [n].'),
        path: Str('The file.'),
        chunk_id: Str('The chunk.'),
        score: Num('Relevance: higher is better.'),
        text: Str("The chunk's text."),
      }),
      { description: 'The sources the model was given.' },
    ),
    model: Str('The model that answered.'),
    route: Str('The route it was served by.'),
    usage: TokenUsage,
    cost_usd: Num('What it cost, in USD.'),
    template_id: NullableStr('The template used, or null.'),
    created_at: Unix('Answered'),
    request_id: Str('The request id.'),
  },
  { description: 'An answer about a repository.' },
);
