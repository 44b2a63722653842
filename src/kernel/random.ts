import { randomFillSync } from 'node:crypto';

/**
 * Random bytes drawn 4 KiB at a time from the CSPRNG (the source randomBytes uses), for the hot path's small draws
 * (ids: several per inference; IVs of sealed content: one per retained inference), where a randomBytes call and a
 * Buffer each were measurable.
 */
const pool = Buffer.allocUnsafe(4096);
let offset = pool.length;

/**
 * `n` (at most 4,096) fresh random bytes as a view into the shared pool: read (or copy) them before the next call,
 * which may overwrite them.
 */
export function pooledRandomBytes(n: number): Buffer {
  if (offset + n > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const view = pool.subarray(offset, offset + n);
  offset += n;
  return view;
}
