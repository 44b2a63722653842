import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import type { Receiver } from '../helpers/https-receiver.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { uniqueName } from '../helpers/services.ts';
import { webhookEnv } from '../webhooks/support.ts';
import { deliver, receiverFor, runVerticalWork, verticalProject } from './support.ts';

let t: TestApp;
let operator: Client;
const receivers: Receiver[] = [];
const OPS = ['ops:write', 'inference:write'];
const HOUR = 3600;

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t.close();
});

const as = (secret: string) => client(t.app, secret);
const nowS = () => Math.floor(t.clock.now() / 1000);

describe('incidents', () => {
  it('opens and closes an incident: ops.incident.opened and ops.incident.closed reach a receiver; the timeline records both', async () => {
    const p = await verticalProject(operator, OPS);
    const r = await receiverFor(operator, p.projectId, ['ops.incident.opened', 'ops.incident.closed']);
    receivers.push(r);
    const api = as(p.secret);
    const opened = await api.post('/v1/ops/incidents', { title: 'API 5xx spike', severity: 'sev2', service: 'api' });
    expect(opened.body).toMatchObject({ object: 'svc.ops.incident', status: 'open', severity: 'sev2', service: 'api', closed_at: null });
    expect(opened.body.id).toMatch(/^inc_/);
    const id = opened.body.id;
    const note = await api.post(`/v1/ops/incidents/${id}/timeline`, { message: 'rolled back deploy 412' });
    expect(note.body).toMatchObject({ object: 'svc.ops.timeline_entry', kind: 'note', message: 'rolled back deploy 412', actor: p.keyId });
    t.clock.advance(600_000);
    const closed = await api.post(`/v1/ops/incidents/${id}/close`, { resolution: 'rollback' });
    expect(closed.body).toMatchObject({ status: 'closed', resolution: 'rollback' });
    expect((await api.post(`/v1/ops/incidents/${id}/close`, { resolution: 'again' })).body).toMatchObject({ resolution: 'rollback' });
    const timeline = await api.get(`/v1/ops/incidents/${id}/timeline`);
    expect(timeline.body.data.map((e: any) => e.kind)).toEqual(['closed', 'note', 'opened']);

    const events = await deliver(t, r, 2);
    const byType = Object.fromEntries(events.map((e) => [e.type, e.data]));
    expect(byType['ops.incident.opened']).toEqual({ incident_id: id, title: 'API 5xx spike', severity: 'sev2', service: 'api' });
    expect(byType['ops.incident.closed']).toEqual({ incident_id: id, title: 'API 5xx spike', severity: 'sev2', resolution: 'rollback', duration_s: 600 });
    expect(r.receipts).toHaveLength(2);
    const audit = await operator.get('/v1/audit/events', { query: { project_id: p.projectId } });
    expect(audit.body.data.map((a: any) => a.action)).toEqual(expect.arrayContaining(['ops_incident.create', 'ops_timeline.create', 'ops_incident.close']));
  });

  it('drafts a post-mortem from the timeline and logs through the inference pipeline', async () => {
    const p = await verticalProject(operator, OPS);
    const api = as(p.secret);
    const inc = (await api.post('/v1/ops/incidents', { title: 'DB failover', severity: 'sev1', service: 'db' })).body;
    await api.post('/v1/ops/logs', { entries: [{ level: 'error', service: 'db', message: 'primary unreachable' }] });
    await api.post(`/v1/ops/incidents/${inc.id}/close`, {});
    const pm = await api.post(`/v1/ops/incidents/${inc.id}/postmortems`, {});
    expect(pm.body).toMatchObject({ object: 'svc.ops.postmortem', status: 'queued', incident_id: inc.id, content: null });
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    const done = await api.get(`/v1/ops/postmortems/${pm.body.id}`);
    expect(done.body.status).toBe('completed');
    expect(Object.keys(done.body.content).sort()).toEqual(['action_items', 'impact', 'root_cause', 'summary', 'timeline', 'title']);
    expect((await api.get('/v1/ops/postmortems', { query: { incident_id: inc.id } })).body.data.map((x: any) => x.id)).toEqual([pm.body.id]);
  });
});

