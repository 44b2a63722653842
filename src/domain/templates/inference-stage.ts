import { SvcError, invalid } from '../../errors/svc-error.ts';
import type { TemplateReader } from './cache.ts';
import { renderMessages } from './render.ts';
import type { InferenceTemplate, TemplateMessage, TemplateParams } from './schema.ts';

/** The template an inference used: the response, usage record and event data carry it (CONTRACT §10). */
export interface AppliedTemplate {
  id: string;
  version: number;
}

/** The fields of an inference request this stage reads and fills (domain/inference/schema.ts's request). */
interface TemplatedRequest {
  template?: InferenceTemplate | null;
  model?: string;
  messages?: unknown[];
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
}

const PARAMS = ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty', 'seed', 'stop'] as const;

/**
 * An inference with `template: {id, version?, variables}` (CONTRACT §10) becomes a plain one: the version's messages
 * rendered, then the request's own messages; the version's model and params where the request sets none. Reads the
 * template through the in-process cache (cache.ts): no SQL once warm. Another project's template is 404 not_found
 * `template.id`; a required variable absent with no default is 400 template_variable_missing
 * `template.variables.<name>`.
 */
export async function applyTemplate<R extends TemplatedRequest>(
  templates: TemplateReader,
  projectId: string,
  request: R,
): Promise<{ request: R; template: AppliedTemplate }> {
  const ref = request.template!;
  const head = await templates.template(ref.id);
  if (!head || head.projectId !== projectId) throw new SvcError('not_found', { param: 'template.id', message: 'No such template.' });
  const number = ref.version ?? head.latestVersion;
  const version = await templates.version(head.id, number);
  if (!version) throw new SvcError('not_found', { param: 'template.version', message: `The template has no version ${number}.` });
  const rendered: TemplateMessage[] = renderMessages(version.messages, version.variables, ref.variables, 'template.variables');

  // Built without `template` (not deleted from a copy: a deleted key leaves a slow dictionary-mode object).
  const { template: _used, ...rest } = request;
  const out = { ...rest, messages: [...rendered, ...(request.messages ?? [])] } as R;
  if (out.model === undefined || out.model === '') {
    if (version.model === null) throw invalid('model', 'Missing required parameter: model (the template sets none).');
    out.model = version.model;
  }
  const params: TemplateParams = version.params ?? {};
  for (const k of PARAMS) if (params[k] !== undefined && out[k] == null) (out as TemplatedRequest)[k] = params[k] as never;
  if (params.max_tokens !== undefined && out.max_tokens == null && out.max_completion_tokens == null) out.max_tokens = params.max_tokens;
  return { request: out, template: { id: head.id, version: number } };
}
