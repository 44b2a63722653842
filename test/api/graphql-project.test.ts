import { describe, expect, it } from 'vitest';
import { graphqlProjectId } from '../../src/api/hooks/graphql-project.ts';

describe('graphqlProjectId: the project an operation names (Idempotency-Key scope)', () => {
  it('reads a literal, a variable and an input object', () => {
    expect(graphqlProjectId({ query: 'mutation { updateBudget(projectId: "prj_a", budgetUsd: 1) { projectId } }' })).toBe('prj_a');
    expect(graphqlProjectId({ query: 'query($p: ID!) { budget(projectId: $p) { projectId } }', variables: { p: 'prj_b' } })).toBe('prj_b');
    expect(graphqlProjectId({ query: 'mutation($i: CreateKeyInput!) { createKey(input: $i) { secret } }', variables: { i: { projectId: 'prj_c' } } })).toBe('prj_c');
    expect(graphqlProjectId({ query: 'mutation { createKey(input: { projectId: "prj_d", name: "n" }) { secret } }' })).toBe('prj_d');
  });

  it('reads only the operation that runs, fragments included, and not unused variables or text', () => {
    const query = 'query A { ...F } query B { keys(projectId: "prj_b") { totalCount } } fragment F on Query { keys(projectId: "prj_a") { totalCount } }';
    expect(graphqlProjectId({ query, operationName: 'A' })).toBe('prj_a');
    expect(graphqlProjectId({ query, operationName: 'B' })).toBe('prj_b');
    expect(graphqlProjectId({ query })).toBeNull();
    expect(graphqlProjectId({ query: '{ viewer { keyId } }', variables: { unused: { projectId: 'prj_x' } } })).toBeNull();
    expect(graphqlProjectId({ query: '{ viewer { keyId } } # projectId: "prj_x"' })).toBeNull();
  });

  it('names no project when several are named or the document does not parse', () => {
    expect(graphqlProjectId({ query: '{ a: keys(projectId: "prj_a") { totalCount } b: keys(projectId: "prj_b") { totalCount } }' })).toBeNull();
    expect(graphqlProjectId({ query: 'mutation { createKey(' })).toBeNull();
    expect(graphqlProjectId({ query: `{ ${'a { '.repeat(50_000)}` })).toBeNull();
    expect(graphqlProjectId('not an object')).toBeNull();
  });
});