describe('logs', () => {
  it('queries a window with a model summary; a window over the plan cap is 409 query_window_too_large', async () => {
    const p = await verticalProject(operator, OPS);
    const api = as(p.secret);
    const ingest = await api.post('/v1/ops/logs', {
      entries: [
        { level: 'error', service: 'api', message: 'Timeout calling payments', timestamp: nowS() - 60 },
        { level: 'info', service: 'api', message: 'request ok', timestamp: nowS() - 30 },
        { level: 'error', service: 'worker', message: 'timeout in queue', timestamp: nowS() - 10 },
      ],
    });
    expect(ingest.body).toMatchObject({ object: 'svc.ops.log_ingest', ingested: 3, slo_burns: [] });
    const q = await api.post('/v1/ops/logs/query', { from: nowS() - HOUR, to: nowS(), query: 'timeout service:api' });
    expect(q.status, q.raw).toBe(200);
    expect(q.body).toMatchObject({ object: 'svc.ops.log_query', matched: 1, status: 'queued', summary: null, query: 'timeout service:api' });
    expect(q.body.lines.map((l: any) => l.message)).toEqual(['Timeout calling payments']);
    await runVerticalWork(t);
    const done = await api.get(`/v1/ops/logs/queries/${q.body.id}`);
    expect(done.body.status).toBe('completed');
    expect(Object.keys(done.body.summary).sort()).toEqual(['error_count', 'highlights', 'services', 'summary']);

    // starter: 24 h at most.
    expect((await api.post('/v1/ops/logs/query', { from: nowS() - 24 * HOUR, to: nowS(), query: '' })).status).toBe(200);
    const over = await api.post('/v1/ops/logs/query', { from: nowS() - 24 * HOUR - 1, to: nowS(), query: '' });
    expectError(over, 409, 'query_window_too_large', 'to');
    expectError(await api.post('/v1/ops/logs/query', { from: nowS(), to: nowS() - 1, query: '' }), 400, 'invalid_request', 'to');
  });

  it('caps the window by plan: growth 7 days, enterprise 30 days', async () => {
    for (const [plan, days] of [['growth', 7], ['enterprise', 30]] as const) {
      const p = await verticalProject(operator, OPS, plan);
      const api = as(p.secret);
      expect((await api.post('/v1/ops/logs/query', { from: nowS() - days * 24 * HOUR, to: nowS(), query: '' })).status).toBe(200);
      expectError(await api.post('/v1/ops/logs/query', { from: nowS() - days * 24 * HOUR - 1, to: nowS(), query: '' }), 409, 'query_window_too_large');
    }
  });
});

describe('connectors', () => {
  it('scans an enabled connector (its lines ingested); a disabled one is 403 connector_disabled', async () => {
    const p = await verticalProject(operator, OPS);
    const api = as(p.secret);
    const con = await api.post('/v1/ops/connectors', { name: 'syslog-eu', kind: 'syslog' });
    expect(con.body).toMatchObject({ object: 'svc.ops.connector', enabled: true, last_scan_at: null });
    const scan = await api.post(`/v1/ops/connectors/${con.body.id}/scan`, { entries: [{ level: 'info', service: 'edge', message: 'hello' }] });
    expect(scan.body).toMatchObject({ object: 'svc.ops.connector_scan', ingested: 1, connector: { id: con.body.id, last_scan_at: nowS() } });
    const off = await api.patch(`/v1/ops/connectors/${con.body.id}`, { enabled: false });
    expect(off.body.enabled).toBe(false);
    expectError(await api.post(`/v1/ops/connectors/${con.body.id}/scan`, {}), 403, 'connector_disabled', 'connector_id');
    expect(await t.deps.db.opsLogEntry.count({ where: { projectId: p.projectId, connectorId: con.body.id } })).toBe(1);
  });
});

