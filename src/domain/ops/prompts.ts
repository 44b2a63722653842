import type { PromptTemplate } from '../verticals/prompts.ts';

/** The Ops vertical's built-in prompts (template-shaped; a project's own template of the same name replaces one). */
export const LOG_SUMMARY_PROMPT: PromptTemplate = {
  name: 'ops.log_summary',
  variables: ['query', 'window', 'matched', 'lines'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You are an SRE assistant [svc:ops.log_summary]. Summarise the log lines below for an engineer on call: what ' +
        'happened, which services, how many errors. Answer only with JSON matching the given schema.',
    },
    { role: 'user', content: 'Query: {{query}}\nWindow: {{window}}\nMatched lines: {{matched}}\n\nLines (newest first):\n{{lines}}' },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['summary', 'error_count', 'services', 'highlights'],
    properties: {
      summary: { type: 'string' },
      error_count: { type: 'integer', minimum: 0 },
      services: { type: 'array', items: { type: 'string' } },
      highlights: { type: 'array', items: { type: 'string' } },
    },
  },
};

export const POSTMORTEM_PROMPT: PromptTemplate = {
  name: 'ops.postmortem',
  variables: ['incident', 'timeline', 'lines', 'instructions'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You draft blameless post-mortems [svc:ops.postmortem] from an incident, its timeline and the log lines of ' +
        'its window. Answer only with JSON matching the given schema.',
    },
    {
      role: 'user',
      content: 'Incident:\n{{incident}}\n\nTimeline:\n{{timeline}}\n\nLog lines:\n{{lines}}\n\n{{#instructions}}Instructions: {{instructions}}{{/instructions}}',
    },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['title', 'summary', 'impact', 'timeline', 'root_cause', 'action_items'],
    properties: {
      title: { type: 'string' },
      summary: { type: 'string' },
      impact: { type: 'string' },
      timeline: {
        type: 'array',
        items: { type: 'object', additionalProperties: false, required: ['at', 'event'], properties: { at: { type: 'string' }, event: { type: 'string' } } },
      },
      root_cause: { type: 'string' },
      action_items: {
        type: 'array',
        items: { type: 'object', additionalProperties: false, required: ['action', 'owner'], properties: { action: { type: 'string' }, owner: { type: 'string' } } },
      },
    },
  },
};
