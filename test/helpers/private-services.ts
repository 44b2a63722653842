import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Private PostgreSQL and Redis servers for fault tests: they are stopped and started under load, which must never
 * touch the shared services other test files use. Both come from the machine's Debian packages.
 */

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

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
  private constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    const r = new PrivateRedis(await freePort());
    await r.resume();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async resume(): Promise<void> {
    this.child = spawn(redisServerPath()!, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    await waitPort(this.port, true);
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
  const version = readdirSync(root).sort().at(-1);
  return version ? path.join(root, version, 'bin') : null;
}

/** A throw-away PostgreSQL cluster owned by the `postgres` user (initdb refuses to run as root). */
export class PrivatePostgres {
  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  static async start(): Promise<PrivatePostgres> {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-pg-'));
    chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
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
