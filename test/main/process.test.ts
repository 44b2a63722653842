import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeps, closeDeps } from '../../src/app-deps.ts';
import { loadConfig } from '../../src/config/config.ts';
import { hashSecret } from '../../src/domain/auth/service.ts';
import { createTestDatabase, seedProject, type Seeded } from '../helpers/app.ts';
import { outputToEnd, pollUntil, spawnMain, startGateway, type Answer, type GatewayProcess } from '../helpers/gateway-process.ts';
import { freePort } from '../helpers/ports.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { openServices, type TestServices } from '../helpers/private-services.ts';
import { DATABASE_URL, REDIS_URL } from '../helpers/services.ts';
import { deploy, infer, MODEL, OPEN_PROJECT, type Deployment } from '../system/replicas/support.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts `npm start`'s entry point; `until` decides when to send SIGTERM (else waits for exit). */
async function runMain(env: Record<string, string>, until?: (out: string) => boolean, timeoutMs = 60_000): Promise<Run> {
  const child = spawnMain({ PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', ...env });
  let signalled = false;
  const onOutput = (stdout: string, stderr: string) => {
    if (until && !signalled && until(stdout + stderr)) {
      signalled = true;
      child.kill('SIGTERM');
    }
  };
  const { code, stdout, stderr, capped } = await outputToEnd(child, { capMs: timeoutMs, onOutput });
  if (capped) throw new Error(`main did not finish: ${stdout} ${stderr}`);
  return { code, stdout, stderr };
}

describe('the process', () => {
  it('refuses a bad configuration with one line naming the variable', async () => {
    const run = await runMain({ PORT: 'eighty' });
    expect(run.code).not.toBe(0);
    expect(run.stderr.trim().split('\n')).toEqual(['configuration error: PORT: must be a whole number, got "eighty"']);
  });

  it('names DATABASE_URL in its one line when PostgreSQL cannot be opened at start', async () => {
    const run = await runMain({ DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/postgres' });
    expect(run.code).not.toBe(0);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^startup failed: DATABASE_URL: cannot open PostgreSQL \(/);
  });

  it('starts on the embedded database, serves /healthz, and exits 0 on SIGTERM', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-main-'));
    dirs.push(dir);
    const port = await freePort();
    let healthy = false;
    const run = await runMain(
      { SVC_DATA_DIR: dir, PORT: String(port), SVC_MASTER_KEY: 'svc_sk_process_test_0123456789abcdefghij', LOG_LEVEL: 'info' },
      (out) => {
        if (out.includes('Server listening') && !healthy) {
          healthy = true;
          return true;
        }
        return false;
      },
    );
    expect(healthy).toBe(true);
    expect(run.code).toBe(0);
    expect(run.stdout + run.stderr).toContain('shutting down');
  }, 90_000);

  it('holds a SIGTERM that comes while a new database is opened and migrated until startup has finished, exits 0, and starts again on that database', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-main-'));
    dirs.push(dir);
    const env = { SVC_DATA_DIR: dir, PORT: String(await freePort()), SVC_MASTER_KEY: 'svc_sk_process_test_0123456789abcdefghij', LOG_LEVEL: 'info' };
    // Opening a new embedded database and migrating it take a second or so: the signal lands inside that window.
    const first = await runMain(env, (out) => out.includes('opening the database'));
    expect(first.code).toBe(0);
    expect(first.stderr).toContain('SIGTERM during startup: stopping once startup has finished');
    expect(first.stdout).toContain('migrations applied');
    expect(first.stdout).not.toContain('Server listening');
    // The database is whole: the second start finds nothing to apply (a half-applied migration would stop it, P3009).
    const second = await runMain(env, (out) => out.includes('Server listening'));
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('migrations: database is up to date');
  }, 120_000);
});

describe('Redis that does not answer at start', () => {
  it('starts degraded: it listens, /readyz answers 503 naming Redis, and it exits 0 on SIGTERM', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-main-'));
    dirs.push(dir);
    const g = await startGateway({
      SVC_DATA_DIR: dir,
      SVC_MASTER_KEY: 'svc_sk_process_test_0123456789abcdefghij',
      REDIS_URL: 'redis://127.0.0.1:1', // nothing listens on port 1
      LOG_LEVEL: 'info',
    });
    let exited: Promise<number | string>;
    try {
      // Ready means /healthz answered; the listening line may still be in the pipe.
      await pollUntil('the listening line', async () => g.output().includes('Server listening'), 5_000).catch(() => {});
      expect(g.output()).toContain('Server listening');
      const ready = await g.call('GET', '/readyz', { key: null });
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ checks: { database: 'ok', redis: 'unavailable' } });
      expect((await g.call('GET', '/healthz', { key: null })).status).toBe(200);
      expect(g.output()).toContain('cannot reach Redis at start');
      expect(g.output()).not.toContain('Unhandled error event');
    } finally {
      exited = g.stop('SIGTERM');
    }
    expect(await exited).toBe(0);
  }, 90_000);
});

