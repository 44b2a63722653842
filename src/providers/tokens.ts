import type { ChatMessage } from './types.ts';

type Counter = (text: string) => number;
let counter: Promise<Counter> | null = null;

/** gpt-tokenizer (o200k) loads in about a quarter of a second, so only when a provider left its usage out. */
function load(): Promise<Counter> {
  counter ??= import('gpt-tokenizer').then(
    (m) => (text: string) => m.countTokens(text),
    () => (text: string) => Math.ceil(text.length / 4),
  );
  return counter;
}

/** Tokens of a text, when the provider did not report them (a stream cut short, a server without usage). */
export async function countTextTokens(text: string): Promise<number> {
  if (text === '') return 0;
  return (await load())(text);
}

/** Prompt tokens as OpenAI counts chat messages: about 3 per message plus 3 for the reply's priming. */
export async function countPromptTokens(messages: readonly ChatMessage[]): Promise<number> {
  const count = await load();
  return messages.reduce((n, m) => n + 3 + count(m.role) + count(m.content), 3);
}
