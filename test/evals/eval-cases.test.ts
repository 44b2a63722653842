import { describe, expect, it } from 'vitest';
import { parseCases } from '../../src/admin/app/eval-cases.ts';

describe("the console's pasted cases", () => {
  it('takes a JSON array as POST /v1/evals does', () => {
    const cases = [{ messages: [{ role: 'user', content: 'hi' }], assert: { type: 'exact', value: 'hi' } }];
    expect(parseCases(JSON.stringify(cases))).toEqual(cases);
  });

  it('turns CSV (quoted commas and quotes) into cases, contains by default', () => {
    const csv = 'id,input,expected,assert,value\nq1,"Hello, ""world""",world,,\nq2,2+2?,,regex,^4$\n';
    expect(parseCases(csv)).toEqual([
      { id: 'q1', messages: [{ role: 'user', content: 'Hello, "world"' }], expected: 'world', assert: { type: 'contains' } },
      { id: 'q2', messages: [{ role: 'user', content: '2+2?' }], assert: { type: 'regex', value: '^4$' } },
    ]);
  });

  it('makes the other columns template variables for a template run', () => {
    expect(parseCases('id,country,city,expected\nfr,France,Paris,Paris', { template: true })).toEqual([
      { id: 'fr', variables: { country: 'France', city: 'Paris' }, expected: 'Paris', assert: { type: 'contains' } },
    ]);
  });

  it('says what is wrong with a paste it cannot read', () => {
    expect(() => parseCases('just text')).toThrow(/JSON array of cases, or CSV/);
    expect(() => parseCases('question,answer\na,b')).toThrow(/"input" column/);
    expect(() => parseCases('{"a":1}')).toThrow();
  });
});
