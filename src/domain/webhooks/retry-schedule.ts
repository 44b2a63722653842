/**
 * When the next attempt of a delivery is due, or null when none remains (the delivery is then `failed`).
 *
 * `scheduleS[i]` is the offset of attempt i + 1 from the FIRST attempt (spec 6.1.4: immediate, 30 s, 2 min, 10 min,
 * 1 h, 6 h), so a slow receiver does not push the whole schedule later. An attempt that ran late (the gateway was down)
 * keeps at least its scheduled gap to the next one, so a backlog is not fired at a failing receiver back to back. No
 * attempt is made at or past the horizon (24 h): after the last scheduled attempt, or when the next one would fall past
 * the horizon, retries stop.
 */
export function nextAttemptAt(
  firstAttemptAt: Date,
  attemptsMade: number,
  scheduleS: readonly number[],
  horizonS: number,
  lastAttemptAt: Date = firstAttemptAt,
): Date | null {
  const offsetS = scheduleS[attemptsMade];
  if (offsetS === undefined) return null;
  const gapS = offsetS - (scheduleS[attemptsMade - 1] ?? 0);
  const dueMs = Math.max(firstAttemptAt.getTime() + offsetS * 1000, lastAttemptAt.getTime() + gapS * 1000);
  if (dueMs >= firstAttemptAt.getTime() + horizonS * 1000) return null;
  return new Date(dueMs);
}
