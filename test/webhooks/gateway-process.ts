import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { MASTER_KEY } from '../helpers/app.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The real gateway (`node --import tsx src/main.ts`) in a child process, as a replica or for a crash. */
export interface GatewayProcess {
  child: ChildProcess;
  baseUrl: string;
  output(): string;
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
}

export async function startGateway(env: Record<string, string>, timeoutMs = 60_000): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      SVC_MASTER_KEY: MASTER_KEY,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const check = () => {
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (${code}) before listening:\n${out}`));
    });
  });
  return {
    child,
    baseUrl,
    output: () => out,
    exited,
    call: async (method, path, body) => {
      const res = await fetch(baseUrl + path, {
        method,
        headers: { authorization: `Bearer ${MASTER_KEY}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: await res.json() };
    },
  };
}
