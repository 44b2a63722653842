import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { onTestFailed } from 'vitest';
import { writeProvidersFile } from '../inference/fixtures.ts';
import { TEST_ENCRYPTION_KEY } from './app.ts';
import { startGateway, type GatewayProcess } from './gateway-process.ts';
import { startMockOpenAI, type MockOpenAI } from './mock-openai.ts';
import { DATABASE_URL, REDIS_URL, deleteRedisPrefix, dropSchema, gatewayDatabaseUrls, uniqueName } from './services.ts';

/** A start compiles the sources (tsx): on a loaded machine it can take well over a minute. */
export const CRASH_STARTUP_MS = 180_000;

/**
 * What a crash test (a real gateway killed with SIGKILL mid-work, then started again) needs: a priced OpenAI-shaped
 * provider (`gpt-test`, 60 ms an answer, 10 + 10 tokens) that records every request, a database of its own (a
 * PostgreSQL schema, or an embedded one in a data directory of its own that the restart reuses) and a Redis prefix of
 * its own, and the gateway (api and worker in one process) started on them.
 */
export interface CrashRig {
  provider: MockOpenAI;
  gateway: GatewayProcess;
  /** Kills the gateway with SIGKILL. */
  kill(): Promise<void>;
  /** Starts it again on the same port, database and Redis prefix. */
  start(): Promise<GatewayProcess>;
  close(): Promise<void>;
}

export async function startCrashRig(name: string, env: Record<string, string>): Promise<CrashRig> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const provider = await startMockOpenAI({ delayMs: 60, usage: { prompt_tokens: 10, completion_tokens: 10 } });
  cleanups.push(() => provider.close());
  const file = writeProvidersFile({
    providers: [
      { name: 'priced', kind: 'openai', base_url: provider.url, region: 'eu-west-1', timeout_ms: 5000, models: [{ id: 'gpt-test', input_per_mtok: 1, output_per_mtok: 1 }] },
    ],
  });
  const all: Record<string, string> = {
    SVC_PROVIDERS_FILE: file,
    SVC_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    SVC_OUTCOME_LEASE_MS: '1000',
    // A resumed call waits until one begun before the kill has surely ended (the routing timeout after it); long enough
    // that a provider call on a loaded machine does not end in routing_timeout.
    SVC_ROUTING_TIMEOUT_MS: '10000',
    ...env,
  };
  if (DATABASE_URL) {
    const schema = uniqueName(name);
    const urls = await gatewayDatabaseUrls(DATABASE_URL, schema);
    all.DATABASE_URL = urls.url;
    if (urls.directUrl) all.DATABASE_DIRECT_URL = urls.directUrl;
    cleanups.push(() => dropSchema(DATABASE_URL!, schema));
  } else {
    const dir = mkdtempSync(path.join(tmpdir(), `svc-${name}-`));
    all.SVC_DATA_DIR = dir;
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  }
  if (REDIS_URL) {
    const prefix = `${uniqueName(name)}:`;
    all.REDIS_URL = REDIS_URL;
    all.SVC_REDIS_PREFIX = prefix;
    cleanups.push(() => deleteRedisPrefix(REDIS_URL!, prefix));
  }
  const rig: CrashRig = {
    provider,
    gateway: await startGateway(all, { timeoutMs: CRASH_STARTUP_MS }),
    async kill() {
      if ((await rig.gateway.stop('SIGKILL')) !== 'SIGKILL') throw new Error('the gateway was not killed by SIGKILL');
    },
    async start() {
      rig.gateway = await startGateway(all, { port: rig.gateway.port, timeoutMs: CRASH_STARTUP_MS });
      return rig.gateway;
    },
    async close() {
      await rig.gateway.stop('SIGKILL');
      for (const c of cleanups.reverse()) await c();
    },
  };
  onTestFailed(() => console.error(`gateway output (tail):\n${rig.gateway.output().slice(-6_000)}`));
  return rig;
}
