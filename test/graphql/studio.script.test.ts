import { execFile, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import { describe, expect, it } from 'vitest';
import { applyMigrations } from '../../src/db/migrations.ts';

// npm run studio (scripts/studio.ts) on the embedded database: Studio reaches PGlite over the wire protocol.
const root = path.resolve(import.meta.dirname, '../..');
const { DATABASE_URL: _ignored, ...envWithoutDatabase } = process.env;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

describe('npm run studio without DATABASE_URL', () => {
  it('explains what to do when there is no embedded database yet', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'svc-studio-empty-'));
    const res = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/studio.ts'], {
      cwd: root,
      env: { ...envWithoutDatabase, SVC_DATA_DIR: dataDir },
    }).catch((err: { code: number; stderr: string }) => err);
    expect((res as { code: number }).code).toBe(1);
    expect((res as { stderr: string }).stderr).toContain('holds no embedded database yet');
    expect((res as { stderr: string }).stderr).toContain('DATABASE_URL=postgresql://');
  }, 30_000);

  it('serves the embedded database to Prisma Studio', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'svc-studio-'));
    const pglite = new PGlite(dataDir);
    await applyMigrations({ kind: 'pglite', pglite });
    await pglite.query(`INSERT INTO projects (id, name, plan, status, created_at) VALUES ('prj_studio', 'Studio', 'starter', 'active', now())`);
    await pglite.close();

    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/studio.ts', '--port', String(port)], {
      cwd: root,
      env: { ...envWithoutDatabase, SVC_DATA_DIR: dataDir },
      stdio: 'pipe',
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    try {
      // Studio's own backend answers the SQL its page sends (POST /bff), here read from the embedded database.
      let rows: unknown = null;
      for (let i = 0; i < 120 && rows === null; i++) {
        await new Promise((r) => setTimeout(r, 250)); // polling a child process's startup: there is no clock to inject
        rows = await fetch(`http://127.0.0.1:${port}/bff`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ procedure: 'query', query: { sql: 'SELECT id, name FROM projects', parameters: [] } }),
        })
          .then((r) => r.json())
          .catch(() => null);
      }
      expect(rows, output).toEqual([null, [{ id: 'prj_studio', name: 'Studio' }]]);
      expect(output).toContain(`http://localhost:${port}`);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  }, 90_000);
});
