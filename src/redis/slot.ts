/**
 * Redis Cluster's hash slot of a key (CRC16/XMODEM of the key, or of its hash tag: the part between the first `{` and
 * the next `}` when that part is not empty, modulo 16384), as the cluster computes it. Keys with one tag share a slot,
 * so that a script or MULTI over them runs on one node.
 */
export const SLOTS = 16_384;

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

function crc16(bytes: Uint8Array, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ bytes[i]!) & 0xff]!;
  return crc;
}

const encoder = new TextEncoder();

export function keySlot(key: string): number {
  const bytes = encoder.encode(key);
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes, open + 1, close) % SLOTS;
  }
  return crc16(bytes, 0, bytes.length) % SLOTS;
}