describe('the operator key', () => {
  it('is generated once when SVC_MASTER_KEY is unset, announced once, and only its hash is kept', async () => {
    const db = await createTestDatabase();
    try {
      const announced: string[] = [];
      const config = loadConfig({ LOG_LEVEL: 'silent' });
      const first = await createDeps(config, { database: db.database, announceMasterKey: (s) => announced.push(s) });
      const second = await createDeps(config, { database: db.database, announceMasterKey: (s) => announced.push(s) });
      expect(announced).toHaveLength(1);
      expect(announced[0]).toMatch(/^svc_sk_[0-9A-Za-z]{48}$/);
      expect(first.masterKeyHash).toBe(hashSecret(announced[0]!));
      expect(second.masterKeyHash).toBe(first.masterKeyHash);
      const stored = await db.database.prisma.setting.findMany();
      expect(JSON.stringify(stored)).not.toContain(announced[0]);
      await first.bus.close();
      await second.bus.close();
    } finally {
      await db.drop();
    }
  });
});

/**
 * README "Configuration" (the drain): on SIGTERM requests in flight finish and are answered with `Connection: close`, idle
 * keep-alive connections are closed (also those that become idle by that answer), connections still open after
 * SVC_ROUTING_TIMEOUT_MS + 5 s are cut, buffered usage is written, and the process exits 0. The client is undici with
 * keep-alive (the helper's Agent), as Node's fetch is.
 */
const DRAIN_MARGIN_MS = 5_000;
/** Writing what is buffered and exiting, after the drain (a few ms here; generous for a loaded 2-core machine). */
const FLUSH_ALLOWANCE_MS = 3_000;
/** Short, so that the bound is short too; the mock provider answers well within it. */
const ROUTING_TIMEOUT_MS = 3_000;
const PROVIDER_DELAY_MS = 1_000;
/** Where no inference runs (the deadline's tests): the shortest drain worth waiting for. */
const SHORT_ROUTING_TIMEOUT_MS = 1_000;
/** When the process must be gone, from SIGTERM: the drain's deadline, then the flush. */
const exitBoundMs = (routingTimeoutMs: number) => routingTimeoutMs + DRAIN_MARGIN_MS + FLUSH_ALLOWANCE_MS;

const within = <T>(p: Promise<T>, ms: number, late: string): Promise<T | string> =>
  Promise.race([p, new Promise<string>((r) => setTimeout(() => r(late), ms).unref())]);

/** A local provider serving MODEL (the replica tests' pricing) from `mock`: the env that points a gateway at it. */
function providerEnv(mock: MockOpenAI): Record<string, string> {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'svc-main-')), 'providers.json');
  dirs.push(path.dirname(file));
  writeFileSync(
    file,
    JSON.stringify({
      providers: [{ name: 'local', kind: 'openai', base_url: mock.url, region: 'local', timeout_ms: 10_000, models: [{ id: MODEL, input_per_mtok: 1_000, output_per_mtok: 1_000 }] }],
    }),
  );
  return { SVC_PROVIDERS_FILE: file, SVC_ROUTING_TIMEOUT_MS: String(ROUTING_TIMEOUT_MS), LOG_LEVEL: 'info' };
}

interface Drained {
  answer: Answer;
  /** Exit code, or 'still running' when the process outlived the bound. */
  code: number | string;
  /** From SIGTERM to the exit. */
  exitMs: number;
}

/**
 * Two keep-alive connections (one stays idle), an inference the provider holds for PROVIDER_DELAY_MS on one of them,
 * SIGTERM once the provider has the request. Waits for the exit at most the drain bound plus the flush allowance.
 */
