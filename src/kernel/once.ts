/**
 * A loader run once: every call shares the first call's promise. A rejection is not kept, so the call after a failed
 * load (a package that could not be imported, say) tries again. For code loaded where it is first used.
 */
export function onceAsync<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | null = null;
  return () =>
    (pending ??= load().catch((err: unknown) => {
      pending = null;
      throw err;
    }));
}
