import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.ts';

/**
 * Issue 36, memory of the embedded default: PGlite's WASM heap never shrinks, and PostgreSQL's default 128 MB of
 * shared buffers grew it (and the gateway's RSS) by about 110 MB as data was read. The gateway opens PGlite with
 * small buffers: the heap stays at its initial 128 MB, also while reading a table larger than the buffers.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'svc-pglite-memory-'));
let db: Database | undefined;
afterAll(async () => {
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

const heapMb = (d: Database) => (d.pglite as unknown as { Module: { HEAP8: Uint8Array } }).Module.HEAP8.length / 1048576;

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
});