async function sigtermWithInferenceInFlight(g: GatewayProcess, s: Seeded, mock: MockOpenAI): Promise<Drained> {
  const warm = await Promise.all([g.call('GET', '/healthz', { key: null }), g.call('GET', '/healthz', { key: null })]);
  expect(warm.map((a) => [a.status, a.headers.connection])).toEqual([[200, 'keep-alive'], [200, 'keep-alive']]);
  mock.reset({ delayMs: PROVIDER_DELAY_MS });
  const inFlight = infer(g, s, 'drain');
  await pollUntil('the provider holds the inference', async () => mock.calls === 1, 10_000, 10);
  const signalled = performance.now();
  g.child.kill('SIGTERM');
  const answer = await inFlight;
  const code = await within(g.exited, exitBoundMs(ROUTING_TIMEOUT_MS), 'still running');
  return { answer, code, exitMs: performance.now() - signalled };
}

function expectDrained(g: GatewayProcess, d: Drained): void {
  expect(g.output()).toContain('shutting down: finishing requests in flight');
  expect({ status: d.answer.status, connection: d.answer.headers.connection, error: d.answer.error, exit: d.code }, g.output().slice(-2_000)).toEqual({
    status: 200,
    connection: 'close',
    error: undefined,
    exit: 0,
  });
  expect(d.answer.body).toMatchObject({ object: 'svc.inference', message: { content: 'drain' }, request_id: d.answer.headers['x-svc-request-id'] });
  expect(d.exitMs).toBeLessThan(exitBoundMs(ROUTING_TIMEOUT_MS));
  // Every connection closed by itself: nothing was left for the deadline to cut.
  expect(g.output()).not.toContain('drain deadline');
}

/** A connection that sent half a request's headers: busy as the server sees it, and never finished by the client. */
function halfRequest(port: number, path: string): Promise<{ socket: Socket; data: () => string; ended: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    socket.on('data', (c) => (data += c.toString()));
    const ended = new Promise<void>((r) => socket.on('close', () => r()));
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
      resolve({ socket, data: () => data, ended });
    });
  });
}

/**
 * A round trip on another connection: by its answer the server has read the half requests written before it (the
 * readable sockets come out of one poll), so they are busy connections, not idle ones that a close ends at once.
 */
async function serverHasRead(g: GatewayProcess): Promise<void> {
  expect((await g.call('GET', '/healthz', { key: null })).status).toBe(200);
}

async function storedUsage(dataDir: string, requestId: string): Promise<string | null> {
  const db = new PGlite(dataDir);
  try {
    const { rows } = await db.query<{ status: string }>('SELECT status FROM usage_records WHERE request_id = $1', [requestId]);
    return rows[0]?.status ?? null;
  } finally {
    await db.close();
  }
}

describe('SIGTERM with an inference in flight on a keep-alive connection (embedded database)', () => {
  let mock: MockOpenAI;
  /** One embedded database for both gateways (one after the other): the second start skips creating it. */
  let dir: string;
  beforeAll(async () => {
    mock = await startMockOpenAI();
    dir = mkdtempSync(path.join(tmpdir(), 'svc-main-'));
    dirs.push(dir);
  });
  afterAll(async () => {
    await mock?.close();
  });

  it('SVC_ROLE=all: answers it 200 with Connection: close, closes the connection, writes its usage, exits 0 within the bound', { timeout: 90_000 }, async () => {
    const g = await startGateway({ SVC_DATA_DIR: dir, ...providerEnv(mock) });
    try {
      const s = await seedProject(g, OPEN_PROJECT);
      const d = await sigtermWithInferenceInFlight(g, s, mock);
      expectDrained(g, d);
      expect(await storedUsage(dir, d.answer.body.request_id)).toBe('succeeded');
    } finally {
      await g.stop('SIGKILL');
    }
  });

  it('cuts a connection that is still busy at the drain deadline (half a request) and exits 0', { timeout: 90_000 }, async () => {
    const g = await startGateway({ SVC_DATA_DIR: dir, ...providerEnv(mock), SVC_ROUTING_TIMEOUT_MS: String(SHORT_ROUTING_TIMEOUT_MS) });
    try {
      const stuck = await halfRequest(g.port, '/healthz');
      await serverHasRead(g);
      const signalled = performance.now();
      g.child.kill('SIGTERM');
      const code = await within(g.exited, exitBoundMs(SHORT_ROUTING_TIMEOUT_MS), 'still running');
      const exitMs = performance.now() - signalled;
      expect({ code, output: code === 0 ? '' : g.output().slice(-2_000) }).toEqual({ code: 0, output: '' });
      await stuck.ended;
      expect(stuck.data()).toBe('');
      // Not before the deadline: the connection was given the whole drain.
      expect(exitMs).toBeGreaterThanOrEqual(SHORT_ROUTING_TIMEOUT_MS + DRAIN_MARGIN_MS - 100);
      expect(g.output()).toContain('drain deadline');
    } finally {
      await g.stop('SIGKILL');
    }
  });
});

