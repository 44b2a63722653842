import type { Percentiles } from '../../domain/usage/ports.ts';

/** Samples of the last N values, for percentiles. */
export class SampleWindow {
  private readonly values: number[] = [];
  private next = 0;
  constructor(private readonly size = 2_000) {}
  add(v: number): void {
    if (this.values.length < this.size) this.values.push(v);
    else this.values[this.next++ % this.size] = v;
  }
  summary(): Percentiles {
    if (this.values.length === 0) return { p50: 0, p99: 0, max: 0 };
    const s = [...this.values].sort((a, b) => a - b);
    const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
    return { p50: at(0.5), p99: at(0.99), max: s[s.length - 1]! };
  }
}
