import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDeps, closeDeps } from '../../src/app-deps.ts';
import { loadConfig } from '../../src/config/config.ts';
import { hashSecret } from '../../src/domain/keys/secrets.ts';
import { createTestDatabase } from '../helpers/app.ts';

const root = path.resolve(import.meta.dirname, '../..');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts `npm start`'s entry point; `until` decides when to send SIGTERM (else waits for exit). */
function runMain(env: Record<string, string>, until?: (out: string) => boolean, timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: root,
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', ...env },
    });
    let stdout = '';
    let stderr = '';
    let signalled = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`main did not finish: ${stdout} ${stderr}`));
    }, timeoutMs);
    const check = () => {
      if (until && !signalled && until(stdout + stderr)) {
        signalled = true;
        child.kill('SIGTERM');
      }
    };
    child.stdout.on('data', (d) => {
      stdout += d;
      check();
    });
    child.stderr.on('data', (d) => {
      stderr += d;
      check();
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('the process', () => {
  it('refuses a bad configuration with one line naming the variable', async () => {
    const run = await runMain({ PORT: 'eighty' });
    expect(run.code).not.toBe(0);
    expect(run.stderr.trim().split('\n')).toEqual(['configuration error: PORT: must be a whole number, got "eighty"']);
  });

  it('names DATABASE_URL in its one line when PostgreSQL cannot be opened at start', async () => {
    const run = await runMain({ DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/postgres' });
    expect(run.code).not.toBe(0);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^startup failed: DATABASE_URL: cannot open PostgreSQL \(/);
  });

  it('starts on the embedded database, serves /healthz, and exits 0 on SIGTERM', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-main-'));
    dirs.push(dir);
    const port = 20000 + Math.floor(Math.random() * 20000);
    let healthy = false;
    const run = await runMain(
      { SVC_DATA_DIR: dir, PORT: String(port), SVC_MASTER_KEY: 'svc_sk_process_test_0123456789abcdefghij', LOG_LEVEL: 'info' },
      (out) => {
        if (out.includes('Server listening') && !healthy) {
          healthy = true;
          return true;
        }
        return false;
      },
    );
    expect(healthy).toBe(true);
    expect(run.code).toBe(0);
    expect(run.stdout + run.stderr).toContain('shutting down');
  }, 90_000);

  it('holds a SIGTERM that comes while a new database is opened and migrated until startup has finished, exits 0, and starts again on that database', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-main-'));
    dirs.push(dir);
    const env = { SVC_DATA_DIR: dir, PORT: String(20000 + Math.floor(Math.random() * 20000)), SVC_MASTER_KEY: 'svc_sk_process_test_0123456789abcdefghij', LOG_LEVEL: 'info' };
    // Opening a new embedded database and migrating it take a second or so: the signal lands inside that window.
    const first = await runMain(env, (out) => out.includes('opening the database'));
    expect(first.code).toBe(0);
    expect(first.stderr).toContain('SIGTERM during startup: stopping once startup has finished');
    expect(first.stdout).toContain('migrations applied');
    expect(first.stdout).not.toContain('Server listening');
    // The database is whole: the second start finds nothing to apply (a half-applied migration would stop it, P3009).
    const second = await runMain(env, (out) => out.includes('Server listening'));
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('migrations: database is up to date');
  }, 120_000);
});

describe('Redis that does not answer at start', () => {
  it('starts degraded: it listens, /readyz answers 503 naming Redis, and it exits 0 on SIGTERM', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-main-'));
    dirs.push(dir);
    const port = 20000 + Math.floor(Math.random() * 20000);
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: root,
      env: {
        PATH: process.env.PATH!,
        HOME: process.env.HOME ?? '/tmp',
        SVC_DATA_DIR: dir,
        PORT: String(port),
        SVC_MASTER_KEY: 'svc_sk_process_test_0123456789abcdefghij',
        REDIS_URL: 'redis://127.0.0.1:1', // nothing listens on port 1
        LOG_LEVEL: 'info',
      },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const until = Date.now() + 60_000;
      while (!out.includes('Server listening') && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
      expect(out).toContain('Server listening');
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ checks: { database: 'ok', redis: 'unavailable' } });
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      expect(out).toContain('cannot reach Redis at start');
      expect(out).not.toContain('Unhandled error event');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  }, 90_000);
});

describe('the operator key', () => {
  it('is generated once when SVC_MASTER_KEY is unset, announced once, and only its hash is kept', async () => {
    const db = await createTestDatabase();
    try {
      const announced: string[] = [];
      const config = loadConfig({ LOG_LEVEL: 'silent' });
      const first = await createDeps(config, { database: db.database, announceMasterKey: (s) => announced.push(s) });
      const second = await createDeps(config, { database: db.database, announceMasterKey: (s) => announced.push(s) });
      expect(announced).toHaveLength(1);
      expect(announced[0]).toMatch(/^svc_sk_[0-9A-Za-z]{48}$/);
      expect(first.masterKeyHash).toBe(hashSecret(announced[0]!));
      expect(second.masterKeyHash).toBe(first.masterKeyHash);
      const stored = await db.database.prisma.setting.findMany();
      expect(JSON.stringify(stored)).not.toContain(announced[0]);
      await first.bus.close();
      await second.bus.close();
    } finally {
      await db.drop();
    }
  });
});
