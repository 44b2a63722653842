import { describe, expect, it } from 'vitest';
import { onceAsync } from '../../src/kernel/once.ts';

// The loader of the packages loaded where first used (PII parsers, Bedrock's AWS code, the alert mailer's transport).
describe('onceAsync', () => {
  it('runs the loader once and gives every caller its result', async () => {
    let runs = 0;
    const load = onceAsync(async () => ++runs);
    expect(await Promise.all([load(), load(), load()])).toEqual([1, 1, 1]);
    expect(await load()).toBe(1);
    expect(runs).toBe(1);
  });

  it('does not keep a failure: the next call loads again', async () => {
    let runs = 0;
    const load = onceAsync(async () => {
      runs += 1;
      if (runs === 1) throw new Error('cannot import');
      return 'loaded';
    });
    await expect(load()).rejects.toThrow('cannot import');
    expect(await load()).toBe('loaded');
    expect(await load()).toBe('loaded');
    expect(runs).toBe(2);
  });
});
