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

// Crockford base32 in lower case: the ids sort as text in the order they were made, so an id is its own cursor.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

let lastMs = -1;
/** The random part of the last id: 16 characters of 5 bits each (80 bits). */
const lastRandom = new Uint8Array(16);
/** ALPHABET as character codes, and the buffer an id is written into: one string per id, no intermediate ones. */
const CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const out = Buffer.alloc(64);

/** Within one millisecond the random part is incremented, so ids made by one process are strictly increasing. */
function nextRandom(ms: number): Uint8Array {
  if (ms === lastMs) {
    for (let i = lastRandom.length - 1; i >= 0; i--) {
      if (lastRandom[i]! < 31) {
        lastRandom[i]!++;
        return lastRandom;
      }
      lastRandom[i] = 0;
    }
  }
  lastMs = ms;
  const random = pooledRandomBytes(16);
  for (let i = 0; i < 16; i++) lastRandom[i] = random[i]! & 31;
  return lastRandom;
}

export type IdPrefix = 'prj' | 'key' | 'req' | 'aud' | 'evt' | 'wh' | 'mcs' | 'del' | 'att' | 'inf' | 'pol' | 'apr' | 'opr' | 'grp' | 'ses' | 'tpl' | 'evr' | 'evc'
  // The verticals (CONTRACT §16): model-work jobs, Risk and Ops objects.
  | 'vjb' | 'cas' | 'evi' | 'rsa' | 'rpt' | 'inc' | 'tle' | 'log' | 'lgq' | 'pmt' | 'con' | 'slo' | 'doc' | 'chk'
  // Legal: matters, contracts, mappings, redlines.
  | 'mat' | 'ctr' | 'map' | 'red'
  // Dev: repositories, their files, reviews, pull-request summaries, test generations.
  | 'rep' | 'rfl' | 'rev' | 'prs' | 'tst';

/** Whether `value` has the form of an id newId makes with this prefix. */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.length === prefix.length + 27 && value.startsWith(`${prefix}_`) && [...value.slice(prefix.length + 1)].every((c) => ALPHABET.includes(c));
}

/** `<prefix>_` + 26 time-ordered characters (48-bit millisecond time, 80 random bits). */
export function newId(prefix: IdPrefix, nowMs: number = Date.now()): string {
  const ms = Math.max(nowMs, lastMs);
  const random = nextRandom(ms);
  const n = out.write(prefix, 0, 'latin1');
  out[n] = 0x5f; // _
  // 10 characters of time, most significant first.
  let t = ms;
  for (let i = n + 10; i > n; i--) {
    out[i] = CODES[t % 32]!;
    t = Math.floor(t / 32);
  }
  for (let i = 0; i < 16; i++) out[n + 11 + i] = CODES[random[i]!]!;
  return out.toString('latin1', 0, n + 27);
}
