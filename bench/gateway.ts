import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { PrivateRedis } from '../test/helpers/private-services.ts';
import { freePort } from '../test/helpers/ports.ts';

export { freePort };

/** `NAME=value` tokens of a flag set or a start script: the environment, not Node flags. */
export const splitEnv = (tokens: string[]): { env: Record<string, string>; flags: string[] } => {
  const env: Record<string, string> = {};
  const flags: string[] = [];
  for (const t of tokens) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(t);
    if (m) env[m[1]!] = m[2]!;
    else flags.push(t);
  }
  return { env, flags };
};

/** The Node flags of package.json's start script (`exec node <flags> dist/server/main.js`), read rather than repeated. */
export function startScript(root: string): { env: Record<string, string>; flags: string[]; entry: string; tokens: string[] } {
  const start = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  // `exec [env NAME=value …] node …`: npm's shell becomes node, so SIGTERM to `npm start` reaches the gateway.
  const tokens = start.trim().replace(/^exec\s+/, '').replace(/^env\s+/, '').split(/\s+/);
  const at = tokens.indexOf('node');
  const before = splitEnv(tokens.slice(0, Math.max(at, 0)));
  if (at < 0 || before.flags.length > 0) throw new Error(`package.json start script does not begin with node: ${start}`);
  const args = tokens.slice(at + 1);
  // tokens: the environment's and the flags, as a flag set of bench/flags.ts.
  return { env: before.env, flags: args.slice(0, -1), entry: args[args.length - 1]!, tokens: [...tokens.slice(0, at), ...args.slice(0, -1)] };
}

/**
 * Starts the gateway exactly as `npm start` runs it (compiled JavaScript, the start script's Node flags), so the bench
 * and the soak measure what is deployed. `node`: another Node binary (the bench's BENCH_NODES); `flags`: other flags
 * instead of the start script's (bench/flags.ts compares them).
 */
export function startCompiledGateway(
  root: string,
  env: Record<string, string>,
  opts: { build?: boolean; node?: string; flags?: string[] } = {},
): ChildProcess {
  if (opts.build !== false) execFileSync('npm', ['run', '--silent', 'build:server'], { cwd: root, stdio: 'inherit' });
  const script = startScript(root);
  // Other flags (bench/flags.ts) come with their own environment tokens, in place of the start script's.
  const { env: setEnv, flags } = opts.flags ? splitEnv(opts.flags) : { env: script.env, flags: script.flags };
  const { entry } = script;
  // BENCH_NODE_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=bench/tmp/prof") adds flags for profiling a run.
  const extra = (process.env.BENCH_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean);
  return spawn(opts.node ?? process.execPath, [...extra, ...flags, entry], {
    cwd: root,
    env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'warn', ...setEnv, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

export async function waitHttp(url: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

/** CPU µs (user + system, from /proc) of a process, or of one of its threads (`tid`). */
export function cpuUs(pid: number, tid?: number): number {
  const f = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * 1e4; // USER_HZ ticks of 10 ms
}

/** Resident memory of a process, from /proc (Linux). */
export function rssMb(pid: number): number {
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024);
}

/**
 * A compiled gateway's environment for a bench of its own: a providers file (written to `providersFile`) with one
 * priced route, `bench/bench-model`, on the bench's mock provider at `mockPort`; the database, Redis and operator key
 * given; a new encryption key; loopback allowed as the provider's address.
 */
export function benchGatewayEnv(opts: { providersFile: string; mockPort: number; databaseUrl: string; redisUrl: string; masterKey: string }): Record<string, string> {
  writeFileSync(
    opts.providersFile,
    JSON.stringify({
      providers: [{ name: 'bench', kind: 'openai', base_url: `http://127.0.0.1:${opts.mockPort}/v1`, region: 'local', models: [{ id: 'bench-model', input_per_mtok: 1, output_per_mtok: 2 }] }],
    }),
  );
  return {
    DATABASE_URL: opts.databaseUrl,
    REDIS_URL: opts.redisUrl,
    SVC_MASTER_KEY: opts.masterKey,
    SVC_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    SVC_PROVIDERS_FILE: opts.providersFile,
    SVC_EGRESS_ALLOWLIST: '127.0.0.1',
  };
}

/** SIGTERM, then the child's exit (at once if it has exited): each gateway role writes what it holds on SIGTERM. */
export function stopChild(c: ChildProcess): Promise<void> {
  return new Promise<void>((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGTERM');
  });
}

/**
 * What a bench of its own runs its gateways on: a Redis server of its own, a fresh schema in PostgreSQL, the bench's
 * mock provider, and the gateway environment for them (benchGatewayEnv). `run` gets the environment and a list to put
 * its child processes in; afterwards every child is stopped, Redis too, and the schema dropped.
 */
export async function withBenchServices(
  opts: { root: string; name: string; databaseUrl: string; masterKey: string },
  run: (env: Record<string, string>, children: ChildProcess[]) => Promise<void>,
): Promise<void> {
  const redis = await PrivateRedis.start();
  const schema = `bench_${opts.name}_${Date.now().toString(36)}`;
  const dbUrl = new URL(opts.databaseUrl);
  dbUrl.searchParams.set('schema', schema);
  const children: ChildProcess[] = [];
  const mockPort = await freePort();
  children.push(spawn(process.execPath, ['--import', 'tsx', 'bench/mock-provider.ts'], { cwd: opts.root, env: { ...process.env, PORT: String(mockPort) }, stdio: 'ignore' }));
  const providersFile = path.join(opts.root, 'bench', 'tmp', `${opts.name}-providers.json`);
  const env = benchGatewayEnv({ providersFile, mockPort, databaseUrl: dbUrl.toString(), redisUrl: redis.url, masterKey: opts.masterKey });
  try {
    await run(env, children);
  } finally {
    await Promise.all(children.map(stopChild));
    await redis.destroy();
    const db = new pg.Client({ connectionString: opts.databaseUrl });
    await db.connect();
    await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await db.end();
  }
}
