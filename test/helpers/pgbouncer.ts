import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './ports.ts';

/** Debian's pgbouncer (1.18: no protocol-level named prepared statements in transaction mode, no LISTEN, no session locks). */
export const PGBOUNCER_PATH = '/usr/sbin/pgbouncer';

export interface PgBouncer {
  port: number;
  /** postgresql://postgres@127.0.0.1:<port>/postgres: through the pooler, as the superuser. */
  url: string;
  /** The pooler's own console (SHOW POOLS, SHOW STATS): one row per line, as objects. */
  admin(command: string): Promise<Record<string, unknown>[]>;
  stop(): Promise<void>;
}

/**
 * Starts /usr/sbin/pgbouncer in transaction pooling mode on a free port, in a temp dir of its own, in front of the
 * PostgreSQL at `target` (default 127.0.0.1:5432, trust): any database name, any role that exists there (auth_user
 * looks roles up, so a test may create one per schema). PgBouncer refuses to run as root: as root it is started
 * with `-u nobody`, its directory handed to that user.
 */
export async function startPgBouncer(opts: { target?: { host: string; port: number }; poolSize?: number } = {}): Promise<PgBouncer> {
  if (!existsSync(PGBOUNCER_PATH)) throw new Error(`PgBouncer is not installed at ${PGBOUNCER_PATH} (Debian: apt-get install pgbouncer)`);
  const target = opts.target ?? { host: '127.0.0.1', port: 5432 };
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-pgbouncer-'));
  const ini = path.join(dir, 'pgbouncer.ini');
  writeFileSync(path.join(dir, 'users.txt'), '"postgres" ""\n');
  writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=${target.host} port=${target.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'auth_user = postgres',
      'admin_users = postgres',
      'pool_mode = transaction',
      'max_client_conn = 2000',
      `default_pool_size = ${opts.poolSize ?? 10}`,
      // Every test schema has a role of its own (a pool each): idle server connections go back soon, so that the
      // server's max_connections is not held by schemas whose tests are over.
      'server_idle_timeout = 2',
      'server_lifetime = 60',
      `logfile = ${path.join(dir, 'pgbouncer.log')}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
  );
  const root = process.getuid?.() === 0;
  if (root) chownSync(dir, 65534, 65534);
  const child: ChildProcess = spawn(PGBOUNCER_PATH, [...(root ? ['-u', 'nobody'] : []), ini], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitForPort(port, child, () => stderr || logOf(dir));
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = `postgresql://postgres@127.0.0.1:${port}/postgres`;
  return {
    port,
    url,
    admin: async (command) => {
      const client = new pg.Client({ connectionString: `postgresql://postgres@127.0.0.1:${port}/pgbouncer` });
      await client.connect();
      try {
        // The console speaks the simple protocol only.
        return (await client.query(command)).rows as Record<string, unknown>[];
      } finally {
        await client.end();
      }
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function logOf(dir: string): string {
  try {
    return readFileSync(path.join(dir, 'pgbouncer.log'), 'utf8');
  } catch {
    return '';
  }
}

async function waitForPort(port: number, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited (${child.exitCode}): ${output()}`);
    const open = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`pgbouncer did not listen on ${port} within 10 s: ${output()}`);
}

/**
 * A role named as the schema, for a gateway reaching that schema through PgBouncer: PgBouncer refuses the `options`
 * startup parameter that sets search_path, and PostgreSQL's default search_path ("$user", public) finds the schema
 * of the role's own name first. Superuser: it is a test's own schema in a test server.
 */
export async function createSchemaRole(directUrl: string, schema: string): Promise<void> {
  const u = new URL(directUrl);
  u.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: u.toString() });
  await client.connect();
  try {
    await client.query(`DO $$ BEGIN CREATE ROLE "${schema}" LOGIN SUPERUSER; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
  } finally {
    await client.end();
  }
}

/** The URL of `schema` through the pooler at `pgbouncerUrl`, as the schema's role (createSchemaRole). */
export function pooledUrl(pgbouncerUrl: string, schema: string): string {
  const u = new URL(pgbouncerUrl);
  u.username = schema;
  u.password = '';
  u.searchParams.set('schema', schema);
  return u.toString();
}
