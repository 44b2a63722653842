import type { ChatMessage, ContentPart } from '../../providers/types.ts';
import type { Ctx } from '../context.ts';
import type { CachedProject } from '../projects/cache.ts';
import { loadPiiParsers, PiiRedaction, type PiiCounts, type StreamRestorer } from './pii.ts';
import type { InferencePrivacyPorts } from './ports.ts';
import type { RetainedContent, RetainedRecord, RetainedResult } from './types.ts';

export type { RetainedContent, RetainedRecord, RetainedResult } from './types.ts';
import { DEFAULT_RETENTION_DAYS, type PiiOption } from './schema.ts';

const DAY_MS = 86_400_000;

/** One inference's privacy: its redaction (null when off), whether to restore, and how its content is retained. */
export interface PrivacyPlan {
  redaction: PiiRedaction | null;
  restore: boolean;
  /** zero: no content anywhere (no cache, no retained record, no idempotent replay of the answer). */
  zero: boolean;
  retentionDays: number;
  /** The request as retained (after redaction: what the provider saw). */
  request: { model: string; messages: ChatMessage[] };
}


/** Every message's text (tool messages' output included) and the arguments of the assistant's tool calls. */
function redactMessages(redaction: PiiRedaction, messages: ChatMessage[]): ChatMessage[] {
  return messages.map((m) => {
    let out = m;
    const content = m.content;
    if (typeof content === 'string') out = { ...m, content: redaction.redact(content) };
    else if (Array.isArray(content)) {
      out = {
        ...m,
        content: content.map((p: ContentPart) => (p.type === 'text' ? { ...p, text: redaction.redact(p.text) } : p)),
      } as ChatMessage;
    }
    if (m.tool_calls) {
      out = {
        ...out,
        tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function, arguments: redaction.redactJson(c.function.arguments) } })),
      };
    }
    return out;
  });
}

/** Whether this request's messages are redacted: its `pii` option, else the project's default. */
function redacts(project: CachedProject, option: PiiOption | null | undefined): boolean {
  return option ? option.redact : (project.privacy?.piiRedact ?? false);
}

/**
 * What planPrivacy needs loaded first: the PII parsers, when this request redacts and they are not loaded yet (the
 * first such request of the process waits for them); null otherwise.
 */
export function privacyReady(project: CachedProject, option: PiiOption | null | undefined): Promise<void> | null {
  return redacts(project, option) ? loadPiiParsers() : null;
}

/**
 * Runs in the pipeline's plan step, after the project is known and before the cache key, the reservation and the
 * provider (CONTRACT §11): the request's `pii` option, else the project's default, decides the redaction. Returns the
 * messages the rest of the pipeline (cache key included) uses. Throws pii_redaction_failed past SVC_PII_TIMEOUT_MS.
 */
export function planPrivacy(
  ports: InferencePrivacyPorts,
  ctx: Ctx,
  project: CachedProject,
  model: string,
  messages: ChatMessage[],
  option: PiiOption | null | undefined,
): { plan: PrivacyPlan; messages: ChatMessage[] } {
  const settings = project.privacy;
  // The idempotency store then keeps no content of the answer either (api/hooks/idempotency.ts).
  if (settings?.retentionMode === 'zero') ctx.zeroRetention = true;
  const redact = redacts(project, option);
  let redaction: PiiRedaction | null = null;
  let out = messages;
  if (redact) {
    redaction = new PiiRedaction({ timeoutMs: ports.piiTimeoutMs, now: ports.monotonicNow });
    out = redactMessages(redaction, messages);
  }
  return {
    plan: {
      redaction,
      restore: redact && option?.restore === true,
      zero: settings?.retentionMode === 'zero',
      retentionDays: settings?.retentionDays ?? DEFAULT_RETENTION_DAYS,
      request: { model, messages: out },
    },
    messages: out,
  };
}

/**
 * The retained record of an inference (CONTRACT §12), handed to the outcome writer with its content in clear: it is
 * sealed where it is written (privacy/store.ts: one AES-GCM per database row; the usage stream's entry seals the
 * contents of a whole turn's outcomes at once), never on the request path. Zero retention: the id alone, no content.
 */
