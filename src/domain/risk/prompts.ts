import type { PromptTemplate } from '../verticals/prompts.ts';

/**
 * The Risk vertical's built-in prompts (template-shaped: a project's own template of the same name will replace one,
 * see domain/verticals/ports.ts). Their results have fields, so each asks for JSON against its schema.
 */
const LEVEL = { type: 'string', enum: ['low', 'medium', 'high'] };

export const ASSESSMENT_PROMPT: PromptTemplate = {
  name: 'risk.assessment',
  variables: ['case', 'evidence', 'instructions'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You are a risk analyst [svc:risk.assessment]. Assess the case below from its description and evidence. ' +
        'Answer only with JSON matching the given schema.',
    },
    { role: 'user', content: 'Case:\n{{case}}\n\nEvidence (name, SHA-256, description):\n{{evidence}}\n\n{{#instructions}}Instructions: {{instructions}}{{/instructions}}' },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['summary', 'likelihood', 'impact', 'risks', 'recommendations'],
    properties: {
      summary: { type: 'string' },
      likelihood: LEVEL,
      impact: LEVEL,
      risks: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['title', 'severity', 'rationale'],
          properties: { title: { type: 'string' }, severity: LEVEL, rationale: { type: 'string' } },
        },
      },
      recommendations: { type: 'array', items: { type: 'string' } },
    },
  },
};

export const REPORT_PROMPT: PromptTemplate = {
  name: 'risk.report',
  variables: ['case', 'evidence', 'assessment', 'instructions'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You write risk reports for review [svc:risk.report]. Draft the report of the case below from its description, ' +
        'evidence and latest assessment; cite evidence by id. Answer only with JSON matching the given schema.',
    },
    {
      role: 'user',
      content:
        'Case:\n{{case}}\n\nEvidence:\n{{evidence}}\n\nLatest assessment:\n{{assessment}}\n\n{{#instructions}}Instructions: {{instructions}}{{/instructions}}',
    },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['title', 'executive_summary', 'findings', 'conclusion'],
    properties: {
      title: { type: 'string' },
      executive_summary: { type: 'string' },
      findings: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['finding', 'evidence_ids'],
          properties: { finding: { type: 'string' }, evidence_ids: { type: 'array', items: { type: 'string' } } },
        },
      },
      conclusion: { type: 'string' },
    },
  },
};
