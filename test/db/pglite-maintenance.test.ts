import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.ts';

/**
 * The embedded database's own maintenance (src/db/pglite-maintenance.ts): PGlite has no checkpointer (it stalls once
 * about 530 MB of WAL piles up) and no autovacuum (the planner would never have statistics).
 */
const HOUR = 3_600_000;
const MB = 1024 * 1024;
const walSinceCheckpoint = async (db: Database) =>
  Number(
    (await db.pglite!.query<{ since: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), redo_lsn)::text AS since FROM pg_control_checkpoint()'))
      .rows[0]!.since,
  );
const estimatedRows = async (db: Database, table: string) =>
  (await db.pglite!.query<{ reltuples: number }>('SELECT reltuples::float8 AS reltuples FROM pg_class WHERE relname = $1', [table])).rows[0]!.reltuples;
/** About 8 MB of WAL. */
const fill = (db: Database) => db.pglite!.query(`INSERT INTO filler SELECT md5(g::text) || repeat('y', 900) FROM generate_series(1, 8000) g`);

describe('PGlite maintenance', () => {
  let db: Database | null = null;
  afterEach(async () => {
    await db?.close();
    db = null;
  });

  it('checkpoints once the WAL since the last checkpoint passes the threshold, not before', async () => {
    db = await openDatabase({ databaseUrl: null, dataDir: null, maintenance: { everyMs: HOUR, checkpointWalBytes: 4 * MB, analyzeWalBytes: 1024 * MB } });
    await db.pglite!.exec('CREATE TABLE filler (body text); CHECKPOINT');
    await db.pglite!.query(`INSERT INTO filler SELECT repeat('x', 100) FROM generate_series(1, 100)`);
    expect(await db.maintenance!.runDue()).toEqual({ analyzed: false, checkpointed: false });
    await fill(db);
    expect(await walSinceCheckpoint(db)).toBeGreaterThan(4 * MB);
    expect(await db.maintenance!.runDue()).toEqual({ analyzed: false, checkpointed: true });
    expect(await walSinceCheckpoint(db)).toBeLessThan(MB);
  });

  it('analyzes once enough was written since the last ANALYZE, so the planner knows the tables', async () => {
    db = await openDatabase({ databaseUrl: null, dataDir: null, maintenance: { everyMs: HOUR, checkpointWalBytes: 1024 * MB, analyzeWalBytes: 4 * MB } });
    await db.maintenance!.runDue(); // whatever the fresh database already holds
    await db.pglite!.exec('CREATE TABLE filler (body text)');
    await fill(db);
    expect(await estimatedRows(db, 'filler')).toBeLessThan(0); // never analyzed nor vacuumed
    expect(await db.maintenance!.runDue()).toEqual({ analyzed: true, checkpointed: false });
    expect(await estimatedRows(db, 'filler')).toBe(8000);
    expect(await db.maintenance!.runDue()).toEqual({ analyzed: false, checkpointed: false });
  });

  it('runs on its timer without being called', async () => {
    db = await openDatabase({ databaseUrl: null, dataDir: null, maintenance: { everyMs: 20, checkpointWalBytes: MB, analyzeWalBytes: MB } });
    await db.pglite!.exec('CREATE TABLE filler (body text)');
    await fill(db);
    await expect.poll(() => walSinceCheckpoint(db!), { timeout: 5_000, interval: 25 }).toBeLessThan(MB);
    await expect.poll(() => estimatedRows(db!, 'filler'), { timeout: 5_000, interval: 25 }).toBe(8000);
  });
});
