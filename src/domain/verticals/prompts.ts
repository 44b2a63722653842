import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import Mustache from 'mustache';
import type { Db } from '../../db/client.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { InferenceInput } from '../inference/service.ts';
import type { PromptSource } from './ports.ts';

/**
 * A vertical's prompt, shaped as a prompt template (CONTRACT §10: `{messages, variables, model?, params?}`), plus the
 * JSON Schema of its result when the result has fields. The built-in ones are constants next to each vertical
 * (risk/prompts.ts, ops/prompts.ts); a project's own template version of the same name will replace one (see
 * PromptSource in ports.ts), so the name is the override's key and never changes.
 */
export interface PromptTemplate {
  /** e.g. `risk.assessment`: the name a project's template overrides it by. */
  name: string;
  messages: { role: 'system' | 'user' | 'assistant'; content: string }[];
  /** The variables the messages use; all are given by the vertical when the work runs. */
  variables: string[];
  /** The model; absent: `auto`, the project's default routing. */
  model?: string;
  params?: { temperature?: number; max_tokens?: number };
  /** The result's JSON Schema (2020-12): asked for with response_format json_schema and checked with ajv. */
  schema?: Record<string, unknown>;
}

/** Mustache without HTML escaping: prompts are text, not HTML. */
const TEXT = { escape: (s: string) => s };

/** The variables as prompts see them: objects and lists as indented JSON text, so a prompt can embed them. */
export const promptView = (variables: Record<string, unknown>): Record<string, string | number | boolean> =>
  Object.fromEntries(
    Object.entries(variables).map(([k, v]) => [k, v !== null && typeof v === 'object' ? JSON.stringify(v, null, 2) : (v as string | number | boolean)]),
  );

/** Renders each message with the variables (promptView). */
export function renderMessages(template: PromptTemplate, variables: Record<string, unknown>): PromptTemplate['messages'] {
  const view = promptView(variables);
  return template.messages.map((m) => ({ role: m.role, content: Mustache.render(m.content, view, {}, TEXT) }));
}

const ajv = new Ajv2020({ strict: false, allErrors: false });
const compiled = new WeakMap<object, ValidateFunction>();

/** The model's answer as the template's structured result: JSON valid against its schema, else 422 structured_output_failed. */
export function structuredResult(template: PromptTemplate, content: string): unknown {
  if (!template.schema) return { text: content };
  let value: unknown;
  try {
    value = JSON.parse(content);
  } catch {
    throw new SvcError('structured_output_failed', { message: `The model's answer to ${template.name} is not JSON.` });
  }
  let validate = compiled.get(template.schema);
  if (!validate) compiled.set(template.schema, (validate = ajv.compile(template.schema)));
  if (!validate(value)) {
    const e = validate.errors?.[0];
    throw new SvcError('structured_output_failed', {
      message: `The model's answer to ${template.name} does not match its schema: ${e?.instancePath || '/'} ${e?.message ?? 'is invalid'}.`,
    });
  }
  return value;
}

/** response_format's schema name: OpenAI allows [A-Za-z0-9_-]{1,64}. */
export const schemaName = (template: PromptTemplate) => template.name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);

const pick = <T,>(o: Record<string, T>, names: string[]): Record<string, T> => Object.fromEntries(names.filter((n) => n in o).map((n) => [n, o[n]!]));

/**
 * The inference request of a built-in prompt, or of the project's own template of its name (rendered by the
 * pipeline's template stage, with the variables it declares): the queued work's runner and Dev's questions alike.
 */
export async function promptRequest(
  prompts: PromptSource,
  db: Db,
  projectId: string,
  template: PromptTemplate,
  variables: Record<string, unknown>,
): Promise<InferenceInput> {
  const own = await prompts.find(db, projectId, template.name);
  if (own) {
    return { project_id: projectId, model: own.model ?? template.model ?? 'auto', template: { id: own.templateId, version: own.version, variables: pick(promptView(variables), own.variables) } };
  }
  return {
    project_id: projectId,
    model: template.model ?? 'auto',
    messages: renderMessages(template, variables),
    ...(template.params?.temperature !== undefined ? { temperature: template.params.temperature } : {}),
    ...(template.params?.max_tokens !== undefined ? { max_tokens: template.params.max_tokens } : {}),
  };
}
