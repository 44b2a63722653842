/** Milliseconds since the epoch; tests inject a fake one (retry schedules are hours long). */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
