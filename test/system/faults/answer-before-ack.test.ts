import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, expect, it, onTestFailed } from 'vitest';
import { seedProject } from '../../helpers/app.ts';
import { CRASH_STARTUP_MS } from '../../helpers/crash-rig.ts';
import { pollUntil, startGateway, type GatewayProcess } from '../../helpers/gateway-process.ts';
import { NO_SERVICES, NO_SERVICES_REASON, openServices, type TestServices } from '../../helpers/private-services.ts';
import { user, writeProvidersFile } from '../../inference/fixtures.ts';

/**
 * After the provider call, the gateway answers once the settlement, the spend and the usage entry are in its Redis
 * socket's kernel buffer, not once Redis acknowledged them (issue 39). This test makes the moment between the answer
 * and the acknowledgement last: the private Redis is frozen (SIGSTOP: it reads nothing, answers nothing) while the
 * provider's answer is held, then the provider answers, the client gets its 200 with Redis still frozen, and the
 * gateway is killed with SIGKILL. Once Redis runs again, what the dead process had written is applied: the spend
 * counter, the settlement of the token windows and the usage stream's entry, which a restarted gateway writes to
 * PostgreSQL (usage record, budget_spend). Nothing accepted is lost and no budget escapes.
 */

/** Far longer than the answer may take: an answer that waited for Redis would come only after it. */
const COMMAND_TIMEOUT_MS = 20_000;
const MODEL = 'held-model';
/** 1,000 + 1,000 tokens at $1 and $2 per million: 3,000 micro-dollars an answer. */
const COST_MICROS = 3_000;

/** An OpenAI-shaped provider whose answers the test releases (each request waits while `hold` is on). */
interface HeldProvider {
  url: string;
  arrived: number;
  hold: boolean;
  release(): void;
  close(): Promise<void>;
}

