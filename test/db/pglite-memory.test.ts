import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.ts';

/**
 * Memory of the embedded default: PGlite's WASM heap never shrinks, and PostgreSQL's default 128 MB of shared buffers
 * grew it (and the gateway's RSS) by about 110 MB as data was read. The gateway opens PGlite with small buffers: the
 * heap stays at its initial 128 MB, also while reading a table larger than the buffers; and ANALYZE samples few
 * enough rows that it does not leave tens of MB of the heap touched.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'svc-pglite-memory-'));
let db: Database | undefined;
afterAll(async () => {
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

const heapMb = (d: Database) => (d.pglite as unknown as { Module: { HEAP8: Uint8Array } }).Module.HEAP8.length / 1048576;
/** Resident MB of the mapping that holds PGlite's WebAssembly heap (the one mapping of exactly its size; Linux). */
const residentHeapMb = (d: Database) => {
  const size = `${(d.pglite as unknown as { Module: { HEAP8: Uint8Array } }).Module.HEAP8.length / 1024} kB`;
  const at = readFileSync('/proc/self/smaps', 'utf8').split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/).filter((m) => new RegExp(`^Size:\\s+${size}$`, 'm').test(m));
  expect(at).toHaveLength(1);
  return Number(/^Rss:\s+(\d+) kB$/m.exec(at[0]!)![1]) / 1024;
};

describe('the embedded database', () => {
  it('runs with 16 MB of shared buffers and maintenance memory, and its heap stays at 128 MB while reading 30 MB', async () => {
    db = await openDatabase({ databaseUrl: null, dataDir: dir });
    const show = async (name: string) => ((await db!.pglite!.query<Record<string, string>>(`SHOW ${name}`)).rows[0]![name]);
    expect(await show('shared_buffers')).toBe('16MB');
    expect(await show('maintenance_work_mem')).toBe('16MB');
    const before = heapMb(db);
    await db.pglite!.exec(`CREATE TABLE memory_probe (id int PRIMARY KEY, v text);
      INSERT INTO memory_probe SELECT i, repeat(md5(i::text), 24) FROM generate_series(1, 40000) i;`);
    const size = (await db.pglite!.query<{ mb: number }>(`SELECT pg_total_relation_size('memory_probe') / 1048576 AS mb`)).rows[0]!.mb;
    expect(Number(size)).toBeGreaterThan(30);
    for (let i = 0; i < 3; i++) await db.pglite!.query('SELECT count(*), max(v) FROM memory_probe');
    // PGlite's module starts at 128 MB; with PostgreSQL's default 128 MB of buffers the heap is 184 MB from the start.
    expect(before).toBeLessThanOrEqual(128);
    expect(heapMb(db)).toBe(before);
  }, 60_000);

  it.runIf(process.platform === 'linux')('analyzes with 3,000 sample rows a table: ANALYZE of 60,000 wide rows leaves the heap within 20 MB of where it was', async () => {
    db ??= await openDatabase({ databaseUrl: null, dataDir: dir });
    expect((await db.pglite!.query<{ default_statistics_target: string }>('SHOW default_statistics_target')).rows[0]!.default_statistics_target).toBe('10');
    await db.pglite!.exec(`CREATE TABLE analyze_probe (id int PRIMARY KEY, project text, body text, data jsonb);
      INSERT INTO analyze_probe SELECT i, 'p' || (i % 50), repeat(md5(i::text), 20), jsonb_build_object('i', i, 's', repeat('x', 300)) FROM generate_series(1, 60000) i;`);
    const before = residentHeapMb(db);
    await db.pglite!.exec('ANALYZE analyze_probe');
    // With PostgreSQL's default (100: 30,000 sample rows) the same ANALYZE touched about 60 MB more of the heap, for good.
    expect(residentHeapMb(db) - before).toBeLessThan(20);
    const rows = await db.pglite!.query<{ n: number }>(`SELECT reltuples::int AS n FROM pg_class WHERE relname = 'analyze_probe'`);
    expect(rows.rows[0]!.n).toBeGreaterThan(50_000);
  }, 120_000);
});
