/**
 * The things in flight at one moment (the responses not yet sent, the Redis calls not yet answered, the webhook
 * attempts running), oldest first: a doubly linked list, not a Set.
 *
 * Why not a Set: a long-lived Map or Set whose entries come and go with every request replaces its hash table every
 * few dozen deletions, and V8 links each replaced table to its successor (for iterators), entries and all. Once a
 * full GC has moved the current table to the old generation, the dead tables there keep every later table, and every
 * request those tables held, alive through the young-generation GCs: each request's objects are then promoted and
 * wait for the next full GC, which promotes the tables again, and so on. `bench/hash-table-churn.ts` shows it
 * without the gateway (53 MB promoted in 4 s against 1.3 MB); in the api it was 6-20% of all it allocated (README
 * "Performance and the hot path"). A removed node drops both its links, so nothing dead points at anything newer.
 */
export class InFlight<T> {
  private readonly head: Node<T> = { value: undefined as T, prev: null, next: null };
  private tail: Node<T> = this.head;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Adds `value` last; the handle removes it again. */
  add(value: T): InFlightHandle {
    const node: Node<T> = { value, prev: this.tail, next: null };
    this.tail.next = node;
    this.tail = node;
    this.count++;
    return node;
  }

  /** Removes the item `handle` names; a handle removed already (or cleared) is a no-op. */
  delete(handle: InFlightHandle): void {
    const node = handle as Node<T>;
    const prev = node.prev;
    if (prev === null) return;
    prev.next = node.next;
    if (node.next) node.next.prev = prev;
    else this.tail = prev;
    node.prev = null;
    node.next = null;
    this.count--;
  }

  /** The item added first of those still here. */
  oldest(): T | undefined {
    return this.head.next?.value;
  }

  /** Every item, oldest first (a copy: the callback may remove them). */
  values(): T[] {
    const out: T[] = [];
    for (let n = this.head.next; n !== null; n = n.next) out.push(n.value);
    return out;
  }

  /** Removes every item and returns them, oldest first. */
  drain(): T[] {
    const out: T[] = [];
    let n = this.head.next;
    while (n !== null) {
      const next = n.next;
      out.push(n.value);
      n.prev = null;
      n.next = null;
      n = next;
    }
    this.head.next = null;
    this.tail = this.head;
    this.count = 0;
    return out;
  }
}

/** What `add` returns: pass it to `delete`. */
export type InFlightHandle = object;

interface Node<T> {
  value: T;
  prev: Node<T> | null;
  next: Node<T> | null;
}
