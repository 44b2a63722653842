import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { newId } from '../../src/db/ids.ts';
import { flushBudgetAlerts } from '../../src/jobs/budget-alerts/mailer.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/clock.ts';
import { expectError } from '../helpers/expect.ts';
import { standInInference } from '../limits/stand-in.ts';

interface Mail {
  from: string;
  to: string[];
  raw: string;
}

/** A real SMTP server on a local port: the gateway's e-mails go over the wire, through nodemailer's SMTP transport. */
async function startSmtp(): Promise<{ server: SMTPServer; port: number; mails: Mail[] }> {
  const mails: Mail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, done) {
      let raw = '';
      stream.on('data', (chunk: Buffer) => (raw += chunk.toString()));
      stream.on('end', () => {
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
        });
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.server.address() as AddressInfo).port, mails };
}

/** The message as a reader sees it: headers unfolded, the quoted-printable body decoded. */
function read(m: Mail): { subject: string | undefined; body: string } {
  const split = m.raw.indexOf('\r\n\r\n');
  const headers = m.raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ');
  const body = m.raw
    .slice(split + 4)
    .replace(/=\r\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return { subject: /^Subject: (.*)$/m.exec(headers)?.[1]?.trim(), body };
}
const subject = (m: Mail) => read(m).subject;

let t: TestApp;
let operator: Client;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({
    clock: new FakeClock(T0),
    env: {
      SVC_SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
      SVC_ALERT_EMAIL_FROM: 'alerts@gateway.test',
      SVC_ALERT_EMAIL_TO: 'ops@acme.test, finance@acme.test',
    },
    beforeReady: standInInference,
  });
  operator = client(t.app);
});
afterAll(async () => {
  await t.close();
  await new Promise<void>((resolve) => smtp.server.close(() => resolve()));
});

/** A project, a webhook subscribed to the budget events (a row: delivery itself is the webhooks suite's), and a key. */
async function budgeted(keyBudgetUsd: number | null) {
  const { projectId } = await seedProject(operator);
  const webhookId = newId('wh');
  await t.deps.db.webhook.create({
    data: {
      id: webhookId,
      projectId,
      url: 'https://hooks.example.com/budget',
      events: ['budget.threshold', 'budget.exceeded'],
      status: 'active',
      secretEncrypted: 'not-used-here',
      createdAt: new Date(t.clock.now()),
    },
  });
  const key = await operator.post('/v1/keys', { project_id: projectId, name: 'spender', scopes: ['inference:write'], budget_usd: keyBudgetUsd });
  expect(key.status).toBe(200);
  return { projectId, webhookId, keyId: key.body.id as string, api: client(t.app, key.body.secret) };
}

const spend = (api: Client, micros: number) =>
  api.post('/test/inference', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 10, usage_tokens: 12, cost_micros: micros });

/** The spend and its alerts are written with the outcome's batch, off the request path: flushed first. */
async function budgetEvents(projectId: string): Promise<Record<string, unknown>[]> {
  await t.deps.outcomes.flush();
  const rows = await t.deps.db.event.findMany({
    where: { projectId, type: { in: ['budget.threshold', 'budget.exceeded'] } },
    orderBy: { id: 'asc' },
  });
  return rows.map((e) => ({ type: e.type, ...(e.data as Record<string, unknown>) }));
}

