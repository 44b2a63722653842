import { spawn } from 'node:child_process';
import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * PostgreSQL settings for the embedded PGlite (resident memory). Its WebAssembly heap keeps every page PostgreSQL ever
 * touched: PostgreSQL's default 128 MB of shared buffers grew it from 128 MB to about 184 MB and the process's RSS by
 * about 110 MB (the data files stay in the OS page cache either way). maintenance_work_mem (64 MB by default) bounds
 * what one VACUUM or index build can add to it. ANALYZE (pglite-maintenance.ts) holds 300 × default_statistics_target
 * sample rows of a table at once: with the default 100, 30,000 rows of usage records touched about 60 MB of that heap
 * for good; with 10, 3,000 rows (every row of a table up to 3,000 pages is still counted: the row estimates stay
 * exact there, and beyond they are extrapolated from 3,000 pages).
 */
export const PGLITE_SETTINGS = ['-c', 'shared_buffers=16MB', '-c', 'maintenance_work_mem=16MB', '-c', 'default_statistics_target=10'];

/** PGlite's marker of an initialized data directory. */
export const isInitialized = (dataDir: string) => existsSync(path.join(dataDir, 'PG_VERSION'));

/** Where the child builds the cluster before moving it into the data directory. */
const SCRATCH = '.svc-init';
const self = fileURLToPath(import.meta.url);

/**
 * Creates the cluster in a new data directory and applies the migrations, in a child process (this module run as a
 * script), so that the gateway opens an existing, migrated database. Done in the gateway's own process (PGlite runs
 * initdb in a second, temporary PGlite and copies its files over; the migration engine is WebAssembly too) this left
 * 100-170 MB of resident memory behind for the process's life: the C allocator's freed memory, the WebAssembly code
 * compiled for that work and the PGlite heap pages the schema's creation touched are not given back to the system.
 * `log` hears the child's lines (the migrations applied). The child stops when this process goes away.
 */
export function initializeInChild(dataDir: string, log: (line: string) => void = () => {}): Promise<void> {
  // Compiled (dist/server) this module is JavaScript; from the sources (tsx, tests) it needs tsx's loader. PostgreSQL's
  // WebAssembly on V8's baseline compiler only: the optimizing compiler's work on it costs more than it saves in a
  // short run (and up to 600 MB of memory for one function on Node 24).
  const args = ['--liftoff-only', ...(self.endsWith('.ts') ? ['--import', 'tsx'] : []), self, dataDir];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    createInterface({ input: child.stdout }).on('line', log);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code === 0 && isInitialized(dataDir)) return resolve();
      const last = stderr.trim().split('\n').filter(Boolean).pop();
      reject(new Error(`creating the database failed (${signal ?? `exit ${code}`})${last ? `: ${last}` : ''}`));
    });
  });
}

/**
 * The child: initdb into a scratch folder inside the data directory, its files then moved in with PG_VERSION last (a
 * start cut short leaves no half-built cluster that looks initialized), then the migrations.
 */
async function initializeHere(dataDir: string): Promise<void> {
  // The parent gone (its stdin closes), the child stops at its next turn instead of writing on alone.
  process.stdin.on('close', () => process.exit(1)).resume();
  const { PGlite } = await import('@electric-sql/pglite');
  const scratch = path.join(dataDir, SCRATCH);
  rmSync(scratch, { recursive: true, force: true });
  const options = { startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS] };
  const fresh = new PGlite(scratch, options);
  await fresh.waitReady;
  await fresh.close();
  const entries = readdirSync(scratch).sort((a, b) => Number(a === 'PG_VERSION') - Number(b === 'PG_VERSION'));
  for (const entry of entries) renameSync(path.join(scratch, entry), path.join(dataDir, entry));
  rmSync(scratch, { recursive: true, force: true });
  const pglite = new PGlite(dataDir, options);
  try {
    await pglite.waitReady;
    const { applyMigrations } = await import('./migrations.ts');
    await applyMigrations({ kind: 'pglite', pglite }, { log: (msg) => process.stdout.write(`${msg}\n`) });
  } finally {
    await pglite.close();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === self) {
  initializeHere(process.argv[2]!).then(
    () => process.exit(0),
    (err: Error) => {
      process.stderr.write(`${err.message.split('\n')[0]}\n`);
      process.exit(1);
    },
  );
}
