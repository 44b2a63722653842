import { describe, expect, it } from 'vitest';
import { CreateKey } from '../../src/domain/keys/schema.ts';
import { CreateRoutingPolicy } from '../../src/domain/routing/schema.ts';
import { parseInput, parseTextInput } from '../../src/domain/validation.ts';
import { UsageQuery } from '../../src/domain/usage/schema.ts';
import { SvcError } from '../../src/errors/svc-error.ts';

/** The refusal parseInput throws, as the API shows it. */
function refusal(schema: Parameters<typeof parseInput>[0], value: unknown): { code: string; param: string | null; message: string } {
  try {
    parseInput(schema, value);
  } catch (err) {
    expect(err).toBeInstanceOf(SvcError);
    const e = err as SvcError;
    return { code: e.code, param: e.param, message: e.message };
  }
  throw new Error('accepted');
}

const policy = (targets: unknown) => ({ name: 'p', strategy: 'weighted', targets });

// domain/validation.ts: the one place a schema error becomes invalid_request; REST's routes and the services share it.
describe('parseInput', () => {
  it('names a nested field by the path the API writes', () => {
    expect(refusal(CreateRoutingPolicy, policy([{ model: 'a' }, { model: 'b', weight: 0 }]))).toEqual({
      code: 'invalid_request',
      param: 'targets[1].weight',
      message: 'targets[1].weight must be an integer from 1 to 1000.',
    });
    expect(refusal(CreateRoutingPolicy, policy([{ model: 'a' }, 5])).param).toBe('targets[1]');
    expect(refusal(CreateRoutingPolicy, policy([{ weight: 2 }]))).toMatchObject({ param: 'targets[0].model', message: 'Missing required parameter: targets[0].model.' });
    expect(refusal(CreateRoutingPolicy, policy([{ model: 'a', cost: 1 }]))).toMatchObject({ param: 'targets[0].cost', message: 'Unknown parameter: targets[0].cost.' });
  });

  it('names a list of values itself, not the item', () => {
    expect(refusal(CreateKey, { name: 'k', scopes: ['keys:manage', 'root:all'] })).toEqual({
      code: 'invalid_request',
      param: 'scopes',
      message: 'Unknown scope: root:all.',
    });
  });

  it('names the top-level field, a missing one, an unknown one, and nothing for a body that is not an object', () => {
    expect(refusal(CreateKey, { name: 'k', scopes: ['keys:manage'], budget_usd: -1 })).toMatchObject({ param: 'budget_usd', message: 'budget_usd must be a number of at least 0.' });
    expect(refusal(CreateKey, { scopes: ['keys:manage'] })).toMatchObject({ param: 'name', message: 'Missing required parameter: name.' });
    expect(refusal(CreateKey, { name: 'k', scopes: ['keys:manage'], owner: 'me' })).toMatchObject({ param: 'owner', message: 'Unknown parameter: owner.' });
    expect(refusal(CreateKey, [1, 2])).toMatchObject({ param: null, message: 'The request must be a JSON object.' });
  });

  it('returns the value it accepts, and converts query text to the schema\'s types first', () => {
    const input = { name: 'k', scopes: ['keys:manage'] };
    expect(parseInput(CreateKey, input)).toBe(input);
    expect(parseTextInput(UsageQuery, { limit: '5', granularity: 'request' })).toEqual({ limit: 5, granularity: 'request' });
    expect(() => parseTextInput(UsageQuery, { limit: '0' })).toThrow('limit must be an integer between 1 and 100.');
  });
});