async function startHeldProvider(): Promise<HeldProvider> {
  const waiting: (() => void)[] = [];
  const body = JSON.stringify({
    id: 'chatcmpl-held',
    object: 'chat.completion',
    created: 0,
    model: MODEL,
    choices: [{ index: 0, message: { role: 'assistant', content: 'held answer' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1_000, completion_tokens: 1_000, total_tokens: 2_000 },
  });
  const p: HeldProvider = {
    url: '',
    arrived: 0,
    hold: false,
    release: () => {
      for (const answer of waiting.splice(0)) answer();
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      p.arrived++;
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      };
      if (p.hold) waiting.push(answer);
      else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  p.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return p;
}

let services: TestServices | undefined;
let provider: HeldProvider | undefined;
let gateway: GatewayProcess | undefined;
let providersFile: string | undefined;
let raw: Redis | undefined;
afterAll(async () => {
  services?.redis?.unfreeze();
  await gateway?.stop('SIGKILL');
  raw?.disconnect();
  await provider?.close();
  if (providersFile) rmSync(providersFile, { force: true });
  await services?.close();
});

it.skipIf(NO_SERVICES)(
  NO_SERVICES
    ? `kill -9 between the answer and Redis's acknowledgement (${NO_SERVICES_REASON})`
    : 'answers before Redis acknowledges the settlement, and a kill -9 right then loses no usage and lets no spend escape',
  { timeout: 2 * CRASH_STARTUP_MS + 60_000 },
  async () => {
    services = await openServices({ privateRedis: true });
    const redis = services.redis!;
    provider = await startHeldProvider();
    providersFile = writeProvidersFile({
      providers: [
        { name: 'held', kind: 'openai', base_url: provider.url, region: 'eu-west-1', timeout_ms: 60_000, models: [{ id: MODEL, input_per_mtok: 1, output_per_mtok: 2 }] },
      ],
    });
    const env = {
      DATABASE_URL: services.databaseUrl,
      REDIS_URL: services.redisUrl,
      SVC_REDIS_PREFIX: services.redisPrefix,
      SVC_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      SVC_PROVIDERS_FILE: providersFile,
      SVC_REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
      SVC_OUTCOME_LEASE_MS: '1000',
    };
    gateway = await startGateway(env, { timeoutMs: CRASH_STARTUP_MS });
    onTestFailed(() => console.error(`gateway output (tail):\n${gateway?.output().slice(-6_000)}`));
    // A project budget: its month counter lives in Redis and takes every answer's cost.
    const s = await seedProject(gateway, { budgetUsd: 100, scopes: ['inference:write', 'usage:read'] });
    const infer = () =>
      gateway!.call('POST', '/v1/inference', {
        key: s.secret,
        body: { project_id: s.projectId, model: MODEL, messages: user('hello'), max_tokens: 16 },
      });
    // The first inference seeds the counter and loads the scripts on the connection.
    const first = await infer();
    expect(first.status).toBe(200);

    raw = new Redis(services.redisUrl, { maxRetriesPerRequest: null });
    const period = new Date().toISOString().slice(0, 7);
    const counterKey = `${services.redisPrefix}spend:{${s.projectId}}:project:${s.projectId}:${period}`;
    const tokensKey = `${services.redisPrefix}rl:{${s.projectId}}:k:${s.keyId}:t`;
    const stream = `${services.redisPrefix}usage:outcomes`;
    await pollUntil('the first answer counted', async () => (await raw!.get(counterKey)) === String(COST_MICROS), 10_000);

    provider.hold = true;
    const held = infer();
    // The provider has the request: the gateway's call before it (windows, reservation, budget) was answered.
    await pollUntil('the provider has the request', async () => provider!.arrived === 2, 30_000);
    const reserved = await raw.hmget(tokensKey, 'u', 't');
    redis.freeze();
    const releasedAt = performance.now();
    provider.release();
    const answer = await held;
    const answeredInMs = performance.now() - releasedAt;
    // Answered while Redis was frozen: the response did not wait for the acknowledgement (nor for the command timeout).
    expect(answer.status).toBe(200);
    expect(answer.body.usage).toMatchObject({ prompt_tokens: 1_000, completion_tokens: 1_000 });
    expect(answer.body.cost_usd).toBe(COST_MICROS / 1e6);
    expect(answeredInMs).toBeLessThan(COMMAND_TIMEOUT_MS / 2);
    const requestId = answer.body.request_id as string;

    // kill -9 between the answer and Redis's acknowledgement; then Redis runs again and reads what the dead process wrote.
    expect(await gateway.stop('SIGKILL')).toBe('SIGKILL');
    redis.unfreeze();

    // The spend: the counter took the held answer's cost.
    await pollUntil('the held answer counted', async () => (await raw!.get(counterKey)) === String(2 * COST_MICROS), 10_000);
    // The settlement: the key's token window was written again after the reservation (2,000 tokens used, 16 + the
    // prompt's estimate reserved), at the settlement's time.
    const settled = await raw.hmget(tokensKey, 'u', 't');
    expect(Number(settled[1])).toBeGreaterThan(Number(reserved[1]));
    // The usage entry is in the stream, with the held request in it.
    const entries = (await raw.xrange(stream, '-', '+')) as [string, string[]][];
    expect(entries.some(([, fields]) => fields.join(' ').includes(requestId))).toBe(true);

    // A gateway started again writes it to PostgreSQL: the usage record, and the month's spend with both answers.
    gateway = await startGateway(env, { port: gateway.port, timeoutMs: CRASH_STARTUP_MS });
    const rows = await pollUntil(
      'the usage record written',
      async () => {
        const r = await services!.sql<{ status: string; cost_micros: string; prompt_tokens: number }>(
          'SELECT status, cost_micros::text, prompt_tokens FROM usage_records WHERE request_id = $1',
          [requestId],
        );
        return r.length > 0 ? r : null;
      },
      30_000,
    );
    expect(rows).toEqual([{ status: 'succeeded', cost_micros: String(COST_MICROS), prompt_tokens: 1_000 }]);
    const spend = await pollUntil(
      'the spend written',
      async () => {
        const r = await services!.sql<{ spent: string }>('SELECT spent_micros::text AS spent FROM budget_spend WHERE scope = $1', [`project:${s.projectId}`]);
        return r[0]?.spent === String(2 * COST_MICROS) ? r[0].spent : null;
      },
      30_000,
    );
    expect(spend).toBe(String(2 * COST_MICROS));
    // And once: every request has one usage record.
    const count = await services.sql<{ n: string }>('SELECT count(*)::text AS n FROM usage_records WHERE project_id = $1', [s.projectId]);
    expect(count).toEqual([{ n: '2' }]);
  },
);
