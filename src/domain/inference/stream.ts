import { SvcError } from '../../errors/svc-error.ts';
import type { RateLimitTicket } from '../../limits/index.ts';
import { isAbortError } from '../../providers/router.ts';
import type { Choice, ProviderUsage, StreamPart, ThinkingBlock, ToolCall } from '../../providers/types.ts';
import type { Ctx } from '../context.ts';
import type { InferencePorts } from './ports.ts';
import { restoreStream } from '../privacy/stage.ts';
import { failureMessage } from './stages/structured-output.ts';
import { account, serveHit, tokensOf, withAttempts } from './account.ts';
import { admit, plan } from './admit.ts';
import { providerRequest } from './call.ts';
import { refuseOrRecord } from './tracker.ts';
import type { InferenceInput, InferenceResult, InferenceStream, InferenceSurface, Lookup, Plan, StreamEvent } from './types.ts';
import { begin } from './validate.ts';

/** A cached answer as stream events: its text, its tool calls. */
async function* replayHit(result: InferenceResult): AsyncGenerator<StreamEvent> {
  if (result.content !== '' || !result.toolCalls) yield { type: 'delta', content: result.content };
  for (const [index, c] of (result.toolCalls ?? []).entries()) {
    yield { type: 'tool_call', index, id: c.id, name: c.function.name, arguments: c.function.arguments };
  }
  yield { type: 'done', result };
}

/** A thinking piece into its block (the anthropic kind's thinking, for the /v1/messages surface). */
function addThinking(blocks: ThinkingBlock[], part: Extract<StreamPart, { type: 'thinking' }>): void {
  if (part.redacted !== undefined) {
    blocks[part.index] = { type: 'redacted_thinking', data: part.redacted };
    return;
  }
  const b = (blocks[part.index] ??= { type: 'thinking', thinking: '', signature: '' });
  if (b.type !== 'thinking') return;
  if (part.thinking) b.thinking += part.thinking;
  if (part.signature) b.signature += part.signature;
}

/** One choice's answer as it streams in (choice 0 and, for n > 1, the others). */
class ChoiceBuilder {
  content = '';
  finishReason = 'stop';
  toolCalls: ToolCall[] | undefined;
  logprobs: unknown[] | undefined;