describe('budget alerts', () => {
  it('fires 80%, 95% and exceeded once each: events, webhook deliveries and e-mails; then the hard stop', async () => {
    const { projectId, webhookId, keyId, api } = await budgeted(10);
    const mailsBefore = smtp.mails.length;
    const steps: [number, number][] = [
      [7_990_000, 0], // 7.99
      [10_000, 1], // 8.00: 80%
      [1_490_000, 1], // 9.49
      [10_000, 2], // 9.50: 95%
      [400_000, 2], // 9.90
      [100_000, 3], // 10.00: exceeded
    ];
    for (const [micros, expected] of steps) {
      expect((await spend(api, micros)).status).toBe(200);
      expect(await budgetEvents(projectId)).toHaveLength(expected);
    }
    const base = { key_id: keyId, project_id: projectId, budget_usd: 10, period: '2026-11' };
    expect(await budgetEvents(projectId)).toEqual([
      { type: 'budget.threshold', ...base, spent_usd: 8, threshold: 0.8 },
      { type: 'budget.threshold', ...base, spent_usd: 9.5, threshold: 0.95 },
      { type: 'budget.exceeded', ...base, spent_usd: 10, threshold: 1 },
    ]);

    const deliveries = await t.deps.db.webhookDelivery.findMany({ where: { webhookId }, orderBy: { id: 'asc' } });
    expect(deliveries.map((d) => [d.eventType, d.status])).toEqual([
      ['budget.threshold', 'pending'],
      ['budget.threshold', 'pending'],
      ['budget.exceeded', 'pending'],
    ]);

    await flushBudgetAlerts(t.deps);
    await vi.waitFor(() => expect(smtp.mails.length - mailsBefore).toBe(3));
    const mails = smtp.mails.slice(mailsBefore);
    for (const m of mails) {
      expect(m.from).toBe('alerts@gateway.test');
      expect(m.to).toEqual(['ops@acme.test', 'finance@acme.test']);
      expect(read(m).body).toContain(`Key: ${keyId}`);
    }
    expect(mails.map(subject)).toEqual([
      `[svc] Budget at 80%: API key ${keyId} (2026-11)`,
      `[svc] Budget at 95%: API key ${keyId} (2026-11)`,
      `[svc] Budget exceeded: API key ${keyId} (2026-11)`,
    ]);
    expect(read(mails[0]!).body).toContain('Spent: $8.00 of $10.00');

    // At the budget: refused before anything is spent, and never confused with a rate limit.
    const stopped = await spend(api, 1);
    expectError(stopped, 429, 'budget_exceeded', null);
    expect(stopped.body.error.message).toMatch(/key's monthly budget of \$10\.00 is exhausted for 2026-11/);
    expect(stopped.headers['retry-after']).toBeUndefined();
    expect(stopped.headers['x-svc-ratelimit-resource']).toBe('requests');
    expect(Number(stopped.headers['x-svc-ratelimit-remaining'])).toBeGreaterThan(0);
    await t.deps.outcomes.flush();
    const row = await t.deps.db.budgetSpend.findUnique({ where: { scope_period: { scope: `key:${keyId}`, period: '2026-11' } } });
    expect(row).toMatchObject({ spentMicros: 10_000_000n, thresholdsSent: ['0.8', '0.95', '1'] });
    expect(await budgetEvents(projectId)).toHaveLength(3);
  });

  it('fires every threshold one spend crosses, in order', async () => {
    const { projectId, keyId, api } = await budgeted(10);
    await spend(api, 9_600_000);
    expect((await budgetEvents(projectId)).map((e) => [e.type, e.threshold])).toEqual([
      ['budget.threshold', 0.8],
      ['budget.threshold', 0.95],
    ]);
    await spend(api, 1_000_000);
    const events = await budgetEvents(projectId);
    expect(events.at(-1)).toEqual({
      type: 'budget.exceeded',
      key_id: keyId,
      project_id: projectId,
      budget_usd: 10,
      spent_usd: 10.6,
      threshold: 1,
      period: '2026-11',
    });
  });

  it('keeps the project budget across its keys, with key_id null in its events', async () => {
    const { projectId, api } = await budgeted(null);
    const put = await operator.put(`/v1/projects/${projectId}/budget`, { budget_usd: 2 });
    expect(put.status).toBe(200);
    const other = await operator.post('/v1/keys', { project_id: projectId, name: 'other', scopes: ['inference:write'] });
    await spend(api, 1_000_000);
    await spend(client(t.app, other.body.secret), 1_000_000);
    const events = await budgetEvents(projectId);
    expect(events).toEqual([
      { type: 'budget.threshold', key_id: null, project_id: projectId, budget_usd: 2, spent_usd: 2, threshold: 0.8, period: '2026-11' },
      { type: 'budget.threshold', key_id: null, project_id: projectId, budget_usd: 2, spent_usd: 2, threshold: 0.95, period: '2026-11' },
      { type: 'budget.exceeded', key_id: null, project_id: projectId, budget_usd: 2, spent_usd: 2, threshold: 1, period: '2026-11' },
    ]);
    const stopped = await spend(api, 1);
    expectError(stopped, 429, 'budget_exceeded');
    expect(stopped.body.error.message).toMatch(/project's monthly budget of \$2\.00/);
    expect((await operator.get(`/v1/projects/${projectId}/budget`)).body).toMatchObject({ budget_usd: 2, spent_usd: 2, period: '2026-11' });
    await flushBudgetAlerts(t.deps);
    await vi.waitFor(() =>
      expect(smtp.mails.filter((m) => subject(m) === `[svc] Budget exceeded: project ${projectId} (2026-11)`)).toHaveLength(1),
    );
  });

  it('adds concurrent spends exactly and still fires each threshold once', async () => {
    const { projectId, keyId, api } = await budgeted(10);
    const results = await Promise.all(Array.from({ length: 20 }, () => spend(api, 500_000)));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    await t.deps.outcomes.flush();
    const row = await t.deps.db.budgetSpend.findUnique({ where: { scope_period: { scope: `key:${keyId}`, period: '2026-11' } } });
    expect(row!.spentMicros).toBe(10_000_000n);
    const project = await t.deps.db.budgetSpend.findUnique({ where: { scope_period: { scope: `project:${projectId}`, period: '2026-11' } } });
    expect(project!.spentMicros).toBe(10_000_000n);
    expect((await budgetEvents(projectId)).map((e) => e.type)).toEqual(['budget.threshold', 'budget.threshold', 'budget.exceeded']);
  });

  it('starts a new month at zero, and alerts again in it', async () => {
    const start = t.clock.now();
    t.clock.ms = Date.UTC(2027, 0, 31, 23, 59, 0);
    try {
      const { projectId, keyId, api } = await budgeted(5);
      await spend(api, 5_000_000);
      expectError(await spend(api, 1), 429, 'budget_exceeded');

      t.clock.ms = Date.UTC(2027, 1, 1, 0, 0, 0);
      expect((await spend(api, 4_000_000)).status).toBe(200);
      const events = await budgetEvents(projectId);
      expect(events.map((e) => [e.period, e.type, e.threshold])).toEqual([
        ['2027-01', 'budget.threshold', 0.8],
        ['2027-01', 'budget.threshold', 0.95],
        ['2027-01', 'budget.exceeded', 1],
        ['2027-02', 'budget.threshold', 0.8],
      ]);
      await t.deps.outcomes.flush();
      const rows = await t.deps.db.budgetSpend.findMany({ where: { scope: `key:${keyId}` }, orderBy: { period: 'asc' } });
      expect(rows.map((r) => [r.period, r.spentMicros])).toEqual([
        ['2027-01', 5_000_000n],
        ['2027-02', 4_000_000n],
      ]);
    } finally {
      t.clock.ms = start;
    }
  });

  it('charges nothing and alerts nothing for a zero cost (a cache hit)', async () => {
    const { projectId, keyId, api } = await budgeted(0.000001);
    expect((await spend(api, 0)).status).toBe(200);
    await t.deps.outcomes.flush();
    expect(await t.deps.db.budgetSpend.count({ where: { scope: `key:${keyId}` } })).toBe(0);
    expect(await budgetEvents(projectId)).toEqual([]);
  });
});

describe('without SVC_SMTP_URL', () => {
  it('skips the e-mail and logs that it did, while the events are still written', async () => {
    const plain = await buildTestApp({ beforeReady: standInInference });
    try {
      const op = client(plain.app);
      const { projectId } = await seedProject(op);
      const key = await op.post('/v1/keys', { project_id: projectId, name: 'k', scopes: ['inference:write'], budget_usd: 1 });
      await client(plain.app, key.body.secret).post('/test/inference', {
        messages: [{ role: 'user', content: 'hi' }],
        cost_micros: 950_000,
      });
      await flushBudgetAlerts(plain.deps);
      expect(await plain.deps.db.event.count({ where: { projectId, type: 'budget.threshold' } })).toBe(2);
      expect(plain.logs.lines.filter((l) => l.includes('budget alert e-mail skipped: SVC_SMTP_URL is not set'))).toHaveLength(2);
    } finally {
      await plain.close();
    }
  });
});