export function retainedRecord(
  plan: PrivacyPlan,
  inferenceId: string,
  createdAt: Date,
  status: 'succeeded' | 'failed',
  result: RetainedResult | null,
): RetainedRecord {
  if (plan.zero) return { inferenceId, status, sealed: null, retainedUntil: null };
  const content: RetainedContent = {
    request: plan.request,
    response: result
      ? {
          id: result.id,
          requestId: result.requestId,
          createdAt: result.createdAt.getTime(),
          model: result.model,
          route: result.route,
          region: result.region,
          cacheHit: result.cacheHit,
          content: result.content,
          finishReason: result.finishReason,
          ...(result.toolCalls ? { toolCalls: result.toolCalls } : {}),
          promptTokens: result.promptTokens,
          completionTokens: result.completionTokens,
          costMicros: result.costMicros.toString(),
          ...(plan.redaction ? { pii: { redacted: { ...plan.redaction.counts } } } : {}),
        }
      : null,
  };
  return {
    inferenceId,
    status,
    content,
    retainedUntil: createdAt.getTime() + plan.retentionDays * DAY_MS,
  };
}

interface RestorableCall {
  function: { name: string; arguments: string };
}

interface Restorable {
  content: string;
  toolCalls?: RestorableCall[];
  choices?: { content?: string | null; toolCalls?: RestorableCall[] }[];
  pii?: { redacted: PiiCounts };
}

/** The answer as the caller gets it: originals restored when asked, and the redaction's counts. */
export function finishPrivacy<R extends Restorable>(plan: PrivacyPlan | null | undefined, result: R): R {
  const redaction = plan?.redaction;
  if (!redaction) return result;
  const out: R = { ...result, pii: { redacted: { ...redaction.counts } } };
  if (plan.restore) {
    const calls = <C extends RestorableCall>(list: C[] | undefined) =>
      list?.map((c) => ({ ...c, function: { ...c.function, arguments: redaction.restoreInJson(c.function.arguments) } }));
    out.content = redaction.restore(result.content);
    if (result.toolCalls) out.toolCalls = calls(result.toolCalls);
    if (result.choices) {
      out.choices = result.choices.map((c) => ({
        ...c,
        ...(c.content ? { content: redaction.restore(c.content) } : {}),
        ...(c.toolCalls ? { toolCalls: calls(c.toolCalls) } : {}),
      }));
    }
  }
  return out;
}

type StreamEventLike<R> =
  | { type: 'delta'; content: string; choice?: number }
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments: string; choice?: number }
  | { type: 'done'; result: R }
  | { type: string };

/**
 * A streamed answer with the originals restored across chunk boundaries (a partial placeholder at a chunk's end
 * waits for the next chunk), per choice, and in each tool call's arguments (as JSON string content); what is held
 * back comes out before `done` or `error`.
 */
export async function* restoreStream<R extends Restorable, E extends StreamEventLike<R>>(
  plan: PrivacyPlan | null | undefined,
  events: AsyncGenerator<E>,
): AsyncGenerator<E> {
  const redaction = plan?.redaction;
  if (!redaction) return yield* events;
  const restorers = new Map<number, StreamRestorer>();
  const restorer = (choice: number) => {
    let r = restorers.get(choice);
    if (!r) restorers.set(choice, (r = redaction.streamRestorer()));
    return r;
  };
  const callRestorers = new Map<string, { choice: number; index: number; restorer: StreamRestorer }>();
  const callRestorer = (choice: number, index: number) => {
    const key = `${choice}:${index}`;
    let r = callRestorers.get(key);
    if (!r) callRestorers.set(key, (r = { choice, index, restorer: redaction.streamRestorer(true) }));
    return r.restorer;
  };
  for await (const e of events) {
    if (plan.restore && e.type === 'delta') {
      const d = e as E & { content: string; choice?: number };
      const content = restorer(d.choice ?? 0).push(d.content);
      if (content !== '') yield { ...d, content };
      continue;
    }
    if (plan.restore && e.type === 'tool_call') {
      const c = e as E & { index: number; id?: string; name?: string; arguments: string; choice?: number };
      const args = callRestorer(c.choice ?? 0, c.index).push(c.arguments);
      if (args !== '' || c.id !== undefined || c.name !== undefined) yield { ...c, arguments: args };
      continue;
    }
    if (e.type === 'done' || e.type === 'error') {
      for (const [choice, r] of restorers) {
        const rest = r.flush();
        if (rest !== '') yield { type: 'delta', content: rest, ...(choice ? { choice } : {}) } as unknown as E;
      }
      for (const { choice, index, restorer: r } of callRestorers.values()) {
        const rest = r.flush();
        if (rest !== '') yield { type: 'tool_call', index, arguments: rest, ...(choice ? { choice } : {}) } as unknown as E;
      }
      if (e.type === 'done') {
        const d = e as E & { result: R };
        yield { ...d, result: finishPrivacy(plan, d.result) };
        continue;
      }
    }
    yield e;
  }
}
