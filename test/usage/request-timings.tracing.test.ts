import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeps, createLogger } from '../../src/app-deps.ts';
import { buildApp } from '../../src/api/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { Deps } from '../../src/deps.ts';
import { client, createTestDatabase, LogCapture, MASTER_KEY, seedProject, TEST_ENCRYPTION_KEY, type TestDatabase } from '../helpers/app.ts';
import { REDIS_URL, uniqueName } from '../helpers/services.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';

/** With tracing on, the request detail's trace id is the trace the gateway exported (X-Svc-Trace-Id). */
let receiver: Server;
const traceIds = new Set<string>();
let db: TestDatabase;
let deps: Deps;
let app: FastifyInstance;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const payload = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: { traceId: string }[] }[] }[] };
        for (const rs of payload.resourceSpans) for (const ss of rs.scopeSpans) for (const s of ss.spans) traceIds.add(s.traceId);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const providers = writeProvidersFile({
    providers: [{ name: 'echoer', kind: 'mock', region: 'local', models: [{ id: 'echo', input_per_mtok: 1, output_per_mtok: 2 }] }],
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
  deps = await createDeps(config, { database: db.database, log: createLogger(config, new LogCapture()) });
  app = await buildApp(deps);
}, 120_000);
afterAll(async () => {
  await app?.close();
  await deps?.outcomes.close();
  deps?.redis?.disconnect();
  await deps?.observability.close();
  await db?.drop();
  receiver?.close();
});

describe('trace id with tracing on', () => {
  it('equals X-Svc-Trace-Id, whether the caller sent a traceparent or not', { timeout: 60_000 }, async () => {
    const seeded = await seedProject(client(app), { scopes: ['inference:write', 'usage:read'] });
    const api = client(app, seeded.secret);
    const body = { model: 'echo', project_id: seeded.projectId, messages: [{ role: 'user', content: 'trace me' }] };

    const own = await api.post('/v1/inference', body);
    expect(own.status).toBe(200);
    const header = own.headers['x-svc-trace-id'] as string;
    expect(header).toMatch(/^[0-9a-f]{32}$/);
    const d = await api.get(`/v1/usage/requests/${own.body.request_id}`);
    expect(d.body.trace_id).toBe(header);
    expect(d.body.timings.hops).toEqual([expect.objectContaining({ route: 'echoer/echo', outcome: 'ok' })]);

    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const joined = await api.post('/v1/inference', body, { headers: { traceparent: `00-${callerTrace}-00f067aa0ba902b7-01` } });
    expect(joined.headers['x-svc-trace-id']).toBe(callerTrace);
    expect((await api.get(`/v1/usage/requests/${joined.body.request_id}`)).body.trace_id).toBe(callerTrace);

    // The spans of that trace were exported: the id leads to them.
    await deps.observability.flush();
    expect(traceIds.has(header)).toBe(true);
    expect(traceIds.has(callerTrace)).toBe(true);
  });
});