describe('SLOs', () => {
  it('computes the error budget from ingested lines and emits ops.slo.burn once when the burn rate crosses the threshold', async () => {
    const p = await verticalProject(operator, OPS);
    const r = await receiverFor(operator, p.projectId, ['ops.slo.burn']);
    receivers.push(r);
    const api = as(p.secret);
    const slo = await api.post('/v1/ops/slos', { name: 'checkout availability', service: 'checkout', objective: 0.9, window_hours: 1, burn_rate_threshold: 2 });
    expect(slo.body).toMatchObject({ object: 'svc.ops.slo', total_events: 0, burn_rate: 0, error_budget: 0.1, burning: false });
    const line = (level: string) => ({ level, service: 'checkout', message: level });
    // 1 bad of 10: error rate 0.1 = the budget, burn rate 1 (below 2).
    const first = await api.post('/v1/ops/logs', { entries: [line('error'), ...Array.from({ length: 9 }, () => line('info'))] });
    expect(first.body.slo_burns).toEqual([]);
    expect((await api.get(`/v1/ops/slos/${slo.body.id}`)).body).toMatchObject({ total_events: 10, bad_events: 1, burn_rate: 1, error_budget_remaining: 0, burning: false });
    // 4 bad of 14: error rate 0.2857, burn rate 2.857 >= 2: fires.
    const second = await api.post('/v1/ops/logs', { entries: [line('error'), line('fatal'), line('error'), line('info')] });
    expect(second.body.slo_burns).toEqual([slo.body.id]);
    // Still over: no second event.
    expect((await api.post('/v1/ops/logs', { entries: [line('error')] })).body.slo_burns).toEqual([]);
    const now = (await api.get(`/v1/ops/slos/${slo.body.id}`)).body;
    expect(now).toMatchObject({ burning: true, bad_events: 5, total_events: 15, last_burn_at: nowS() });
    const [event] = await deliver(t, r, 1);
    expect(event).toMatchObject({
      type: 'ops.slo.burn',
      data: { slo_id: slo.body.id, name: 'checkout availability', service: 'checkout', objective: 0.9, window_hours: 1, burn_rate_threshold: 2, bad: 4, total: 14 },
    });
    expect(event!.data.burn_rate).toBeCloseTo(2.857143, 5);
    // Lines older than the window no longer count.
    t.clock.advance(2 * 3_600_000);
    expect((await api.get(`/v1/ops/slos/${slo.body.id}`)).body).toMatchObject({ total_events: 0, burn_rate: 0 });
    expect(r.receipts).toHaveLength(1);
  });
});

describe('scopes and isolation', () => {
  it('needs ops:write for writes, ops:read or write for reads; a Risk key opens nothing of Ops', async () => {
    const p = await verticalProject(operator, OPS);
    const inc = (await as(p.secret).post('/v1/ops/incidents', { title: 'x', severity: 'sev4' })).body;
    const reader = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('r'), scopes: ['ops:read'] });
    const risk = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('risk'), scopes: ['risk:write', 'risk:approve', 'inference:write'] });
    expect((await as(reader.body.secret).get(`/v1/ops/incidents/${inc.id}`)).status).toBe(200);
    expect((await as(reader.body.secret).get(`/v1/ops/incidents/${inc.id}/timeline`)).status).toBe(200);
    await expectScopeRequired(as(reader.body.secret), [
      { method: 'post', url: '/v1/ops/incidents', body: { title: 'x', severity: 'sev4' } },
      { method: 'post', url: `/v1/ops/incidents/${inc.id}/close`, body: {} },
    ]);
    await expectScopeRequired(as(risk.body.secret), [
      { method: 'get', url: '/v1/ops/incidents' },
      { method: 'post', url: '/v1/ops/logs/query', body: { from: 0, to: 1, query: '' } },
    ]);
  });

  it("hides another project's incidents, connectors, SLOs and drafts (404)", async () => {
    const a = await verticalProject(operator, OPS);
    const b = await verticalProject(operator, OPS);
    const api = as(a.secret);
    const inc = (await api.post('/v1/ops/incidents', { title: 'x', severity: 'sev3' })).body;
    const con = (await api.post('/v1/ops/connectors', { name: 'c', kind: 'loki', enabled: false })).body;
    const slo = (await api.post('/v1/ops/slos', { name: 's', service: 'svc', objective: 0.99 })).body;
    const pm = (await api.post(`/v1/ops/incidents/${inc.id}/postmortems`, {})).body;
    await expectHiddenFrom(as(b.secret), [
      { method: 'get', url: `/v1/ops/incidents/${inc.id}` },
      { method: 'post', url: `/v1/ops/incidents/${inc.id}/close`, body: {} },
      { method: 'post', url: `/v1/ops/incidents/${inc.id}/timeline`, body: { message: 'x' } },
      { method: 'post', url: `/v1/ops/connectors/${con.id}/scan`, body: {} },
      { method: 'get', url: `/v1/ops/slos/${slo.id}` },
      { method: 'get', url: `/v1/ops/postmortems/${pm.id}` },
      { method: 'post', url: '/v1/ops/logs', body: { project_id: a.projectId, entries: [{ level: 'info', service: 's', message: 'm' }] } },
    ]);
    expect((await as(b.secret).get('/v1/ops/incidents')).body.data).toEqual([]);
  });
});
