import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { applyMigrations } from '../../src/db/migrations.ts';
import { freePort } from './ports.ts';
import { DATABASE_URL, REDIS_URL, deleteRedisPrefix, dropSchema, gatewayDatabaseUrls, uniqueName } from './services.ts';

/**
 * Private PostgreSQL and Redis servers for fault tests: they are stopped and started under load, which must never
 * touch the shared services other test files use. Both come from the machine's Debian packages.
 */

async function waitPort(port: number, up: boolean, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, '127.0.0.1');
      sock.once('connect', () => (sock.destroy(), resolve(true)));
      sock.once('error', () => resolve(false));
    });
    if (open === up) return;
    if (Date.now() > until) throw new Error(`port ${port} did not ${up ? 'open' : 'close'}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const redisServerPath = (): string | null => {
  try {
    return execFileSync('which', ['redis-server']).toString().trim() || null;
  } catch {
    return null;
  }
};

export class PrivateRedis {
  private child: ChildProcess | null = null;
  private constructor(
    readonly port: number,
    /** With a directory: an append-only file fsynced on every write, so that a restart keeps every acknowledged write. */
    private readonly aofDir: string | null,
  ) {}

  /** `persistent`: the data survives stop() and resume(), like a production Redis with appendfsync always. */
  static async start(opts: { persistent?: boolean } = {}): Promise<PrivateRedis> {
    if (!redisServerPath()) throw new Error('a private Redis needs redis-server on PATH (Debian: apt-get install redis-server)');
    const r = new PrivateRedis(await freePort(), opts.persistent ? mkdtempSync(path.join(tmpdir(), 'svc-redis-')) : null);
    await r.resume();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async resume(): Promise<void> {
    const persistence = this.aofDir
      ? ['--dir', this.aofDir, '--appendonly', 'yes', '--appendfsync', 'always']
      : ['--appendonly', 'no'];
    this.child = spawn(redisServerPath()!, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', ...persistence], {
      stdio: 'ignore',
    });
    await waitPort(this.port, true);
  }

  /** SIGSTOP: connections stay open but nothing answers (an overloaded or partitioned Redis); unfreeze() resumes it. */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  unfreeze(): void {
    this.child?.kill('SIGCONT');
  }

  async destroy(): Promise<void> {
    if (this.child) {
      this.unfreeze();
      await this.stop().catch(() => {});
    }
    if (this.aofDir) rmSync(this.aofDir, { recursive: true, force: true });
  }

  /** Stops the server (SIGKILL: like a crash, nothing flushed). */
  async stop(): Promise<void> {
    this.child?.kill('SIGKILL');
    this.child = null;
    await waitPort(this.port, false);
  }
}

export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const version = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(a) - Number(b))
    .at(-1);
  return version ? path.join(root, version, 'bin') : null;
}

/** A throw-away PostgreSQL cluster owned by the `postgres` user (initdb refuses to run as root). */
export class PrivatePostgres {
  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  static async start(): Promise<PrivatePostgres> {
    if (!postgresBinDir()) {
      throw new Error('a private PostgreSQL needs the server binaries (initdb, pg_ctl in /usr/lib/postgresql/<version>/bin; Debian: apt-get install postgresql)');
    }
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-pg-'));
    if (process.getuid?.() === 0) {
      chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
    }
    const pg = new PrivatePostgres(await freePort(), dir);
    pg.asPostgres('initdb', ['-D', pg.data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await pg.resume();
    return pg;
  }

  private get data(): string {
    return path.join(this.dir, 'data');
  }

  get url(): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private asPostgres(tool: string, args: string[]): void {
    const bin = path.join(postgresBinDir()!, tool);
    const cmd = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
    execFileSync(cmd[0] as string, cmd[1] as string[], { stdio: 'ignore' });
  }

  async resume(): Promise<void> {
    this.asPostgres('pg_ctl', [
      '-D', this.data, '-w', '-l', path.join(this.dir, 'log'),
      '-o', `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`,
      'start',
    ]);
    await waitPort(this.port, true);
  }

  /** Immediate shutdown: open connections are cut, like a database crash. */
  async stop(): Promise<void> {
    this.asPostgres('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
    await waitPort(this.port, false);
  }

  async destroy(): Promise<void> {
    try {
      await this.stop();
    } catch {}
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * The one case in which the replica and fault tests are skipped rather than failed: a fresh machine (`npm test` with
 * nothing installed) that has neither the services (DATABASE_URL / REDIS_URL) nor the binaries to start private ones.
 * Anything in between (e.g. DATABASE_URL set but no redis-server) fails with a message naming what is missing.
 */
export const NO_SERVICES = !DATABASE_URL && !REDIS_URL && !postgresBinDir() && !redisServerPath();
export const NO_SERVICES_REASON =
  'skipped: no DATABASE_URL / REDIS_URL and no PostgreSQL or redis-server binaries to start private ones (a fresh machine)';

/** Where a replica or fault test runs: one PostgreSQL schema and one Redis key prefix of its own. */
export interface TestServices {
  /** PostgreSQL URL with `?schema=`, migrated. */
  databaseUrl: string;
  schema: string;
  redisUrl: string;
  redisPrefix: string;
  /** Set when this PostgreSQL / Redis is private (started here): a fault test may stop and start it. */
  postgres: PrivatePostgres | null;
  redis: PrivateRedis | null;
  /** SQL in the test's schema, on a small pool that survives a database restart. */
  sql<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

/**
 * The shared PostgreSQL / Redis when DATABASE_URL / REDIS_URL are set (a fresh schema and key prefix), else private
 * servers. `privatePostgres` / `privateRedis` insist on a private one: a fault test stops it, and must never stop the
 * shared services other test files use. `persistentRedis`: the private Redis keeps its data across a restart.
 */
export async function openServices(
  opts: { privatePostgres?: boolean; privateRedis?: boolean; persistentRedis?: boolean } = {},
): Promise<TestServices> {
  const cleanup: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const c of cleanup.reverse()) await c().catch(() => {});
  };
  try {
    let postgres: PrivatePostgres | null = null;
    let baseUrl = opts.privatePostgres ? null : DATABASE_URL;
    if (!baseUrl) {
      postgres = await PrivatePostgres.start();
      cleanup.push(() => postgres!.destroy());
      baseUrl = postgres.url;
    }
    const schema = uniqueName('svc');
    // npm run test:pgbouncer: the shared server's schema through the pooler (a private server: directly).
    const { url: databaseUrl, directUrl } = await gatewayDatabaseUrls(baseUrl, schema);
    await applyMigrations({ kind: 'postgres', url: directUrl ?? databaseUrl });
    if (!postgres) cleanup.push(() => dropSchema(baseUrl!, schema));

    let redis: PrivateRedis | null = null;
    let redisUrl = opts.privateRedis ? null : REDIS_URL;
    if (!redisUrl) {
      redis = await PrivateRedis.start({ persistent: opts.persistentRedis });
      cleanup.push(() => redis!.destroy());
      redisUrl = redis.url;
    }
    const redisPrefix = `${uniqueName('svc')}:`;
    if (!redis) cleanup.push(() => deleteRedisPrefix(redisUrl!, redisPrefix));

    const plain = new URL(baseUrl);
    plain.searchParams.delete('schema');
    const pool = new pg.Pool({ connectionString: plain.toString(), options: `-c search_path="${schema}"`, max: 3, connectionTimeoutMillis: 3_000 });
    // A stopped server cuts idle connections: without a listener that error would end the test process.
    pool.on('error', () => {});
    cleanup.push(() => pool.end());
    return {
      databaseUrl,
      schema,
      redisUrl,
      redisPrefix,
      postgres,
      redis,
      sql: async <T>(text: string, params: unknown[] = []) => (await pool.query(text, params)).rows as T[],
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
