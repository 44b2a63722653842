import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, portIsFree } from './ports.ts';
import { redisServerPath } from './private-services.ts';

/**
 * Real Redis topologies from the machine's Debian packages (redis-server, redis-cli), on free loopback ports in a temp
 * directory: a Redis Cluster of 3 masters + 3 replicas, and a Sentinel trio watching a master and its replica.
 * Readiness is asked of the engines (CLUSTER INFO, SENTINEL REPLICAS), never waited for by a fixed sleep.
 */

const run = promisify(execFile);

/** Whether the engines can start here; under CI=1 a test must fail, not skip, when they cannot. */
export const HAVE_REDIS_ENGINES = redisServerPath() !== null;
export const REQUIRE_ENGINES = process.env.CI === '1' || process.env.CI === 'true';

async function until<T>(what: string, check: () => Promise<T | null | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = null;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      if ((err as { exited?: boolean }).exited) throw err;
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms${last ? ` (${(last as Error).message})` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One command on a fresh short-lived connection (the engines' own state, not the gateway's client). */
async function ask(port: number, ...args: (string | number)[]): Promise<unknown> {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1_000, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return await r.call(String(args[0]), ...args.slice(1).map(String));
  } finally {
    r.disconnect();
  }
}

class Engine {
  child: ChildProcess | null = null;
  constructor(
    readonly port: number,
    private readonly args: string[],
  ) {}

  async start(): Promise<void> {
    const bin = redisServerPath();
    if (!bin) throw new Error('Redis Cluster and Sentinel tests need redis-server and redis-cli on PATH (Debian: apt-get install redis-server)');
    const child = spawn(bin, this.args, { stdio: 'ignore' });
    this.child = child;
    // A server that could not start (a port taken meanwhile) exits at once: say so rather than wait for its PING.
    await until(`redis on ${this.port}`, async () => {
      if (child.exitCode !== null) throw Object.assign(new Error(`redis-server on ${this.port} exited with ${child.exitCode}`), { exited: true });
      return (await ask(this.port, 'PING')) === 'PONG';
    }, 10_000);
  }

  /** SIGKILL: a crashed node (its connections drop at once). */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  }

  get alive(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }
}

export interface ClusterMaster {
  id: string;
  port: number;
  /** Slot ranges [from, to], inclusive. */
  slots: [number, number][];
  /** Ports of its replicas. */
  replicas: number[];
}

export class RedisClusterEngine {
  private constructor(
    readonly dir: string,
    readonly nodes: Engine[],
  ) {}

  /** `REDIS_CLUSTER_NODES` for the gateway: every node as a seed. */
  get seeds(): string {
    return this.nodes.map((n) => `127.0.0.1:${n.port}`).join(',');
  }

