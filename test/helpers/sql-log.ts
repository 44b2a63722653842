import { vi } from 'vitest';

/**
 * A key's first authenticated call records its last_used_at without waiting for it (domain/auth/service.ts): that
 * UPDATE can reach the database after the call has answered. A test that counts the statements of a later request
 * waits for it first, so a loaded machine cannot move it into the counted window.
 */
export async function lastUsedWritten(statements: readonly string[]): Promise<void> {
  await vi.waitFor(
    () => {
      if (!statements.some((q) => /^\s*UPDATE\s.*"api_keys"/is.test(q))) throw new Error('last_used_at not written yet');
    },
    { timeout: 5_000, interval: 5 },
  );
}
