import type { PromptTemplate } from '../verticals/prompts.ts';

/**
 * The Legal vertical's built-in prompts (template-shaped: a project's own template named `legal.mapping` or
 * `legal.redline` replaces one, see domain/verticals/ports.ts). Both results have fields, so each asks for JSON against
 * its schema; the gateway then checks the quotes (mapping) and applies the edits (redline) itself (legal/work.ts).
 */
const CONTRACT = 'Contract: {{contract_name}}\n\n<<<CONTRACT\n{{contract_text}}\nCONTRACT>>>';

export const MAPPING_PROMPT: PromptTemplate = {
  name: 'legal.mapping',
  variables: ['contract_name', 'contract_text', 'fields', 'instructions'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You are a contracts analyst [svc:legal.mapping]. Read the contract and extract each requested field. For each ' +
        'field answer: name (exactly as requested), value (the answer, concise; empty when the contract does not say), ' +
        'quote (the words of the contract the value comes from, copied verbatim, no ellipses; empty when not found) and ' +
        'found (whether the contract states it). Quotes are checked against the contract text: never paraphrase one. ' +
        'Answer only with JSON matching the given schema.',
    },
    {
      role: 'user',
      content: `${CONTRACT}\n\nFields (name and meaning):\n{{fields}}\n\n{{#instructions}}Instructions: {{instructions}}{{/instructions}}`,
    },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['fields'],
    properties: {
      fields: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['name', 'value', 'quote', 'found'],
          properties: { name: { type: 'string' }, value: { type: 'string' }, quote: { type: 'string' }, found: { type: 'boolean' } },
        },
      },
    },
  },
};

export const REDLINE_PROMPT: PromptTemplate = {
  name: 'legal.redline',
  variables: ['contract_name', 'contract_text', 'playbook', 'instructions'],
  params: { temperature: 0 },
  messages: [
    {
      role: 'system',
      content:
        'You are a contracts lawyer [svc:legal.redline]. Propose edits to the contract that bring it in line with the ' +
        'playbook and instructions. Each edit replaces one passage: original is copied verbatim from the contract, long ' +
        'enough to occur only once; proposed is the replacement text (empty to delete the passage); rationale says why, ' +
        'citing the playbook where it applies. Leave passages that need no change alone. Answer only with JSON matching ' +
        'the given schema.',
    },
    {
      role: 'user',
      content: `${CONTRACT}\n\n{{#playbook}}Playbook:\n{{playbook}}\n\n{{/playbook}}{{#instructions}}Instructions: {{instructions}}{{/instructions}}`,
    },
  ],
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['summary', 'edits'],
    properties: {
      summary: { type: 'string' },
      edits: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['original', 'proposed', 'rationale'],
          properties: { original: { type: 'string' }, proposed: { type: 'string' }, rationale: { type: 'string' } },
        },
      },
    },
  },
};
