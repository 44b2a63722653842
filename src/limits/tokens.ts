/**
 * Token counting, the one place for it: a cheap estimate for the token-window reservation before every provider call,
 * and a real tokenizer, loaded only when a provider leaves its usage out.
 *
 * Memory is the reason for the split. gpt-tokenizer's o200k_base tables cost about 55 MB of resident memory once
 * loaded (cl100k_base about 33 MB), a fifth of the gateway's budget, and the reservation runs on every inference, so
 * a tokenizer there is always loaded. The estimate below needs no table and is settled to the provider's reported
 * usage after the call anyway; the tokenizer is only needed for what gets charged when a provider reports no usage.
 */

/** Reserved for the completion when a request gives no max_tokens; settled to the real usage afterwards. */
export const DEFAULT_COMPLETION_TOKENS = 256;
/** Chat framing per message (3, plus 1 for the role: system, user and assistant are one token each) and for priming
 *  the reply, as OpenAI counts chat messages. */
const TOKENS_PER_MESSAGE = 4;
const TOKENS_PER_REPLY = 3;
/** Beyond this many characters of one message the rest is estimated at one token per 3 characters, without looking
 *  at it, so that a 1 MB prompt cannot hold the event loop. */
const EXACT_CHARS = 100_000;

/**
 * o200k_base's pre-tokenizer (from gpt-tokenizer's encodingParams/constants): the pieces its byte-pair merges work
 * within. Most English words with their leading space, number groups of up to 3 digits, punctuation runs.
 */
const CONTRACTION = String.raw`(?:'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE]))?`;
const PIECES = new RegExp(
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+${CONTRACTION}` +
    String.raw`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*${CONTRACTION}` +
    String.raw`|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
  'gu',
);
const WHITESPACE = /^\s+$/;
const WORDISH = /[\p{L}\p{N}]/u;

/**
 * Tokens of a text without a vocabulary, per o200k piece. A word piece: up to 6 bytes one token (the vocabulary holds
 * such words whole, leading space included), longer a token per 4 bytes of UTF-8. A punctuation piece: up to 6 bytes
 * one token, longer a token per 2 bytes. A CJK, kana, Hangul or other character from U+1100 up, or a non-ASCII
 * symbol, one token each; a character beyond the BMP (emoji) two. A whitespace run one per 32 characters.
 * Against o200k (this repository's README, code and JSON, the spec, and gpt-tokenizer's samples in some 40
 * languages): English prose and code 1.1 to 1.25 times, JSON 0.9, other Latin-script languages 0.95 to 1.5, CJK
 * 1.3 to 1.8, Cyrillic, Greek, Arabic, Hebrew 1.4 to 2.5, emoji 0.9 to 1.3, hex 0.96; under only for random strings
 * (base64 0.7, symbol soup 0.6 to 0.8).
 */
export function estimateTextTokens(text: string): number {
  let tokens = 0;
  // exec over the one shared expression (matchAll would clone and compile it on every call); synchronous, so no
  // other caller can move its lastIndex meanwhile.
  PIECES.lastIndex = 0;
  for (let m = PIECES.exec(text); m !== null; m = PIECES.exec(text)) {
    const piece = m[0];
    if (piece === '') break; // no alternative matches empty text; a guard against an endless loop all the same
    if (WHITESPACE.test(piece)) {
      tokens += Math.ceil(piece.length / 32);
      continue;
    }
    const words = WORDISH.test(piece);
    let bytes = 0;
    let whole = 0;
    for (let i = 0; i < piece.length; i++) {
      const c = piece.charCodeAt(i);
      if (c < 0x80) bytes += 1;
      else if (c >= 0xd800 && c <= 0xdbff) {
        whole += 2;
        i++; // the low surrogate
      } else if (c >= 0x1100 || !words) whole += 1;
      else bytes += c < 0x800 ? 2 : 3;
    }
    tokens += whole === 0 && bytes <= 6 ? 1 : whole + Math.ceil(bytes / (words ? 4 : 2));
  }
  return tokens;
}

/**
 * Tokens to reserve before a provider call: the prompt estimated (estimateTextTokens: no tokenizer on the request
 * path), plus chat framing, plus max_tokens, or DEFAULT_COMPLETION_TOKENS when the request has none. The windows
 * are settled to the provider's real usage afterwards, so the estimate only decides what a request may start with.
 */
export function estimateTokens(messages: readonly TokenMessage[], maxTokens?: number): number {
  const prompt = promptTokens(messages, (content) => {
    const exact = content.length > EXACT_CHARS ? content.slice(0, EXACT_CHARS) : content;
    return estimateTextTokens(exact) + Math.ceil((content.length - exact.length) / 3);
  });
  const completion = maxTokens !== undefined && Number.isInteger(maxTokens) && maxTokens >= 0 ? maxTokens : DEFAULT_COMPLETION_TOKENS;
  return prompt + completion;
}

type Counter = (text: string) => number;

/** A chat message as far as counting goes: its content is a string, an array of parts (their text counts), or null. */
export interface TokenMessage {
  role: string;
  content: string | readonly { type: string; text?: string }[] | null;
}

function textOf(content: TokenMessage['content']): string {
  if (typeof content === 'string') return content;
  if (content === null) return '';
  let out = '';
  for (const part of content) if (typeof part.text === 'string') out += part.text;
  return out;
}
let counter: Promise<Counter> | null = null;

/**
 * gpt-tokenizer with o200k_base, the encoding of OpenAI's current models (other models' tokenizers differ by a few
 * percent). Loaded on first use (about a quarter of a second, then about 55 MB resident for the life of the process):
 * only a provider that leaves its usage out pays for it. Should it fail to load, the estimate stands in.
 */
function tokenizer(): Promise<Counter> {
  counter ??= import('gpt-tokenizer/encoding/o200k_base').then(
    (m) => (text: string) => m.countTokens(text),
    () => estimateTextTokens,
  );
  return counter;
}

/** Tokens of a text, when the provider did not report them (a stream cut short, a server without usage). */
export async function countTextTokens(text: string): Promise<number> {
  if (text === '') return 0;
  return (await tokenizer())(text);
}

/** Prompt tokens of chat messages counted with the tokenizer, framing included, when the provider did not report them. */
export async function countPromptTokens(messages: readonly TokenMessage[]): Promise<number> {
  const count = await tokenizer();
  return promptTokens(messages, count);
}

function promptTokens(messages: readonly TokenMessage[], count: Counter): number {
  let n = TOKENS_PER_REPLY;
  for (const m of messages) n += TOKENS_PER_MESSAGE + count(textOf(m.content));
  return n;
}
