import { countTokens } from 'gpt-tokenizer';

/** Reserved for the completion when a request gives no max_tokens; settled to the real usage afterwards. */
export const DEFAULT_COMPLETION_TOKENS = 256;
/** Chat framing per message (role and separators) and for priming the reply, as OpenAI counts them. */
const TOKENS_PER_MESSAGE = 4;
const TOKENS_PER_REPLY = 3;
/** Beyond this many characters of one message the rest is estimated at one token per 3 characters (a safe side
 *  over-estimate for most text) instead of being tokenized, so that a 1 MB prompt cannot hold the event loop. */
const EXACT_CHARS = 100_000;

/**
 * Tokens to reserve before a provider call: the prompt counted with a real tokenizer (gpt-tokenizer, o200k_base, the
 * encoding of OpenAI's current models; other providers' tokenizers differ by a few percent, which settling corrects)
 * plus max_tokens, or DEFAULT_COMPLETION_TOKENS when the request has none.
 */
export function estimateTokens(messages: { role: string; content: string }[], maxTokens?: number): number {
  let prompt = TOKENS_PER_REPLY;
  for (const m of messages) {
    const content = typeof m.content === 'string' ? m.content : '';
    const exact = content.length > EXACT_CHARS ? content.slice(0, EXACT_CHARS) : content;
    prompt += TOKENS_PER_MESSAGE + countTokens(exact) + Math.ceil((content.length - exact.length) / 3);
  }
  const completion = maxTokens !== undefined && Number.isInteger(maxTokens) && maxTokens >= 0 ? maxTokens : DEFAULT_COMPLETION_TOKENS;
  return prompt + completion;
}
