import { countTokens } from 'gpt-tokenizer';
import { describe, expect, it } from 'vitest';
import { DEFAULT_COMPLETION_TOKENS, estimateTokens } from '../../src/limits/index.ts';

describe('estimateTokens', () => {
  const messages = [
    { role: 'system', content: 'You are a terse assistant.' },
    { role: 'user', content: 'Summarise the theory of relativity in one sentence, please.' },
  ];
  const prompt = 3 + messages.reduce((n, m) => n + 4 + countTokens(m.content), 0);

  it('counts the prompt with the tokenizer, plus framing, plus max_tokens', () => {
    expect(estimateTokens(messages, 100)).toBe(prompt + 100);
    expect(estimateTokens(messages, 0)).toBe(prompt);
  });

  it(`reserves ${DEFAULT_COMPLETION_TOKENS} completion tokens when max_tokens is absent`, () => {
    expect(DEFAULT_COMPLETION_TOKENS).toBe(256);
    expect(estimateTokens(messages)).toBe(prompt + 256);
  });

  it('estimates the part of a huge message beyond 100,000 characters at one token per 3 characters, quickly', () => {
    const huge = 'lorem ipsum dolor sit amet '.repeat(40_000); // 1,080,000 characters
    const started = performance.now();
    const n = estimateTokens([{ role: 'user', content: huge }], 0);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(n).toBe(3 + 4 + countTokens(huge.slice(0, 100_000)) + Math.ceil((huge.length - 100_000) / 3));
  });
});
