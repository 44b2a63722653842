import { describe, expect, it } from 'vitest';
import { workKinds } from '../../src/domain/verticals/kinds.ts';
import { renderMessages, schemaName, structuredResult } from '../../src/domain/verticals/prompts.ts';
import { mockAnswer } from '../../src/providers/mock.ts';

describe('the built-in vertical prompts', () => {
  it.each(workKinds().map((k) => [k.kind, k] as const))('%s: named as its kind, answered validly by the mock providers', (kind, work) => {
    expect(work.prompt.name).toBe(kind);
    expect(work.prompt.schema).toBeDefined();
    const messages = renderMessages(work.prompt, Object.fromEntries(work.prompt.variables.map((v) => [v, `<${v}>`])));
    for (const v of work.prompt.variables) expect(messages.map((m) => m.content).join('\n')).toContain(`<${v}>`);
    const answer = mockAnswer(messages as never, undefined, {
      response_format: { type: 'json_schema', json_schema: { name: schemaName(work.prompt), schema: work.prompt.schema!, strict: true } },
    } as never);
    expect(() => structuredResult(work.prompt, answer.content)).not.toThrow();
  });

  it('renders objects as JSON and text without HTML escaping', () => {
    const [m] = renderMessages({ name: 'x', variables: ['a', 'b'], messages: [{ role: 'user', content: '{{a}} | {{b}}' }] }, { a: '<&>"', b: { k: [1] } });
    expect(m!.content).toBe('<&>" | {\n  "k": [\n    1\n  ]\n}');
  });

  it('refuses an answer that is not JSON or not of the schema (structured_output_failed)', () => {
    const prompt = workKinds()[0]!.prompt;
    expect(() => structuredResult(prompt, 'hello')).toThrow(expect.objectContaining({ code: 'structured_output_failed' }));
    expect(() => structuredResult(prompt, '{"summary": "x"}')).toThrow(expect.objectContaining({ code: 'structured_output_failed' }));
  });
});
