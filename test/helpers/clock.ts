import type { Clock } from '../../src/domain/context.ts';

/** An injectable clock: retry schedules and overlaps are hours long, tests move time instead of sleeping. */
export class FakeClock implements Clock {
  constructor(public ms: number = Date.now()) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  advanceHours(h: number): void {
    this.ms += h * 3_600_000;
  }
}