  /** Started on free ports; a node that could not bind its ports (taken between the check and its start) starts the cluster again elsewhere. */
  static async start(opts: { masters?: number; nodeTimeoutMs?: number } = {}): Promise<RedisClusterEngine> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await RedisClusterEngine.startOnce(opts);
      } catch (err) {
        if (!(err as { exited?: boolean }).exited || attempt === 3) throw err;
      }
    }
  }

  private static async startOnce(opts: { masters?: number; nodeTimeoutMs?: number }): Promise<RedisClusterEngine> {
    const masters = opts.masters ?? 3;
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-redis-cluster-'));
    const ports: number[] = [];
    while (ports.length < masters * 2) {
      const p = await freePort();
      // The cluster bus listens on port + 10000: both must be free.
      if (!ports.includes(p) && p + 10_000 < 65_536 && (await portIsFree(p + 10_000))) ports.push(p);
    }
    const nodes = ports.map(
      (port) =>
        new Engine(port, [
          '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no',
          '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`,
          // A dead master is judged failed after a second, and its replica promoted at once whatever its lag.
          '--cluster-node-timeout', String(opts.nodeTimeoutMs ?? 1_000), '--cluster-replica-validity-factor', '0',
        ]),
    );
    const c = new RedisClusterEngine(dir, nodes);
    try {
      await Promise.all(nodes.map((n) => n.start()));
      await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'], {
        timeout: 30_000,
      });
      await c.waitHealthy();
      return c;
    } catch (err) {
      await c.stop();
      throw err;
    }
  }

  /** Until every live node says cluster_state:ok and knows `masters` masters with every slot. */
  async waitHealthy(timeoutMs = 20_000, masters = this.nodes.length / 2): Promise<void> {
    await until(
      'cluster healthy',
      async () => {
        for (const n of this.nodes.filter((x) => x.alive)) {
          const info = String(await ask(n.port, 'CLUSTER', 'INFO'));
          if (!info.includes('cluster_state:ok') || !info.includes('cluster_slots_assigned:16384')) return false;
        }
        const m = await this.masters();
        return m.length === masters && m.every((x) => this.nodes.find((n) => n.port === x.port)?.alive);
      },
      timeoutMs,
    );
  }

  /** The masters as a live node sees them (CLUSTER NODES). */
  async masters(): Promise<ClusterMaster[]> {
    const live = this.nodes.find((n) => n.alive);
    if (!live) return [];
    const lines = String(await ask(live.port, 'CLUSTER', 'NODES')).trim().split('\n');
    const rows = lines.map((l) => l.split(' '));
    const portOf = (addr: string) => Number(addr.split('@')[0]!.split(':')[1]);
    const masters: ClusterMaster[] = rows
      .filter((r) => r[2]!.includes('master') && !r[2]!.includes('fail') && r.length > 8)
      .map((r) => ({
        id: r[0]!,
        port: portOf(r[1]!),
        slots: r.slice(8).filter((x) => !x.startsWith('[')).map((x) => (x.includes('-') ? (x.split('-').map(Number) as [number, number]) : [Number(x), Number(x)])),
        replicas: [],
      }));
    for (const r of rows) {
      const m = masters.find((x) => x.id === r[3]);
      if (m && r[2]!.includes('slave') && !r[2]!.includes('fail')) m.replicas.push(portOf(r[1]!));
    }
    return masters;
  }

  async masterOfSlot(slot: number): Promise<ClusterMaster> {
    const m = (await this.masters()).find((x) => x.slots.some(([a, b]) => slot >= a && slot <= b));
    if (!m) throw new Error(`no master serves slot ${slot}`);
    return m;
  }

  node(port: number): Engine {
    return this.nodes.find((n) => n.port === port)!;
  }

  async kill(port: number): Promise<void> {
    await this.node(port).kill();
  }

  /** Commands the masters ran, from INFO COMMANDSTATS (summed; replicas are left out: they replay the scripts' effects). */
  async commandStats(): Promise<Record<string, number>> {
    const total: Record<string, number> = {};
    for (const m of await this.masters()) {
      const n = this.node(m.port);
      for (const m of String(await ask(n.port, 'INFO', 'commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
        total[m[1]!] = (total[m[1]!] ?? 0) + Number(m[2]);
      }
    }
    return total;
  }

  /** MONITOR on every master: the commands they run from now until stop() (each as its arguments). */
  async monitor(): Promise<{ stop(): Promise<string[][]> }> {
    // MONITOR over a plain socket: ioredis's monitor client can take an echoed line that arrives with the MONITOR
    // reply for the reply of a command ("Command queue state error") while traffic is already flowing.
    const seen: string[][] = [];
    const sockets = await Promise.all(
      (await this.masters()).map(
        (m) =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(m.port, '127.0.0.1', () => socket.write('MONITOR\r\n'));
            let buffered = '';
            let ready = false;
            socket.setEncoding('utf8');
            socket.on('data', (chunk: string) => {
              buffered += chunk;
              let end: number;
              while ((end = buffered.indexOf('\r\n')) >= 0) {
                const line = buffered.slice(0, end);
                buffered = buffered.slice(end + 2);
                if (!ready && line === '+OK') {
                  ready = true;
                  resolve(socket);
                } else if (line.startsWith('+')) seen.push(monitorArgs(line));
              }
            });
            socket.once('error', reject);
          }),
      ),
    );
    return {
      stop: async () => {
        // What the masters ran up to now has reached the monitors: a PING to each is echoed after it.
        await Promise.all((await this.masters()).map((m) => ask(m.port, 'PING')));
        await new Promise((res) => setTimeout(res, 50));
        for (const socket of sockets) socket.destroy();
        return seen;
      },
    };
  }

  async resetStats(): Promise<void> {
    await Promise.all(this.nodes.filter((x) => x.alive).map((n) => ask(n.port, 'CONFIG', 'RESETSTAT')));
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.kill()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class RedisSentinelEngine {
  readonly name = 'svcmaster';
  private constructor(
    readonly dir: string,
    readonly servers: Engine[],
    readonly sentinels: Engine[],
  ) {}

  /** `REDIS_SENTINELS` for the gateway. */
  get sentinelList(): string {
    return this.sentinels.map((s) => `127.0.0.1:${s.port}`).join(',');
  }

  static async start(): Promise<RedisSentinelEngine> {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-redis-sentinel-'));
    const [masterPort, replicaPort] = [await freePort(), await freePort()];
    const base = (port: number) => ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'];
    const master = new Engine(masterPort, base(masterPort));
    const replica = new Engine(replicaPort, [...base(replicaPort), '--replicaof', '127.0.0.1', String(masterPort)]);
    const sentinels: Engine[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = path.join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor svcmaster 127.0.0.1 ${masterPort} 2`,
          'sentinel down-after-milliseconds svcmaster 1000',
          'sentinel failover-timeout svcmaster 5000',
          'sentinel parallel-syncs svcmaster 1',
          '',
        ].join('\n'),
      );
      sentinels.push(new Engine(port, [conf, '--sentinel']));
    }
    const e = new RedisSentinelEngine(dir, [master, replica], sentinels);
    try {
      await master.start();
      await replica.start();
      await until('replica in sync', async () => /master_link_status:up/.test(String(await ask(replicaPort, 'INFO', 'replication'))));
      await Promise.all(sentinels.map((s) => s.start()));
      // Every Sentinel knows the replica and the two other Sentinels (a failover needs them).
      await until('sentinels see each other and the replica', async () => {
        for (const s of sentinels) {
          const replicas = (await ask(s.port, 'SENTINEL', 'REPLICAS', 'svcmaster')) as unknown[];
          const others = (await ask(s.port, 'SENTINEL', 'SENTINELS', 'svcmaster')) as unknown[];
          if (replicas.length < 1 || others.length < 2) return false;
        }
        return true;
      });
      return e;
    } catch (err) {
      await e.stop();
      throw err;
    }
  }

  /** The master's port as the Sentinels name it. */
  async masterPort(): Promise<number> {
    const [, port] = (await ask(this.sentinels[0]!.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.name)) as [string, string];
    return Number(port);
  }

  /** SENTINEL FAILOVER, then until the promoted replica is the master as the Sentinels and it say. */
  async failover(): Promise<{ from: number; to: number }> {
    const from = await this.masterPort();
    await ask(this.sentinels[0]!.port, 'SENTINEL', 'FAILOVER', this.name);
    const to = await until('failover done', async () => {
      const now = await this.masterPort();
      if (now === from) return null;
      return /role:master/.test(String(await ask(now, 'INFO', 'replication'))) ? now : null;
    });
    // The switch is over once the Sentinels have made the old master a replica of the new one: until then a client
    // still connected to it writes there (Redis's own split brain, which Sentinel ends by demoting it).
    await until('old master demoted', async () => /role:slave/.test(String(await ask(from, 'INFO', 'replication'))), 30_000);
    return { from, to };
  }

  async stop(): Promise<void> {
    await Promise.all([...this.sentinels, ...this.servers].map((n) => n.kill()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A MONITOR line (`+<time> [<db> <addr>] "cmd" "arg" …`) as its command and arguments, escapes decoded. */
function monitorArgs(line: string): string[] {
  const args: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"/g;
  for (const m of line.slice(line.indexOf(']') + 1).matchAll(re)) {
    args.push(m[1]!.replace(/\\x([0-9a-f]{2})|\\(.)/gi, (_, hex: string | undefined, ch: string | undefined) =>
      hex ? String.fromCharCode(parseInt(hex, 16)) : ch === 'n' ? '\n' : ch === 'r' ? '\r' : ch === 't' ? '\t' : ch!,
    ));
  }
  return args;
}