/**
 * The same on PostgreSQL + Redis, for each SVC_ROLE; runs whenever DATABASE_URL or REDIS_URL is set (a missing one is a
 * private server: openServices fails, never skips, when it cannot start one).
 */
describe.skipIf(!DATABASE_URL && !REDIS_URL)(
  DATABASE_URL || REDIS_URL ? 'SIGTERM with an inference in flight on a keep-alive connection (PostgreSQL + Redis)' : 'SIGTERM on PostgreSQL + Redis (skipped: DATABASE_URL / REDIS_URL unset)',
  () => {
    let services: TestServices;
    let dep: Deployment;
    beforeAll(async () => {
      services = await openServices();
      dep = await deploy(services);
    }, 60_000);
    afterAll(async () => {
      await dep?.close();
      await services?.close();
    });
    const usageOf = async (requestId: string) =>
      (await services.sql<{ status: string }>('SELECT status FROM usage_records WHERE request_id = $1', [requestId]))[0]?.status ?? null;

    it('SVC_ROLE=all: answers it 200 with Connection: close, writes its usage, exits 0 within the bound', { timeout: 90_000 }, async () => {
      const g = await dep.start({ SVC_ROUTING_TIMEOUT_MS: String(ROUTING_TIMEOUT_MS), LOG_LEVEL: 'info' });
      const s = await seedProject(g, OPEN_PROJECT);
      const d = await sigtermWithInferenceInFlight(g, s, dep.mock);
      expectDrained(g, d);
      expect(await usageOf(d.answer.body.request_id)).toBe('succeeded');
    });

    it('SVC_ROLE=api and SVC_ROLE=worker: each exits 0 within the bound; the worker writes the usage the api accepted', { timeout: 120_000 }, async () => {
      const env = { SVC_ROUTING_TIMEOUT_MS: String(ROUTING_TIMEOUT_MS), LOG_LEVEL: 'info' };
      const [api, worker] = await Promise.all([
        dep.start({ ...env, SVC_ROLE: 'api' }),
        dep.start({ ...env, SVC_ROLE: 'worker', SVC_ROUTING_TIMEOUT_MS: String(SHORT_ROUTING_TIMEOUT_MS) }),
      ]);
      const s = await seedProject(api, OPEN_PROJECT);
      const d = await sigtermWithInferenceInFlight(api, s, dep.mock);
      expectDrained(api, d);

      // The worker: an idle keep-alive connection; one busy at SIGTERM (its request's headers are not complete) that
      // the client completes during the drain: answered with Connection: close and closed; one never completed: cut at
      // the drain deadline.
      expect((await worker.call('GET', '/healthz', { key: null })).headers.connection).toBe('keep-alive');
      const busy = await halfRequest(worker.port, '/healthz');
      const stuck = await halfRequest(worker.port, '/readyz');
      await serverHasRead(worker);
      const signalled = performance.now();
      worker.child.kill('SIGTERM');
      await pollUntil('the worker is shutting down', async () => worker.output().includes('shutting down: finishing requests in flight'), 10_000, 10);
      busy.socket.write('\r\n');
      await busy.ended;
      expect(busy.data()).toMatch(/^HTTP\/1\.1 503 /);
      expect(busy.data()).toMatch(/\r\nconnection: close\r\n/i);
      const code = await within(worker.exited, exitBoundMs(SHORT_ROUTING_TIMEOUT_MS), 'still running');
      const exitMs = performance.now() - signalled;
      expect({ code, output: code === 0 ? '' : worker.output().slice(-2_000) }).toEqual({ code: 0, output: '' });
      expect(exitMs).toBeLessThan(exitBoundMs(SHORT_ROUTING_TIMEOUT_MS));
      expect(exitMs).toBeGreaterThanOrEqual(SHORT_ROUTING_TIMEOUT_MS + DRAIN_MARGIN_MS - 100);
      expect(worker.output()).toContain('drain deadline');
      await stuck.ended;
      expect(stuck.data()).toBe('');
      expect(await usageOf(d.answer.body.request_id)).toBe('succeeded');
    });
  },
);
