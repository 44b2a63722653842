import { invalid, SvcError } from '../../errors/svc-error.ts';
import type { ChatMessage } from '../../providers/types.ts';
import { requireProjectId, type Ctx } from '../context.ts';
import type { ProjectReader } from '../projects/ports.ts';
import type { PrivacyPorts } from './ports.ts';
import { getRetainedInference } from './service.ts';

/**
 * /v1/responses `store` and `previous_response_id` (CONTRACT §9, §12). `store: true` needs a project that retains
 * content (standard retention; under zero: 400 param store). `previous_response_id` names a retained response of the
 * project (else 400 param previous_response_id); its conversation (request messages without its instructions, as
 * OpenAI does, then its answer) comes before the new input. Returns those earlier messages.
 */
export async function priorConversation(
  ports: PrivacyPorts & { projectReader: ProjectReader },
  ctx: Ctx,
  body: { store?: boolean | null; previous_response_id?: string | null; project_id?: string | null },
): Promise<ChatMessage[]> {
  if (body.store !== true && body.previous_response_id == null) return [];
  const projectId = await requireProjectId(ctx, body.project_id ?? ctx.caller.projectId);
  const project = await ports.projectReader.get(projectId);
  const zero = project?.privacy?.retentionMode === 'zero';
  if (body.store === true && zero) {
    throw invalid('store', 'store: true needs a project that retains content; this project has zero retention (PUT /v1/projects/{id}/retention).');
  }
  if (body.previous_response_id == null) return [];
  const refuse = () =>
    invalid('previous_response_id', 'previous_response_id must name a retained response of this project (unknown, expired, or kept under zero retention).');
  if (zero) throw refuse();
  let previous;
  try {
    previous = await getRetainedInference(ports, ctx, body.previous_response_id);
  } catch (err) {
    if (err instanceof SvcError && (err.code === 'not_found' || err.code === 'record_not_retained')) throw refuse();
    throw err;
  }
  if (!previous.response || previous.projectId !== projectId) throw refuse();
  const earlier = previous.request.messages.filter((m) => m.role !== 'system' && m.role !== 'developer');
  const r = previous.response;
  const toolCalls = r.toolCalls as ChatMessage['tool_calls'];
  earlier.push(toolCalls ? { role: 'assistant', content: r.content === '' ? null : r.content, tool_calls: toolCalls } : { role: 'assistant', content: r.content });
  return earlier;
}
