import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { ERRORS, isErrorCode } from '../../../src/errors/codes.ts';
import type { Seeded, SeedOptions } from '../../helpers/app.ts';
import { startGateway, pollUntil, type Answer, type GatewayProcess } from '../../helpers/gateway-process.ts';
import { startMockOpenAI, type MockOpenAI } from '../../helpers/mock-openai.ts';
import type { TestServices } from '../../helpers/private-services.ts';

/** The mock provider's model: $1,000 per million tokens in and out, so that 10 tokens cost exactly $0.01. */
export const MODEL = 'replica-model';
export const MICROS_PER_TOKEN = 1_000;

/**
 * Gateways in child processes on one PostgreSQL schema and one Redis prefix, in front of one local mock provider:
 * what a deployment of several replicas looks like, on loopback.
 */
export interface Deployment {
  services: TestServices;
  mock: MockOpenAI;
  /** The environment every gateway of the deployment gets (plus per-start extras). */
  env: Record<string, string>;
  gateways: GatewayProcess[];
  start(extraEnv?: Record<string, string>, opts?: { port?: number }): Promise<GatewayProcess>;
  close(): Promise<void>;
}

export async function deploy(services: TestServices, env: Record<string, string> = {}): Promise<Deployment> {
  const mock = await startMockOpenAI();
  const providersFile = path.join(tmpdir(), `svc-providers-${randomBytes(6).toString('hex')}.json`);
  writeFileSync(
    providersFile,
    JSON.stringify({
      providers: [
        {
          name: 'local',
          kind: 'openai',
          base_url: mock.url,
          region: 'local',
          timeout_ms: 10_000,
          models: [{ id: MODEL, input_per_mtok: MICROS_PER_TOKEN, output_per_mtok: MICROS_PER_TOKEN }],
        },
      ],
    }),
  );
  const d: Deployment = {
    services,
    mock,
    env: {
      DATABASE_URL: services.databaseUrl,
      REDIS_URL: services.redisUrl,
      SVC_REDIS_PREFIX: services.redisPrefix,
      SVC_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      SVC_PROVIDERS_FILE: providersFile,
      ...env,
    },
    gateways: [],
    start: async (extraEnv = {}, opts = {}) => {
      const g = await startGateway({ ...d.env, ...extraEnv }, opts);
      d.gateways.push(g);
      return g;
    },
    close: async () => {
      await Promise.all(d.gateways.map((g) => g.stop('SIGKILL')));
      await mock.close();
      rmSync(providersFile, { force: true });
    },
  };
  return d;
}

/** Limits that never bind, for tests about something else. */
export const OPEN_LIMITS = { requests_per_minute: 100_000_000, tokens_per_minute: 1_000_000_000, burst: 100_000_000 };

/**
 * What the process tests seed (with test/helpers/app.ts's seedProject): an enterprise project whose rate limits never
 * bind, and a key that may infer, manage keys and read usage.
 */
export const OPEN_PROJECT = { plan: 'enterprise', limits: OPEN_LIMITS, scopes: ['inference:write', 'keys:manage', 'usage:read'] } satisfies SeedOptions;

