import { SvcError } from '../../errors/svc-error.ts';
import type { RateLimitTicket } from '../../limits/index.ts';
import { usageCostMicros } from '../../kernel/money.ts';
import type { ChatMessage, Completion } from '../../providers/types.ts';
import type { Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import { finishPrivacy } from '../privacy/stage.ts';
import { askUntilValid, failureMessage } from './stages/structured-output.ts';
import { account, serveHit, tokensOf, withAttempts } from './account.ts';
import { admit, plan } from './admit.ts';
import { errorCodeOf, refuseOrRecord } from './tracker.ts';
import type { InferenceInput, InferenceResult, InferenceSurface, Validated } from './types.ts';
import { begin } from './validate.ts';

/**
 * POST /v1/inference. Order: validation → project state and residency → budget → cache → token reservation →
 * provider (with fallback) → settle tokens, spend, usage record and inference.completed. Every inference that gets
 * past validation writes one usage record and emits one inference.completed, success or error. In the steady state
 * no SQL runs on the way: see admit() and account() for the Redis round trips (two besides the auth hook's).
 */
export async function createInference(
  ports: InferencePorts,
  ctx: Ctx,
  ticket: RateLimitTicket,
  input: InferenceInput,
  surface: InferenceSurface = {},
): Promise<InferenceResult> {
  const { v, t } = await begin(ports, ctx, ticket, input, surface);
  try {
    const p = await plan(ctx, t, v);
    const { cached, reserved } = await admit(ctx, t, v, p);
    t.admittedAt = performance.now();
    if (cached.answer || !reserved) return finishPrivacy(t.privacy, withAttempts(v, await serveHit(t, cached.answer!), 0));
    const ask = async (messages: ChatMessage[]) => {
      const routed = await ports.providers.complete(p.routes, providerRequest(v, messages), undefined, t.hopLog());
      t.tried(routed.route);
      const c: Completion = routed.value;
      // The provider's usage as it came (no await: the gateway counts only when the provider reported none).
      const usage = c.usage ?? (await tokensOf(v, c.content, null, c.toolCalls, messages));
      return {
        content: c.content,
        finishReason: c.finishReason,
        toolCalls: c.toolCalls,
        logprobs: c.logprobs,
        choices: c.choices,
        thinking: c.thinking,
        usage,
        route: routed.route,
        costMicros: usageCostMicros(usage, routed.route.model),
      };
    };
    let first;
    try {
      first = await ask(v.messages);
    } catch (err) {
      await ticket.refund();
      throw err;
    }
    if (!v.output) return finishPrivacy(t.privacy, await account(t, v, p, first.route, first, cached.status, { status: 'succeeded' }));
    // CONTRACT §11: re-asks while the answer does not validate; every attempt is charged in the one usage record.
    const run = await askUntilValid(v.output, v.messages, first, ask);
    const failed = run.error !== undefined ? errorCodeOf(run.error) : run.errors ? 'structured_output_failed' : null;
    const result = await account(t, v, p, run.answer.route, run.answer, cached.status, failed ? { status: 'failed', errorCode: failed } : { status: 'succeeded' }, run.prior);
    if (run.error !== undefined) throw run.error;
    if (run.errors) throw new SvcError('structured_output_failed', { param: 'response_format', message: failureMessage(run.attempts, run.errors) });
    result.attempts = run.attempts;
    return finishPrivacy(t.privacy, result);
  } catch (err) {
    await refuseOrRecord(t, err);
    throw err;
  }
}

/** The provider request: options only when the request had any, so a plain request is what it always was. */
export function providerRequest(v: Validated, messages: ChatMessage[] = v.messages) {
  return v.options
    ? { messages, maxTokens: v.maxTokens, sampling: v.sampling, options: v.options }
    : { messages, maxTokens: v.maxTokens, sampling: v.sampling };
}
