import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/db/ids.ts';
import { buildTestApp, client, createTestDatabase, seedProject, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { gqlClient, type Gql } from './gql.ts';
import { lastUsedWritten } from '../helpers/sql-log.ts';

// Every SQL statement Prisma sends, in order: the test reads the ones issued while one GraphQL request runs.
let statements: string[] = [];
let db: TestDatabase;
let t: TestApp;
let gql: Gql;
let projectId: string;

const WEBHOOKS = 20;
const DELIVERIES_PER_WEBHOOK = 12;
const ATTEMPTS_PER_DELIVERY = 2;

beforeAll(async () => {
  db = await createTestDatabase({ log: true });
  db.database.prisma.$on('query' as never, (e: { query: string }) => statements.push(e.query));
  t = await buildTestApp({ database: db });
  const seeded = await seedProject(client(t.app), { scopes: ['keys:manage', 'governance:manage'] });
  projectId = seeded.projectId;
  gql = gqlClient(t.app, seeded.secret);

  // 99 more keys (100 with the seeded one), and 20 webhooks with 12 deliveries of 2 attempts each, written directly.
  const prisma = db.database.prisma;
  const now = t.clock.now();
  await prisma.apiKey.createMany({
    data: Array.from({ length: 99 }, (_, i) => ({
      id: newId('key', now),
      projectId,
      name: `bulk-${i}`,
      activeName: `bulk-${i}`,
      scopes: ['usage:read'],
      secretHash: `hash-${i}-${newId('key')}`,
      secretLast4: 'abcd',
      createdAt: new Date(now),
    })),
  });
  const event = await prisma.event.create({
    data: { id: newId('evt', now), projectId, type: 'key.revoked', data: { key_id: 'key_x' }, createdAt: new Date(now) },
  });
  const webhooks = Array.from({ length: WEBHOOKS }, (_, w) => ({
    id: newId('wh', now),
    projectId,
    url: `https://hooks.example.com/${w}`,
    events: ['key.revoked'],
    status: 'active',
    secretEncrypted: 'sealed',
    createdAt: new Date(now),
  }));
  const deliveries = webhooks.flatMap((webhook) =>
    Array.from({ length: DELIVERIES_PER_WEBHOOK }, () => ({
      id: newId('del', now),
      webhookId: webhook.id,
      eventId: event.id,
      projectId,
      eventType: event.type,
      status: 'failed',
      attempts: ATTEMPTS_PER_DELIVERY,
      createdAt: new Date(now),
    })),
  );
  await prisma.webhook.createMany({ data: webhooks });
  await prisma.webhookDelivery.createMany({ data: deliveries });
  await prisma.webhookAttempt.createMany({
    data: deliveries.flatMap((d) =>
      Array.from({ length: ATTEMPTS_PER_DELIVERY }, (_, a) => ({
        id: newId('att', now),
        deliveryId: d.id,
        attempt: a + 1,
        attemptedAt: new Date(now),
        responseStatus: 500,
        durationMs: 12,
      })),
    ),
  });
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const DASHBOARD = /* GraphQL */ `
  query Dashboard {
    keys(first: 100) {
      edges { node { id name secret status createdAt project { id name plan } } }
      pageInfo { hasNextPage endCursor }
    }
    webhooks(first: 20) {
      edges {
        node {
          id url status
          project { id name }
          deliveries(first: 10) {
            edges { node { id status attempts attemptLog { attempt responseStatus } event { id type } } }
            pageInfo { hasNextPage }
          }
        }
      }
    }
  }
`;

describe('no N+1', () => {
  it('answers 100 keys and 20 webhooks with their last 10 deliveries, attempts, events and projects in at most 5 SQL statements', async () => {
    // Warm the key cache: a steady-state request authenticates without SQL (once its last_used_at is written).
    await gql('{ viewer { keyId } }');
    await lastUsedWritten(statements);

    statements = [];
    const res = await gql(DASHBOARD);
    const measured = [...statements];

    expect(res.status, res.raw).toBe(200);
    expect(res.body.errors).toBeUndefined();
    const keys = res.body.data.keys.edges;
    expect(keys).toHaveLength(100);
    expect(keys.every((e: any) => e.node.project.id === projectId)).toBe(true);
    const webhooks = res.body.data.webhooks.edges;
    expect(webhooks).toHaveLength(WEBHOOKS);
    for (const { node } of webhooks) {
      expect(node.project.id).toBe(projectId);
      expect(node.deliveries.edges).toHaveLength(10);
      expect(node.deliveries.pageInfo.hasNextPage).toBe(true);
      for (const d of node.deliveries.edges) {
        expect(d.node.attemptLog.map((a: any) => a.attempt)).toEqual([1, 2]);
        expect(d.node.event.type).toBe('key.revoked');
      }
      // Newest first, as every list.
      const ids = node.deliveries.edges.map((d: any) => d.node.id);
      expect([...ids].sort().reverse()).toEqual(ids);
    }

    const reads = measured.filter((q) => /^\s*SELECT/i.test(q));
    const writes = measured.filter((q) => !/^\s*SELECT/i.test(q));
    console.log(
      `GraphQL dashboard query: ${measured.length} SQL statements (${reads.length} reads, ${writes.length} writes):\n` +
        measured.map((q, i) => `  ${i + 1}. ${q.slice(0, 140)}…`).join('\n'),
    );
    // The one write is the key.list audit row that listing keys writes on both surfaces (spec §5).
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatch(/INSERT INTO .*audit_events/);
    expect(measured.length).toBeLessThanOrEqual(5);
  });

  it('grows by no statement when the page holds more rows', async () => {
    await gql('{ viewer { keyId } }');
    const count = async (keys: number, hooks: number) => {
      statements = [];
      const res = await gql(DASHBOARD.replace('first: 100', `first: ${keys}`).replace('first: 20', `first: ${hooks}`));
      expect(res.body.errors).toBeUndefined();
      return statements.length;
    };
    expect(await count(1, 1)).toBe(await count(100, 20));
  });
});