/** POST /v1/inference; `content` of 5 characters costs exactly $0.01 (5 prompt + 5 completion tokens). */
export function infer(
  g: GatewayProcess,
  s: Seeded,
  content: string,
  opts: { headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Answer> {
  return g.call('POST', '/v1/inference', {
    key: s.secret,
    body: { model: MODEL, project_id: s.projectId, messages: [{ role: 'user', content }] },
    headers: opts.headers,
    timeoutMs: opts.timeoutMs,
  });
}

const STACK_RE = /\n\s+at |\bat [^\s]+ \(.*:\d+:\d+\)|node_modules|\/src\//;

/** The spec's error object (§7) with a code from its table and that code's HTTP status; never a stack. */
export function specErrorProblem(a: Answer): string | null {
  if (typeof a.status !== 'number') return `no HTTP answer (${a.status}: ${a.error})`;
  const e = a.body?.error;
  if (!e || typeof e !== 'object') return `${a.status} without an error object: ${JSON.stringify(a.body)?.slice(0, 300)}`;
  if (Object.keys(a.body).join() !== 'error') return `${a.status}: extra top-level fields ${Object.keys(a.body).join()}`;
  if (e.type !== 'svc.error') return `${a.status}: error.type ${e.type}`;
  const code: unknown = e.code;
  if (typeof code !== 'string' || !isErrorCode(code)) return `${a.status}: unknown code ${String(code)}`;
  if (ERRORS[code].http !== a.status) return `${a.status} with code ${code} (whose status is ${ERRORS[code].http})`;
  if (typeof e.message !== 'string' || STACK_RE.test(e.message)) return `${a.status} ${e.code}: message leaks internals: ${e.message}`;
  if (typeof e.request_id !== 'string' || e.request_id !== a.headers['x-svc-request-id']) return `${a.status} ${e.code}: request_id/header mismatch`;
  if (typeof e.doc_url !== 'string' || !e.doc_url.endsWith(`#${e.code}`)) return `${a.status} ${e.code}: doc_url ${e.doc_url}`;
  if (e.param !== null && typeof e.param !== 'string') return `${a.status} ${e.code}: param ${e.param}`;
  return null;
}

export function expectSpecError(a: Answer, status: number, code: string): void {
  expect(specErrorProblem(a)).toBeNull();
  expect([a.status, a.body.error.code]).toEqual([status, code]);
}

/** "200" or "503 model_unavailable" or "hang": for tallies in failure messages and reports. */
export const outcomeLabel = (a: Answer): string =>
  typeof a.status !== 'number' ? a.status : a.status === 200 ? '200' : `${a.status} ${a.body?.error?.code ?? '?'}`;

export function tally(answers: Answer[]): Record<string, number> {
  const t: Record<string, number> = {};
  for (const a of answers) t[outcomeLabel(a)] = (t[outcomeLabel(a)] ?? 0) + 1;
  return t;
}

export interface Outcomes {
  /** request_id → its usage record's status. */
  usage: Map<string, string>;
  /** request_id → how many inference.completed events carry it. */
  events: Map<string, number>;
}

/** What the database holds for these requests: usage records and inference.completed events. */
export async function outcomesOf(services: TestServices, requestIds: string[]): Promise<Outcomes> {
  const usage = new Map<string, string>();
  const events = new Map<string, number>();
  for (let i = 0; i < requestIds.length; i += 5_000) {
    const ids = requestIds.slice(i, i + 5_000);
    for (const r of await services.sql<{ request_id: string; status: string }>(
      'SELECT request_id, status FROM usage_records WHERE request_id = ANY($1)',
      [ids],
    )) {
      usage.set(r.request_id, r.status);
    }
    for (const r of await services.sql<{ request_id: string; n: string }>(
      `SELECT data->>'request_id' AS request_id, count(*) AS n FROM events
        WHERE type = 'inference.completed' AND data->>'request_id' = ANY($1) GROUP BY 1`,
      [ids],
    )) {
      events.set(r.request_id, Number(r.n));
    }
  }
  return { usage, events };
}

/**
 * Every given request (each answered 200) has its usage record, status succeeded, and exactly one inference.completed
 * event. Background writers get until the deadline to flush; the figures of what is missing end up in the error.
 */
export async function expectRecorded(services: TestServices, requestIds: string[], timeoutMs = 10_000): Promise<void> {
  let last: Outcomes | null = null;
  const problems = (o: Outcomes) => {
    const noUsage = requestIds.filter((id) => !o.usage.has(id));
    const notSucceeded = requestIds.filter((id) => o.usage.has(id) && o.usage.get(id) !== 'succeeded');
    const noEvent = requestIds.filter((id) => !o.events.has(id));
    const dupEvent = requestIds.filter((id) => (o.events.get(id) ?? 0) > 1);
    return { noUsage, notSucceeded, noEvent, dupEvent };
  };
  try {
    await pollUntil(
      'usage records and inference.completed events of the accepted requests',
      async () => {
        last = await outcomesOf(services, requestIds);
        const p = problems(last);
        return p.noUsage.length === 0 && p.noEvent.length === 0;
      },
      timeoutMs,
      200,
    );
  } catch {
    // reported below with the figures
  }
  const p = problems(last ?? (await outcomesOf(services, requestIds)));
  const summary = {
    accepted: requestIds.length,
    without_usage_record: p.noUsage.length,
    usage_not_succeeded: p.notSucceeded.length,
    without_event: p.noEvent.length,
    with_duplicate_events: p.dupEvent.length,
    examples: [...p.noUsage, ...p.noEvent, ...p.notSucceeded, ...p.dupEvent].slice(0, 5),
  };
  expect(summary).toEqual({
    accepted: requestIds.length,
    without_usage_record: 0,
    usage_not_succeeded: 0,
    without_event: 0,
    with_duplicate_events: 0,
    examples: [],
  });
}

/** Request ids of the 200 answers (the body's request_id, which equals the X-Svc-Request-Id header). */
export function acceptedIds(answers: Answer[]): string[] {
  return answers.filter((a) => a.status === 200).map((a) => {
    expect(a.body.request_id).toBe(a.headers['x-svc-request-id']);
    return a.body.request_id as string;
  });
}

/** Five characters, unique enough for distinct prompts: every answer costs the same $0.01. */
export const five = (i: number) => i.toString(36).padStart(5, '0').slice(-5);
