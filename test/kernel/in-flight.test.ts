import { describe, expect, it } from 'vitest';
import { InFlight } from '../../src/kernel/in-flight.ts';

// What the drain (unanswered responses), the Redis health state (watched commands) and the webhook worker (attempts
// running) keep in flight, instead of a Set.
describe('InFlight', () => {
  it('keeps items oldest first, whichever are removed', () => {
    const list = new InFlight<string>();
    const a = list.add('a');
    const b = list.add('b');
    const c = list.add('c');
    expect(list.size).toBe(3);
    expect(list.oldest()).toBe('a');
    list.delete(b);
    expect(list.values()).toEqual(['a', 'c']);
    list.delete(a);
    expect(list.oldest()).toBe('c');
    list.delete(c);
    expect(list.size).toBe(0);
    expect(list.oldest()).toBeUndefined();
    expect(list.values()).toEqual([]);
    // Adding after the list emptied from its end still works (the tail moved back to the head).
    list.add('d');
    expect(list.values()).toEqual(['d']);
  });

  it('ignores a handle removed already, or drained', () => {
    const list = new InFlight<number>();
    const one = list.add(1);
    list.add(2);
    list.delete(one);
    list.delete(one);
    expect(list.size).toBe(1);
    const drained = list.drain();
    expect(drained).toEqual([2]);
    expect(list.size).toBe(0);
    list.delete(one);
    const three = list.add(3);
    expect(list.values()).toEqual([3]);
    list.delete(three);
    expect(list.size).toBe(0);
  });

  it('lets a callback over values() remove items (values() is a copy)', () => {
    const list = new InFlight<{ n: number; handle?: object }>();
    const items = [1, 2, 3].map((n) => {
      const item: { n: number; handle?: object } = { n };
      item.handle = list.add(item);
      return item;
    });
    for (const item of list.values()) list.delete(item.handle!);
    expect(list.size).toBe(0);
    expect(items.map((i) => i.n)).toEqual([1, 2, 3]);
  });
});
