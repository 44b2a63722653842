import { describe, expect, it } from 'vitest';
import { isId, newId } from '../../src/kernel/ids.ts';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const timeOf = (id: string) => [...id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11)].reduce((ms, c) => ms * 32 + ALPHABET.indexOf(c), 0);

describe('newId', () => {
  it('is the prefix, an underscore, 10 characters of time and 16 of randomness, in Crockford base32', () => {
    const ms = Date.UTC(2026, 10, 27, 12, 0, 0, 123);
    for (const prefix of ['inf', 'wh', 'req'] as const) {
      const id = newId(prefix, ms);
      expect(id).toMatch(new RegExp(`^${prefix}_[0-9a-hjkmnp-tv-z]{26}$`));
      expect(isId(prefix, id)).toBe(true);
      expect(timeOf(id)).toBeGreaterThanOrEqual(ms);
    }
    expect(newId('prj', 0).length).toBe(30);
  });

  it('encodes the time so that ids sort as text in the order they were made, within a millisecond too', () => {
    const base = Date.UTC(2030, 0, 1);
    const ids: string[] = [];
    for (let i = 0; i < 2_000; i++) ids.push(newId('evt', base + Math.floor(i / 500)));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    expect(timeOf(ids[0]!)).toBe(base);
    expect(timeOf(ids.at(-1)!)).toBe(base + 3);
  });

  it('never goes back when the clock does', () => {
    const a = newId('del', Date.UTC(2031, 0, 1));
    const b = newId('del', Date.UTC(2020, 0, 1));
    expect(b > a).toBe(true);
    expect(timeOf(b)).toBe(Date.UTC(2031, 0, 1));
  });
});
