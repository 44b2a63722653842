// npm run studio [-- --port 5555]: Prisma Studio on the gateway's database, without opening a browser.
//   DATABASE_URL set:   Studio on that PostgreSQL (`?schema=` selects the schema, as for the gateway).
//   DATABASE_URL unset: the embedded PGlite database in SVC_DATA_DIR (default ./.svc-data). PGlite is a directory that
//                       one process opens at a time: this script takes its lock (<dir>/svc.lock, as the gateway and the
//                       migrate script do; one of them running on it: refused with one line), then serves the directory
//                       over the PostgreSQL wire protocol on 127.0.0.1 (pglite-socket) and points Studio at it.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import path from 'node:path';
import { DataDirInUseError, lockDataDir } from '../src/db/data-dir-lock.ts';

const require = createRequire(import.meta.url);
const prismaCli = require.resolve('prisma/build/index.js');

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function studio(databaseUrl: string, port: string): ChildProcess {
  return spawn(process.execPath, [prismaCli, 'studio', '--port', port, '--browser', 'none'], {
    stdio: 'inherit',
    env: { ...process.env, DATABASE_URL: databaseUrl },
  });
}

const port = option('--port', '5555');
const configured = process.env.DATABASE_URL;

if (configured) {
  console.log(`Prisma Studio on ${new URL(configured).host}: http://localhost:${port}`);
  const child = studio(configured, port);
  child.on('exit', (code) => process.exit(code ?? 0));
} else {
  const dataDir = path.resolve(process.env.SVC_DATA_DIR || './.svc-data');
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    console.error(
      `studio: DATABASE_URL is not set and ${dataDir} holds no embedded database yet.\n` +
        '  Start the gateway once (npm start) or run `npm run migrate` to create it, or set DATABASE_URL to use PostgreSQL:\n' +
        '  DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres npm run studio',
    );
    process.exit(1);
  }
  let lock: ReturnType<typeof lockDataDir>;
  try {
    lock = lockDataDir(dataDir);
  } catch (err) {
    if (!(err instanceof DataDirInUseError)) throw err;
    console.error(`studio: ${err.message}`);
    process.exit(1);
  }
  const { PGlite } = await import('@electric-sql/pglite');
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
  console.log(`studio: opening the embedded database in ${dataDir}.`);
  const db = new PGlite(dataDir);
  await db.waitReady;
  const wirePort = await freePort();
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: wirePort });
  await server.start();
  console.log(`studio: embedded database served on 127.0.0.1:${wirePort}; Prisma Studio: http://localhost:${port}`);
  const child = studio(`postgresql://postgres:postgres@127.0.0.1:${wirePort}/postgres?sslmode=disable`, port);
  let closing = false;
  const close = async (code: number) => {
    if (closing) return;
    closing = true;
    child.kill('SIGTERM');
    await server.stop();
    await db.close();
    lock.release();
    process.exit(code);
  };
  child.on('exit', (code) => void close(code ?? 0));
  process.on('SIGINT', () => void close(0));
  process.on('SIGTERM', () => void close(0));
}
