import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MASTER_KEY, seedProject } from '../helpers/app.ts';
import { pollUntil, startGateway, type GatewayProcess } from '../helpers/gateway-process.ts';
import { freePort } from '../helpers/ports.ts';
import { DATABASE_URL, uniqueName } from '../helpers/services.ts';
import { interpolate, mountedFile, readCompose } from './compose.ts';

/**
 * compose.yaml's profile `cluster` with its own files in real engines from Debian's packages, where no container
 * engine runs: six redis-server on deploy/compose/redis-cluster.conf made one cluster by redis-cluster-init.sh,
 * PgBouncer 1.18 on deploy/compose/pgbouncer/pgbouncer.ini, and the gateway's api and worker with the environment
 * compose.yaml gives cluster-api and cluster-worker, only the addresses changed to this machine's.
 * PostgreSQL is the one DATABASE_URL names (CI sets it; without it locally the PgBouncer and gateway parts skip).
 */
const exec = promisify(execFile);
const { services } = readCompose();
const NEEDS_PG = !DATABASE_URL;
if (NEEDS_PG && process.env.CI) throw new Error('test/deploy/compose-engines.test.ts needs PostgreSQL: set DATABASE_URL');

async function waitPort(port: number, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, '127.0.0.1');
      sock.once('connect', () => (sock.destroy(), resolve(true)));
      sock.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > until) throw new Error(`nothing listens on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `n` different TCP ports on 127.0.0.1 that nothing listens on right now. */
async function distinctFreePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () => new Promise<net.Server>((resolve, reject) => {
      const server = net.createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    })),
  );
  const ports = servers.map((server) => (server.address() as net.AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

const children: ChildProcess[] = [];
let stopping = false;
/** An engine in the background; one that exits before afterAll stops it says so with the tail of its output. */
function run(cmd: string, args: string[]): ChildProcess {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (c: Buffer) => (out = (out + c.toString()).slice(-4000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  child.on('exit', (code, signal) => {
    if (!stopping) process.stderr.write(`${cmd} exited (${code ?? signal}):\n${out}\n`);
  });
  children.push(child);
  return child;
}

const dir = mkdtempSync(path.join(tmpdir(), 'svc-compose-'));
const nodePorts: number[] = [];
const initScript = () => {
  const init = services['redis-cluster-init']!;
  return mountedFile(init, init.entrypoint![1]!);
};
const clusterNodes = (port: number) =>
  exec('redis-cli', ['-p', String(port), 'cluster', 'nodes']).then(({ stdout }) =>
    stdout.trim().split('\n').map((line) => {
      const [id, , flags, master] = line.split(' ');
      return { id: id!, master: flags!.includes('master'), replicaOf: master === '-' ? null : master! };
    }),
  );

beforeAll(async () => {
  // Every process here is Debian's, run by the user the tests run as; PgBouncer refuses root, so then it drops to nobody.
  chmodSync(dir, 0o755);
  const conf = mountedFile(services['redis-node-1']!, '/usr/local/etc/redis/redis.conf');
  // The cluster bus port is given (by default it is the port + 10000, past 65535 for a high free port); all twelve
  // are held at once while they are chosen, so that no two are the same.
  const ports = await distinctFreePorts(12);
  for (let i = 0; i < 6; i++) {
    const [port, bus] = [ports[2 * i]!, ports[2 * i + 1]!];
    const nodeDir = path.join(dir, `node-${i + 1}`);
    mkdirSync(nodeDir);
    nodePorts.push(port);
    run('redis-server', [conf, '--port', String(port), '--cluster-port', String(bus), '--bind', '127.0.0.1', '--dir', nodeDir, '--cluster-announce-hostname', '127.0.0.1', '--save', '']);
  }
  await Promise.all(nodePorts.map((p) => waitPort(p)));
}, 60_000);

afterAll(async () => {
  stopping = true;
  await Promise.all(
    children.map((c) =>
      c.exitCode !== null || c.signalCode !== null ? null : new Promise((resolve) => (c.once('exit', resolve), c.kill('SIGTERM'))),
    ),
  );
  rmSync(dir, { recursive: true, force: true });
});

describe('compose.yaml profile cluster, in real engines', () => {
  it('redis-cluster-init.sh makes the six nodes three masters with a replica each, and leaves a made cluster alone', { timeout: 60_000 }, async () => {
    const nodes = nodePorts.map((p) => `127.0.0.1:${p}`);
    const first = await exec('sh', [initScript(), ...nodes]);
    expect(first.stdout).toContain('redis-cluster-init: cluster_state:ok, 3 replicas');
    const all = await clusterNodes(nodePorts[0]!);
    const masters = all.filter((n) => n.master);
    expect(masters).toHaveLength(3);
    for (const m of masters) expect(all.filter((n) => n.replicaOf === m.id)).toHaveLength(1);
    // MOVED names the node as compose's containers announce it (cluster-preferred-endpoint-type hostname).
    const shards = await exec('redis-cli', ['-p', String(nodePorts[0]), 'cluster', 'shards']);
    expect(shards.stdout).toMatch(/^hostname\n127\.0\.0\.1$/m);
    const again = await exec('sh', [initScript(), ...nodes]);
    expect(again.stdout).toContain('redis-cluster-init: the cluster exists');
  });

  describe.skipIf(NEEDS_PG)('with PostgreSQL (DATABASE_URL)', () => {
    const database = uniqueName('svc_deploy').toLowerCase();
    let direct: URL;
    let pgbouncerPort: number;
    const password = DATABASE_URL ? decodeURIComponent(new URL(DATABASE_URL).password) || 'compose-test' : '';
    const gateways: GatewayProcess[] = [];
    const admin = () => new pg.Client({ connectionString: DATABASE_URL! });

    beforeAll(async () => {
      const c = admin();
      await c.connect();
      await c.query(`CREATE DATABASE "${database}"`);
      await c.end();
      direct = new URL(DATABASE_URL!);
      direct.pathname = `/${database}`;
      direct.search = '';
      // compose's pgbouncer.ini with this machine's addresses; its user list as the image's entrypoint writes it.
      pgbouncerPort = await freePort();
      const ini = readFileSync(mountedFile(services.pgbouncer!, '/etc/pgbouncer/pgbouncer.ini'), 'utf8')
        .replace(/^svc = host=postgres port=5432 dbname=svc$/m, `svc = host=${direct.hostname} port=${direct.port || 5432} dbname=${database}`)
        .replace(/^listen_addr = .*$/m, 'listen_addr = 127.0.0.1')
        .replace(/^listen_port = .*$/m, `listen_port = ${pgbouncerPort}`)
        .replace(/^auth_file = .*$/m, `auth_file = ${path.join(dir, 'userlist.txt')}`);
      expect(ini).toContain(`dbname=${database}`);
      writeFileSync(path.join(dir, 'pgbouncer.ini'), ini, { mode: 0o644 });
      writeFileSync(path.join(dir, 'userlist.txt'), `"${decodeURIComponent(direct.username) || 'postgres'}" "${password}"\n`, { mode: 0o644 });
      run('/usr/sbin/pgbouncer', [...(process.getuid?.() === 0 ? ['-u', 'nobody'] : []), path.join(dir, 'pgbouncer.ini')]);
      await waitPort(pgbouncerPort);
    }, 60_000);

    afterAll(async () => {
      await Promise.all(gateways.map((g) => g.stop()));
      const c = admin();
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
      await c.end();
    });

    const throughPgbouncer = () => {
      const u = new URL(direct);
      u.hostname = '127.0.0.1';
      u.port = String(pgbouncerPort);
      u.pathname = '/svc';
      u.password = password;
      return u.toString();
    };

    it('PgBouncer runs compose\'s pgbouncer.ini and pools by transaction: idle clients share one server connection', async () => {
      const [a, b] = [new pg.Client({ connectionString: throughPgbouncer() }), new pg.Client({ connectionString: throughPgbouncer() })];
      await a.connect();
      await b.connect();
      try {
        const pidA = (await a.query('SELECT pg_backend_pid() AS pid, current_database() AS db')).rows[0];
        const pidB = (await b.query('SELECT pg_backend_pid() AS pid')).rows[0];
        expect(pidA.db).toBe(database);
        expect(pidB.pid).toBe(pidA.pid);
      } finally {
        await a.end();
        await b.end();
      }
      const wrong = new pg.Client({ connectionString: throughPgbouncer().replace(`:${encodeURIComponent(password)}@`, ':wrong@') });
      await expect(wrong.connect()).rejects.toThrow(/authentication failed/);
    });

    it('cluster-api and cluster-worker, as compose.yaml configures them, answer ready and record an inference', { timeout: 180_000 }, async () => {
      const shell = { POSTGRES_PASSWORD: password, SVC_MASTER_KEY: MASTER_KEY, SVC_ENCRYPTION_KEY: 'cd'.repeat(32) };
      const local = (name: string) => {
        const env = Object.fromEntries(Object.entries(services[name]!.environment!).map(([k, v]) => [k, interpolate(String(v), shell)]));
        env.REDIS_CLUSTER_NODES = env.REDIS_CLUSTER_NODES!.split(',').map((_, i) => `127.0.0.1:${nodePorts[i]}`).join(',');
        const pooled = new URL(env.DATABASE_URL!);
        expect([pooled.host, pooled.pathname]).toEqual(['pgbouncer:6432', '/svc']);
        env.DATABASE_URL = throughPgbouncer();
        env.DATABASE_DIRECT_URL = direct.toString();
        return env;
      };
      // The worker starts first: it applies the migrations the api then finds done.
      gateways.push(await startGateway(local('cluster-worker'), { timeoutMs: 120_000 }));
      gateways.push(await startGateway(local('cluster-api'), { timeoutMs: 120_000 }));
      const [worker, api] = gateways as [GatewayProcess, GatewayProcess];
      for (const g of [api, worker]) {
        const ready = await pollUntil('ready', async () => {
          const r = await g.call('GET', '/readyz', { key: null });
          return r.status === 200 ? r : null;
        }, 30_000, 200).catch((err: Error) => {
          throw new Error(`${err.message}\n${g.output()}`);
        });
        expect(ready.body.checks).toMatchObject({ database: 'ok', redis: 'ok', limits: 'ok' });
      }
      const s = await seedProject(api, { scopes: ['inference:write', 'usage:read'] });
      const answer = await api.call('POST', '/v1/inference', {
        key: s.secret,
        body: { model: 'mock-1', project_id: s.projectId, messages: [{ role: 'user', content: 'hello' }] },
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      const requestId = answer.headers['x-svc-request-id']!;
      const c = new pg.Client({ connectionString: direct.toString() });
      await c.connect();
      try {
        await pollUntil('the usage record', async () => {
          const { rows } = await c.query('SELECT count(*)::int AS n FROM usage_records WHERE request_id = $1', [requestId]);
          return rows[0].n === 1;
        }, 30_000, 100);
      } finally {
        await c.end();
      }
    });
  });
});
