import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { MASTER_KEY } from './app.ts';
import { freePort } from './ports.ts';
import { directDatabaseEnv } from './services.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The child's output kept for a failure message: the tail only, a process under load can log a lot. */
const OUTPUT_TAIL = 64 * 1024;

/** One answer as a client saw it: a status and body, or no HTTP answer at all. */
export interface Answer {
  /** 'hang': no answer within the call's deadline; 'network': the connection failed or was cut. */
  status: number | 'hang' | 'network';
  headers: Record<string, string>;
  body: any;
  /** Wall-clock milliseconds from sending to the end of the body (or to the failure). */
  ms: number;
  error?: string;
}

export interface CallOptions {
  /** Bearer key; default the operator's MASTER_KEY; null sends none. */
  key?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
  /** Give up after this long and report 'hang'. Default 30 s. */
  timeoutMs?: number;
}

/**
 * The real gateway (`node --import tsx src/main.ts`) in a child process: a replica, a process to kill -9, a soak target.
 * It listens on a port chosen here, so that a restart can take the same address; ready means /healthz answers.
 */
export interface GatewayProcess {
  child: ChildProcess;
  pid: number;
  port: number;
  baseUrl: string;
  env: Record<string, string>;
  /** The tail of stdout and stderr. */
  output(): string;
  /** Resolves with the exit code, or the signal's name. */
  exited: Promise<number | string>;
  call(method: string, path: string, opts?: CallOptions): Promise<Answer>;
  /** Resident set size in MB (Linux /proc). */
  rssMb(): number;
  /** SIGTERM (clean shutdown) or SIGKILL (a crash); resolves when the process is gone. */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<number | string>;
}

export interface StartOptions {
  /** Default: a free port. Pass the previous process's port to restart on the same address. */
  port?: number;
  timeoutMs?: number;
}

/** How a child process ended, with all of its output. */
export interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Killed (SIGKILL) by outputToEnd's cap. */
  capped: boolean;
}

/**
 * A child's whole output once it has ended. Resolves on 'close', not 'exit': a process can exit before its output has
 * been read to the end. `onOutput` sees the output so far after each chunk (to signal the child at a point of it);
 * past `capMs` the child is killed (SIGKILL) and `capped` says so. Rejects if the child could not be started.
 */
export function outputToEnd(child: ChildProcess, opts: { capMs?: number; onOutput?: (stdout: string, stderr: string) => void } = {}): Promise<Ended> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let capped = false;
    const cap = setTimeout(() => {
      capped = true;
      child.kill('SIGKILL');
    }, opts.capMs ?? 60_000);
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
      opts.onOutput?.(stdout, stderr);
    });
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      opts.onOutput?.(stdout, stderr);
    });
    child.on('error', (err) => {
      clearTimeout(cap);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(cap);
      resolve({ code, signal, stdout, stderr, capped });
    });
  });
}

/** `node --import tsx src/main.ts` (what `npm start` runs) from the repository root, with exactly this environment. */
export function spawnMain(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
}

export async function startGateway(env: Record<string, string>, opts: StartOptions = {}): Promise<GatewayProcess> {
  const port = opts.port ?? (await freePort());
  const fullEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    SVC_MASTER_KEY: MASTER_KEY,
    // npm run test:pgbouncer: a DATABASE_URL through the pooler comes with its direct twin.
    ...directDatabaseEnv(env.DATABASE_URL),
    ...env,
    PORT: String(port),
  };
  const child = spawnMain(fullEnv);
  let out = '';
  const append = (c: Buffer) => {
    out += c.toString();
    if (out.length > 2 * OUTPUT_TAIL) out = out.slice(-OUTPUT_TAIL);
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  let exitedWith: number | string | null = null;
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => {
      exitedWith = code ?? signal ?? -1;
      resolve(exitedWith);
    }),
  );
  const baseUrl = `http://127.0.0.1:${port}`;
  const agent = new Agent({ connections: 128, pipelining: 1, keepAliveTimeout: 10_000 });
  const gateway: GatewayProcess = {
    child,
    pid: child.pid!,
    port,
    baseUrl,
    env: fullEnv,
    output: () => out.slice(-OUTPUT_TAIL),
    exited,
    call: (method, path, o = {}) => callGateway(agent, baseUrl, method, path, o),
    rssMb: () => Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) / 1024),
    stop: async (signal = 'SIGTERM') => {
      if (exitedWith === null) child.kill(signal);
      const code = await exited;
      await agent.close().catch(() => {});
      return code;
    },
  };
  const until = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    if (exitedWith !== null) throw new Error(`gateway exited (${exitedWith}) before it was ready:\n${gateway.output()}`);
    const res = await gateway.call('GET', '/healthz', { key: null, timeoutMs: 2_000 });
    if (res.status === 200) return gateway;
    if (Date.now() > until) {
      child.kill('SIGKILL');
      throw new Error(`gateway did not answer /healthz within ${opts.timeoutMs ?? 60_000} ms:\n${gateway.output()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function callGateway(agent: Agent, baseUrl: string, method: string, path: string, o: CallOptions): Promise<Answer> {
  const key = o.key === undefined ? MASTER_KEY : o.key;
  const started = performance.now();
  const signal = AbortSignal.timeout(o.timeoutMs ?? 30_000);
  try {
    const res = await request(baseUrl + path, {
      method: method as 'GET',
      dispatcher: agent,
      signal,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...o.headers,
      },
      body: o.body === undefined ? undefined : JSON.stringify(o.body),
    });
    const text = await res.body.text();
    let body: any = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // not JSON: kept as text, so that a test can show it
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    return { status: res.statusCode, headers, body, ms: performance.now() - started };
  } catch (err) {
    const ms = performance.now() - started;
    if (signal.aborted) return { status: 'hang', headers: {}, body: null, ms, error: `no answer within ${o.timeoutMs ?? 30_000} ms` };
    return { status: 'network', headers: {}, body: null, ms, error: (err as Error).message };
  }
}

/** Polls (real time, with a deadline) until `check` returns something truthy; the last value is in the error. */
export async function pollUntil<T>(what: string, check: () => Promise<T | null | undefined | false>, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until) {
      const detail = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`${what}: not reached within ${timeoutMs} ms (last: ${detail})`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
