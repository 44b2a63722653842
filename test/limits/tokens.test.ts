import { readFileSync } from 'node:fs';
import { countTokens } from 'gpt-tokenizer';
import { describe, expect, it, vi } from 'vitest';
import {
  countPromptTokens,
  countTextTokens,
  DEFAULT_COMPLETION_TOKENS,
  estimateTokens,
} from '../../src/limits/index.ts';
import { estimateTextTokens } from '../../src/limits/tokens.ts';

// The tokenizer the gateway loads lazily; counted, so a test can tell whether (and when) it was loaded.
const tokenizerLoads = vi.hoisted(() => ({ n: 0 }));
vi.mock('gpt-tokenizer/encoding/o200k_base', async (importOriginal) => {
  tokenizerLoads.n += 1;
  return importOriginal();
});

const messages = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Summarise the theory of relativity in one sentence, please.' },
];
const estimatedPrompt = 3 + messages.reduce((n, m) => n + 4 + estimateTextTokens(m.content), 0);

describe('estimateTokens (the token-window reservation)', () => {
  it('estimates the prompt without loading the tokenizer', () => {
    for (let i = 0; i < 50; i++) estimateTokens(messages, 100);
    expect(tokenizerLoads.n).toBe(0);
  });

  it('is the estimated prompt plus framing (4 per message, 3 for the reply) plus max_tokens', () => {
    expect(estimateTokens(messages, 100)).toBe(estimatedPrompt + 100);
    expect(estimateTokens(messages, 0)).toBe(estimatedPrompt);
    expect(estimateTokens([{ role: 'user', content: '' }], 0)).toBe(3 + 4);
  });

  it(`reserves ${DEFAULT_COMPLETION_TOKENS} completion tokens when max_tokens is absent`, () => {
    expect(DEFAULT_COMPLETION_TOKENS).toBe(256);
    expect(estimateTokens(messages)).toBe(estimatedPrompt + 256);
  });

  it('estimates the part of a huge message beyond 100,000 characters at one token per 3 characters, quickly', () => {
    const huge = 'lorem ipsum dolor sit amet '.repeat(40_000); // 1,080,000 characters
    const started = performance.now();
    const n = estimateTokens([{ role: 'user', content: huge }], 0);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(n).toBe(3 + 4 + estimateTextTokens(huge.slice(0, 100_000)) + Math.ceil((huge.length - 100_000) / 3));
  });
});

describe('estimateTextTokens against o200k', () => {
  const root = new URL('../../', import.meta.url);
  const texts: Record<string, string> = {
    'English prose': readFileSync(new URL('README.md', root), 'utf8').slice(0, 40_000),
    'TypeScript': readFileSync(new URL('src/limits/limiter.ts', root), 'utf8'),
    'JSON': readFileSync(new URL('package-lock.json', root), 'utf8').slice(0, 40_000),
    'a short prompt': 'Summarise the theory of relativity in one sentence, please.',
    'Chinese': '人工智能是计算机科学的一个分支，它企图了解智能的实质，并生产出一种新的能以人类智能相似的方式做出反应的智能机器。',
    'Japanese': 'こんにちは、世界！お元気ですか？今日はとても良い天気ですね。私は東京に住んでいます。',
    'Russian': 'Привет, мир! Как дела? Сегодня хорошая погода, и мы пойдём гулять в парк.',
    'German': 'Die Donaudampfschifffahrtsgesellschaftskapitänsmütze liegt auf dem Tisch. Übermäßig große Äpfel schmecken gut.',
    'emoji': '🌍🎉👍🏽🇪🇸 '.repeat(20),
    'numbers': '3.14159 2.71828 1234567890 42 1000000 '.repeat(20),
    'hex': '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'.repeat(10),
  };

  // Settling corrects any estimate, so sensible means: close for ordinary text, on the safe (high) side rather than
  // the low one, and never wildly off.
  it.each(Object.keys(texts))('stays within 0.85 to 2 times the real count for %s', (name) => {
    const text = texts[name]!;
    const ratio = estimateTextTokens(text) / countTokens(text);
    expect(ratio).toBeGreaterThanOrEqual(0.85);
    expect(ratio).toBeLessThanOrEqual(2);
  });

  it('is within 25% above the real count for English prose and code', () => {
    for (const name of ['English prose', 'TypeScript']) {
      const ratio = estimateTextTokens(texts[name]!) / countTokens(texts[name]!);
      expect(ratio).toBeGreaterThanOrEqual(1);
      expect(ratio).toBeLessThanOrEqual(1.25);
    }
  });

  it('counts nothing for nothing, and one token for a short word', () => {
    expect(estimateTextTokens('')).toBe(0);
    expect(estimateTextTokens('ping')).toBe(1);
    expect(estimateTextTokens('count these words')).toBe(3);
  });
});

describe('countTextTokens / countPromptTokens (when a provider reports no usage)', () => {
  it('loads the o200k tokenizer once, on first use, and counts exactly as o200k', async () => {
    expect(tokenizerLoads.n).toBe(0);
    expect(await countTextTokens('count these words')).toBe(3);
    const text = 'The quick brown fox jumps over 13 lazy dogs. 人工智能 🌍';
    expect(await countTextTokens(text)).toBe(countTokens(text));
    expect(await countTextTokens('')).toBe(0);
    expect(tokenizerLoads.n).toBe(1);
  });

  it('counts prompt tokens with the same framing as the estimate', async () => {
    const exact = 3 + messages.reduce((n, m) => n + 4 + countTokens(m.content), 0);
    expect(await countPromptTokens(messages)).toBe(exact);
  });
});
