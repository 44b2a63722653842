import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeps, createLogger } from '../../src/app-deps.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { Deps } from '../../src/deps.ts';
import { buildApp } from '../../src/api/app.ts';
import { client, createTestDatabase, LogCapture, MASTER_KEY, seedProject, TEST_ENCRYPTION_KEY, type TestDatabase } from '../helpers/app.ts';
import { REDIS_URL, uniqueName } from '../helpers/services.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';

/**
 * Traces exported over OTLP/HTTP to a receiver in this process (a plain HTTP server decoding OTLP's JSON encoding):
 * one trace per request with the request's span, auth and rate limit, each provider hop (GenAI attributes) and the
 * outcome write; the trace id in the log lines and tied to X-Svc-Request-Id.
 */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  status?: { code?: number };
  attributes: { key: string; value: Record<string, unknown> }[];
}

let receiver: Server;
const exported: OtlpSpan[] = [];
let db: TestDatabase;
let deps: Deps;
let app: FastifyInstance;
let base: string;
const logs = new LogCapture();

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.url === '/v1/traces' && req.headers['content-type']?.startsWith('application/json')) {
        const payload = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] };
        for (const rs of payload.resourceSpans) for (const ss of rs.scopeSpans) exported.push(...ss.spans);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const providers = writeProvidersFile({
    providers: [
      // Cheapest first: a provider nobody answers for, then the built-in mock serving the same model.
      { name: 'down', kind: 'openai', base_url: 'http://127.0.0.1:9/v1', region: 'local', timeout_ms: 2000, models: [{ id: 'echo', input_per_mtok: 0, output_per_mtok: 0 }] },
      { name: 'echoer', kind: 'mock', region: 'local', models: [{ id: 'echo', input_per_mtok: 1, output_per_mtok: 2 }] },
    ],
  });
  db = await createTestDatabase();
  const config = loadConfig({
    SVC_MASTER_KEY: MASTER_KEY,
    SVC_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    SVC_PROVIDERS_FILE: providers,
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`,
    ...(db.url ? { DATABASE_URL: db.url } : {}),
    ...(REDIS_URL ? { REDIS_URL, SVC_REDIS_PREFIX: `${uniqueName('test')}:` } : {}),
  });
  deps = await createDeps(config, { database: db.database, log: createLogger(config, logs) });
  app = await buildApp(deps);
  base = await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await app?.close();
  await deps?.outcomes.close();
  deps?.redis?.disconnect();
  await deps?.observability.close();
  await db?.drop();
  receiver?.close();
});

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes.find((a) => a.key === key)?.value;
  if (!v) return undefined;
  const raw = v.stringValue ?? v.intValue ?? v.doubleValue ?? v.boolValue ?? (v.arrayValue as { values?: { stringValue: string }[] })?.values?.map((x) => x.stringValue);
  return typeof raw === 'string' && /^\d+$/.test(raw) && v.intValue !== undefined ? Number(raw) : raw;
};

describe('OpenTelemetry traces (OTLP/HTTP)', () => {
  it('exports one trace per inference: request, auth, rate limit, each provider hop, the outcome write', { timeout: 60_000 }, async () => {
    const seeded = await seedProject(client(app));
    // The caller's own trace: the gateway's spans join it.
    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const res = await fetch(`${base}/v1/inference`, {
      method: 'POST',
      headers: { authorization: `Bearer ${seeded.secret}`, 'content-type': 'application/json', traceparent: `00-${callerTrace}-${callerSpan}-01` },
      body: JSON.stringify({ model: 'echo', project_id: seeded.projectId, messages: [{ role: 'user', content: 'trace me' }] }),
    });
    const body = (await res.json()) as { request_id: string; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(res.status).toBe(200);
    expect(res.headers.get('x-svc-trace-id')).toBe(callerTrace);
    await deps.observability.flush();

    const spans = exported.filter((s) => s.traceId === callerTrace);
    const byName = (n: string) => spans.filter((s) => s.name === n);
    const [root] = byName('POST /v1/inference');
    expect(root).toBeDefined();
    expect(root!.parentSpanId).toBe(callerSpan);
    expect(root!.kind).toBe(2); // SERVER
    expect(attr(root!, 'svc.request_id')).toBe(body.request_id);
    expect(attr(root!, 'svc.request_id')).toBe(res.headers.get('x-svc-request-id'));
    expect(attr(root!, 'http.response.status_code')).toBe(200);
    expect(attr(root!, 'http.route')).toBe('/v1/inference');
    expect(attr(root!, 'svc.project_id')).toBe(seeded.projectId);
    expect(attr(root!, 'gen_ai.usage.input_tokens')).toBe(body.usage.prompt_tokens);

    const [auth] = byName('svc.auth');
    expect(auth!.parentSpanId).toBe(root!.spanId);
    const [limit] = byName('svc.rate_limit');
    expect(limit!.parentSpanId).toBe(auth!.spanId);

    // Two hops: the provider that does not answer (an error, then the fallback), then the one that does.
    const hops = byName('chat echo');
    expect(hops).toHaveLength(2);
    for (const hop of hops) {
      expect(hop.parentSpanId).toBe(root!.spanId);
      expect(hop.kind).toBe(3); // CLIENT
      expect(attr(hop, 'gen_ai.operation.name')).toBe('chat');
      expect(attr(hop, 'gen_ai.request.model')).toBe('echo');
    }
    const [failed, answered] = [hops.find((h) => attr(h, 'svc.provider') === 'down')!, hops.find((h) => attr(h, 'svc.provider') === 'echoer')!];
    expect(attr(failed, 'gen_ai.provider.name')).toBe('openai');
    expect(attr(failed, 'error.type')).toBe('error');
    expect(failed.status?.code).toBe(2); // ERROR
    expect(attr(answered, 'gen_ai.usage.input_tokens')).toBe(body.usage.prompt_tokens);
    expect(attr(answered, 'gen_ai.usage.output_tokens')).toBe(body.usage.completion_tokens);
    expect(attr(answered, 'gen_ai.response.finish_reasons')).toEqual(['stop']);

    const [write] = byName('svc.outcome.write');
    expect(write!.parentSpanId).toBe(root!.spanId);
    expect(attr(write!, 'svc.request_id')).toBe(body.request_id);
    expect(attr(write!, 'svc.cost_usd')).toBeGreaterThan(0);

    // The fallback's warning, logged inside the request, carries the trace and the request's span.
    const warning = logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'provider call failed; falling back');
    expect(warning).toMatchObject({ trace_id: callerTrace, span_id: root!.spanId });
  });

  it('starts a trace of its own for a caller without traceparent, and marks 401s on the auth span', async () => {
    const res = await fetch(`${base}/v1/keys`, { headers: { authorization: 'Bearer svc_sk_not_a_key_0123456789012345678901' } });
    expect(res.status).toBe(401);
    const traceId = res.headers.get('x-svc-trace-id');
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    await deps.observability.flush();
    const spans = exported.filter((s) => s.traceId === traceId);
    const root = spans.find((s) => s.name === 'GET /v1/keys')!;
    expect(root.parentSpanId ?? '').toBe('');
    const auth = spans.find((s) => s.name === 'svc.auth')!;
    expect(attr(auth, 'error.type')).toBe('invalid_api_key');
    expect(attr(root, 'http.response.status_code')).toBe(401);
  });
});
