import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.ts';
import { LOCK_FILE_NAME } from '../../src/db/data-dir-lock.ts';

/**
 * A new embedded data directory is created and migrated in a child process (src/db/pglite-init.ts: done in the
 * gateway's own process it left 100-170 MB of resident memory behind), and the gateway opens the result.
 */
const root = mkdtempSync(path.join(tmpdir(), 'svc-pglite-init-'));
const open: Database[] = [];
afterAll(async () => {
  for (const db of open) await db.close().catch(() => {});
  rmSync(root, { recursive: true, force: true });
}, 60_000);

const migrationCount = readdirSync(path.join(import.meta.dirname, '../../prisma/migrations'), { withFileTypes: true }).filter((e) => e.isDirectory()).length;

async function openFresh(dir: string, heard: string[]): Promise<Database> {
  const db = await openDatabase({ databaseUrl: null, dataDir: dir, info: (msg) => heard.push(msg) });
  open.push(db);
  return db;
}

describe('a new embedded data directory', () => {
  it('is created and migrated before the gateway opens it; a later open creates nothing', async () => {
    const dir = path.join(root, 'fresh');
    const heard: string[] = [];
    const db = await openFresh(dir, heard);
    expect(heard.join('\n')).toContain('migrations applied');
    const rows = await db.pglite!.query<{ n: number }>('SELECT count(*)::int AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL');
    expect(rows.rows[0]!.n).toBe(migrationCount);
    // Nothing of the child's scratch folder is left; the lock is this process's.
    expect(readdirSync(dir).filter((f) => f.startsWith('.svc'))).toEqual([]);
    expect(existsSync(path.join(dir, LOCK_FILE_NAME))).toBe(true);
    await db.close();
    open.pop();
    const again: string[] = [];
    const reopened = await openFresh(dir, again);
    expect(again).toEqual([]);
    expect((await reopened.pglite!.query<{ n: number }>('SELECT count(*)::int AS n FROM _prisma_migrations')).rows[0]!.n).toBe(migrationCount);
  }, 180_000);

  it('a start cut short during creation (its scratch folder left, no PG_VERSION) is created again', async () => {
    const dir = path.join(root, 'interrupted');
    mkdirSync(path.join(dir, '.svc-init', 'base'), { recursive: true });
    writeFileSync(path.join(dir, '.svc-init', 'PG_VERSION'), '17\n');
    const heard: string[] = [];
    const db = await openFresh(dir, heard);
    expect(heard.join('\n')).toContain('migrations applied');
    expect((await db.pglite!.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  }, 180_000);

  it('a directory the cluster cannot be created in fails to open, naming why, and releases its lock', async () => {
    const dir = path.join(root, 'blocked');
    mkdirSync(dir, { recursive: true });
    // A file where the cluster's `base` folder goes: moving the new cluster in fails.
    writeFileSync(path.join(dir, 'base'), 'not a folder');
    await expect(openDatabase({ databaseUrl: null, dataDir: dir })).rejects.toThrow(/^creating the database failed \(exit 1\): .*base/);
    expect(existsSync(path.join(dir, LOCK_FILE_NAME))).toBe(false);
    expect(existsSync(path.join(dir, 'PG_VERSION'))).toBe(false);
  }, 180_000);
});