  toolCall(part: { index: number; id?: string; name?: string; arguments: string }): void {
    this.toolCalls ??= [];
    const call = (this.toolCalls[part.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
    if (part.id) call.id = part.id;
    if (part.name) call.function.name = part.name;
    call.function.arguments += part.arguments;
  }

  addLogprobs(lp: unknown): void {
    const content = (lp as { content?: unknown } | null)?.content;
    if (Array.isArray(content)) (this.logprobs ??= []).push(...content);
  }

  get calls(): ToolCall[] | undefined {
    return this.toolCalls?.filter(Boolean);
  }
}

/**
 * `stream: true`. Errors before the first token are thrown (the caller answers with a normal error); afterwards the
 * events carry them. A consumer that stops early (client gone: `signal` aborts the provider call) still gets the usage
 * recorded, as failed with error_code client_disconnected, charging the tokens streamed so far.
 */
export async function streamInference(
  ports: InferencePorts,
  ctx: Ctx,
  ticket: RateLimitTicket,
  input: InferenceInput,
  signal: AbortSignal,
  surface: InferenceSurface = {},
): Promise<InferenceStream> {
  const { v, t } = await begin(ports, ctx, ticket, input, surface);
  let p: Plan;
  let cached: Lookup;
  let routed;
  try {
    p = await plan(ctx, t, v);
    const admitted = await admit(ctx, t, v, p);
    t.admittedAt = performance.now();
    cached = admitted.cached;
    if (cached.answer || !admitted.reserved) {
      const result = withAttempts(v, await serveHit(t, cached.answer!), 0);
      const { content: _c, finishReason: _f, promptTokens: _p, completionTokens: _ct, costMicros: _m, ...head } = result;
      return { head, events: restoreStream(t.privacy, replayHit(result)) };
    }
    try {
      routed = await ports.providers.openStream(p.routes, providerRequest(v), signal, t.hopLog());
    } catch (err) {
      await ticket.refund();
      throw err;
    }
  } catch (err) {
    await refuseOrRecord(t, err);
    throw err;
  }
  t.tried(routed.route);
  const route = routed.route;
  const parts: AsyncIterable<StreamPart> = routed.value;
  const cacheStatus = cached.status;
  const head = t.answeredBy(route, cacheStatus);

  async function* relay(): AsyncGenerator<StreamEvent> {
    let content = '';
    let finishReason = 'stop';
    let usage: ProviderUsage | null = null;
    let ended: 'ok' | 'aborted' | SvcError | null = null;
    let result: InferenceResult | null = null;
    // Choice 0 beyond its text (tool calls, logprobs), and the other choices of n > 1: only when they occur.
    let first: ChoiceBuilder | undefined;
    let thinking: ThinkingBlock[] | undefined;
    let others: Map<number, ChoiceBuilder> | undefined;
    const builder = (choice: number | undefined): ChoiceBuilder => {
      if (!choice) return (first ??= new ChoiceBuilder());
      others ??= new Map();
      let b = others.get(choice);
      if (!b) others.set(choice, (b = new ChoiceBuilder()));
      return b;
    };
    try {
      for await (const part of parts) {
        if (part.type === 'delta') {
          if (part.choice) builder(part.choice).content += part.content;
          else content += part.content;
          yield part.choice ? { type: 'delta', content: part.content, choice: part.choice } : { type: 'delta', content: part.content };
        } else if (part.type === 'finish') {
          if (part.choice) builder(part.choice).finishReason = part.finishReason;
          else finishReason = part.finishReason;
        } else if (part.type === 'usage') usage = part.usage;
        else if (part.type === 'tool_call') {
          builder(part.choice).toolCall(part);
          yield { type: 'tool_call', index: part.index, id: part.id, name: part.name, arguments: part.arguments, choice: part.choice };
        } else if (part.type === 'logprobs') {
          builder(part.choice).addLogprobs(part.logprobs);
          yield { type: 'logprobs', logprobs: part.logprobs, choice: part.choice };
        } else if (part.type === 'thinking' && v.options?.anthropic) {
          addThinking((thinking ??= []), part);
          // A ThinkingEvent (types.ts): only the /v1/messages surface asks for thinking, and its format reads it.
          yield part as unknown as StreamEvent;
        }
      }
      ended = 'ok';
    } catch (err) {
      ended = signal.aborted || isAbortError(err)
        ? 'aborted'
        : new SvcError('model_unavailable', { message: 'The model provider failed in the middle of the response.' });
    } finally {
      // Also reached when the consumer stops iterating (return() at a yield): that is the client leaving.
      ended ??= 'aborted';
      const toolCalls = first?.calls;
      const logprobs = first?.logprobs ? { content: first.logprobs } : undefined;
      let choices: Choice[] | undefined;
      if (others) {
        choices = [{ index: 0, content, finishReason, toolCalls, logprobs }];
        for (const [index, b] of [...others].sort((a, b) => a[0] - b[0])) {
          choices.push({ index, content: b.content, finishReason: b.finishReason, toolCalls: b.calls, logprobs: b.logprobs ? { content: b.logprobs } : undefined });
        }
      }
      // CONTRACT §11 on a stream: checked once it has ended, without re-asks (the text has already been sent).
      const invalidOutput = ended === 'ok' && v.output && !first?.calls?.length ? v.output(content) : null;
      if (invalidOutput) ended = new SvcError('structured_output_failed', { param: 'response_format', message: failureMessage(1, invalidOutput) });
      const counted = choices ? choices.map((c) => c.content ?? '').join('') : content;
      result = await account(
        t,
        v,
        p,
        route,
        { content, finishReason, toolCalls, logprobs, choices, thinking, usage: await tokensOf(v, counted, usage, choices ? choices.flatMap((c) => c.toolCalls ?? []) : toolCalls) },
        cacheStatus,
        ended === 'ok'
          ? { status: 'succeeded' }
          : { status: 'failed', errorCode: ended === 'aborted' ? 'client_disconnected' : ended.code },
      );
    }
    if (ended === 'ok' && v.output) result.attempts = 1;
    if (ended === 'ok') yield { type: 'done', result };
    else if (ended instanceof SvcError) yield { type: 'error', error: ended };
  }
  return { head, events: restoreStream(t.privacy, relay()) };
}
