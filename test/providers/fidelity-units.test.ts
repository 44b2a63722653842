import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { picosPerToken, usageCostMicros } from '../../src/kernel/money.ts';
import { azureTakesDeveloperRole } from '../../src/providers/azure-openai.ts';
import { thinkingConfigOf } from '../../src/providers/gemini.ts';
import { refusedField, splitThoughtSignature, withoutThoughtSignatures, withThoughtSignature } from '../../src/providers/translate.ts';
import { refusedParam } from '../../src/providers/upstream.ts';

/** The pieces behind test/protocols/provider-fidelity.test.ts, on their own. */

describe("Gemini's thought signature in a tool call id", () => {
  it('round-trips any signature, and only adds [A-Za-z0-9_-] to the id', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9_-]{1,30}$/), fc.oneof(fc.base64String({ minLength: 4 }), fc.string({ minLength: 1 })), (id, signature) => {
        fc.pre(!/__t[su]_/.test(id));
        const carried = withThoughtSignature(id, signature);
        expect(carried).toMatch(/^[A-Za-z0-9_-]+$/);
        expect(splitThoughtSignature(carried)).toEqual({ id, signature });
      }),
    );
  });

  it('leaves an id without a signature as it is', () => {
    expect(withThoughtSignature('call_1', undefined)).toBe('call_1');
    expect(withThoughtSignature('call_1', '')).toBe('call_1');
    expect(splitThoughtSignature('call__tx_1')).toEqual({ id: 'call__tx_1' });
    const messages = [{ role: 'user' as const, content: 'hi' }];
    expect(withoutThoughtSignatures(messages)).toBe(messages);
  });
});

describe('what the adapters send', () => {
  it('reasoning_effort as a thinkingLevel from Gemini 3 on, a thinkingBudget before', () => {
    expect(thinkingConfigOf('gemini-3-flash-preview', 'minimal')).toEqual({ thinkingLevel: 'minimal' });
    expect(thinkingConfigOf('models/gemini-3.1-pro', 'high')).toEqual({ thinkingLevel: 'high' });
    expect(thinkingConfigOf('gemini-2.5-flash-lite', 'minimal')).toEqual({ thinkingBudget: 512 });
    expect(thinkingConfigOf('gemini-2.5-pro', 'medium')).toEqual({ thinkingBudget: 8192 });
    expect(thinkingConfigOf('gemini-2.5-pro', undefined)).toBeUndefined();
  });

  it('the developer role from Azure api-version 2024-12-01(-preview) on and on undated versions', () => {
    expect(azureTakesDeveloperRole('2024-10-21')).toBe(false);
    expect(azureTakesDeveloperRole('2024-08-01-preview')).toBe(false);
    expect(azureTakesDeveloperRole('2024-12-01-preview')).toBe(true);
    expect(azureTakesDeveloperRole('2025-04-01-preview')).toBe(true);
    expect(azureTakesDeveloperRole('v1')).toBe(true);
  });

  it("names the field of a provider's refusal: OpenAI's error.param, else a field in backticks", () => {
    const anthropic = JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: '`temperature` and `top_p` cannot both be specified for this model. Please use only one.' } });
    expect(refusedParam(anthropic)).toBe('temperature');
    expect(refusedParam(JSON.stringify({ message: 'The model returned the following errors: `topP` must be at most 1' }))).toBe('top_p');
    expect(refusedParam(JSON.stringify({ error: { message: 'bad', param: 'logit_bias' } }))).toBe('logit_bias');
    // A nested path is not a field the gateway knows by that name; nothing else named: null.
    expect(refusedParam(JSON.stringify({ error: { message: 'bad', param: 'messages[0].role' } }))).toBeNull();
    expect(refusedField('`foo` is wrong')).toBeNull();
  });
});

describe('usageCostMicros', () => {
  const price = (cacheRead?: number, cacheWrite?: number) => ({
    inputPicos: picosPerToken(3),
    outputPicos: picosPerToken(15),
    ...(cacheRead !== undefined ? { cacheReadPicos: picosPerToken(cacheRead) } : {}),
    ...(cacheWrite !== undefined ? { cacheWritePicos: picosPerToken(cacheWrite) } : {}),
  });

  it('bills cache reads and writes at their prices and the rest of the prompt at the input price', () => {
    const usage = { promptTokens: 1300, completionTokens: 10, cacheReadTokens: 1000, cacheWriteTokens: 200 };
    expect(usageCostMicros(usage, price(0.3, 3.75))).toBe(1500n);
    // Only a read price: the writes cost the input price.
    expect(usageCostMicros(usage, price(0.3))).toBe(300n + 300n + 600n + 150n);
    // No cache prices: the whole prompt at the input price.
    expect(usageCostMicros(usage, price())).toBe(3900n + 150n);
  });

  it('never bills more cache tokens than the prompt has', () => {
    expect(usageCostMicros({ promptTokens: 10, completionTokens: 0, cacheReadTokens: 50, cacheWriteTokens: 50 }, price(0, 0))).toBe(0n);
  });
});
