import type { PromptTemplate } from '../verticals/prompts.ts';

/**
 * The Dev vertical's built-in prompts, template-shaped: a project's own template published under the same name
 * (`dev.review`, `dev.pull_request_summary`, `dev.test`, `dev.answer`) replaces one, with the variables it declares.
 * Those whose result has fields ask for JSON against their schema (response_format json_schema, checked with ajv);
 * the schema stays the built-in's when a project's template replaces the messages.
 */

export const SEVERITIES = ['info', 'minor', 'major', 'critical'] as const;

export const REVIEW_PROMPT: PromptTemplate = {
  name: 'dev.review',
  variables: ['repository', 'title', 'diff', 'context'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You are a senior engineer reviewing a pull request [svc:dev.review]. Read the diff and comment only on real ' +
        'problems: bugs, security issues, missing error handling, unclear code. Each comment names the file path and the ' +
        'line number in the new version of the file. Answer only with JSON matching the given schema.',
    },
    {
      role: 'user',
      content:
        'Repository: {{repository}}\nTitle: {{title}}\n\nDiff:\n{{diff}}\n\n{{#context}}Related code from the repository:\n{{context}}{{/context}}',
    },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['summary', 'comments'],
    properties: {
      summary: { type: 'string' },
      comments: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['path', 'line', 'body', 'severity'],
          properties: {
            path: { type: 'string' },
            line: { type: 'integer', minimum: 1 },
            body: { type: 'string' },
            severity: { type: 'string', enum: [...SEVERITIES] },
          },
        },
      },
    },
  },
};

export const PULL_REQUEST_SUMMARY_PROMPT: PromptTemplate = {
  name: 'dev.pull_request_summary',
  variables: ['repository', 'title', 'description', 'diff'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You summarise pull requests for their reviewers [svc:dev.pull_request_summary]: what changes and why, file by ' +
        'file, and how risky the change is. Answer only with JSON matching the given schema.',
    },
    {
      role: 'user',
      content: 'Repository: {{repository}}\nTitle: {{title}}\n{{#description}}Description:\n{{description}}\n{{/description}}\nDiff:\n{{diff}}',
    },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['summary', 'changes', 'risk'],
    properties: {
      summary: { type: 'string' },
      changes: {
        type: 'array',
        items: { type: 'object', additionalProperties: false, required: ['path', 'description'], properties: { path: { type: 'string' }, description: { type: 'string' } } },
      },
      risk: { type: 'string', enum: ['low', 'medium', 'high'] },
    },
  },
};

export const TEST_PROMPT: PromptTemplate = {
  name: 'dev.test',
  variables: ['repository', 'path', 'file', 'framework', 'instructions', 'context'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You write unit tests [svc:dev.test]. Write one test file for the source file below, in the framework asked for ' +
        '(or the usual one for its language), covering its public behaviour and edge cases. Give the test file\'s path in ' +
        'the repository and its whole content. Answer only with JSON matching the given schema.',
    },
    {
      role: 'user',
      content:
        'Repository: {{repository}}\nFile: {{path}}\n{{#framework}}Framework: {{framework}}\n{{/framework}}\n{{file}}\n\n' +
        '{{#context}}Related code from the repository:\n{{context}}\n\n{{/context}}{{#instructions}}Instructions: {{instructions}}{{/instructions}}',
    },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['path', 'framework', 'content', 'notes'],
    properties: {
      path: { type: 'string' },
      framework: { type: 'string' },
      content: { type: 'string' },
      notes: { type: 'string' },
    },
  },
};

/** Q&A: a free answer citing the numbered sources ([1], [2], …); the citations are the sources given. */
export const ANSWER_PROMPT: PromptTemplate = {
  name: 'dev.answer',
  variables: ['repository', 'question', 'sources'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You answer questions about a code repository [svc:dev.answer] from the excerpts of its files below. Cite the ' +
        'excerpts you use by number in square brackets, e.g. [1]. If they do not contain the answer, say so.\n\n' +
        'Repository: {{repository}}\n\n{{sources}}',
    },
    { role: 'user', content: '{{question}}' },
  ],
};
