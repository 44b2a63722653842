import { buildTestApp, client, createTestDatabase, type Client, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { FakeClock } from '../helpers/clock.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';

/**
 * A gateway whose one model costs a whole dollar per token (the mock provider, priced), so budgets of a few dollars
 * are crossed within a few requests; `mock-embed` (priced too) serves /v1/embeddings.
 */
export const PRICED = 'mock-priced';
export const EMBED = 'mock-embed';

/** The clock of every customers test: mid-month, so a month's budget is the only one in play. */
export const T0 = Date.UTC(2026, 10, 14, 10, 0, 0);

export function pricedProvidersFile(): string {
  return writeProvidersFile({
    providers: [
      {
        name: 'priced',
        kind: 'mock',
        region: 'local',
        models: [
          { id: PRICED, input_per_mtok: 1_000_000, output_per_mtok: 1_000_000 },
          { id: EMBED, type: 'embedding', input_per_mtok: 1_000_000, output_per_mtok: 0 },
        ],
      },
    ],
  });
}

export interface Gateway {
  db: TestDatabase;
  t: TestApp;
  operator: Client;
  /** Another app instance on the same database, clock and Redis prefix: a second replica (real services only). */
  replica(): Promise<TestApp>;
  close(): Promise<void>;
}

export async function startGateway(env: Record<string, string> = {}): Promise<Gateway> {
  const file = pricedProvidersFile();
  const db = await createTestDatabase();
  const clock = new FakeClock(T0);
  const t = await buildTestApp({ database: db, clock, env: { SVC_PROVIDERS_FILE: file, ...env } });
  const replicas: TestApp[] = [];
  return {
    db,
    t,
    operator: client(t.app),
    replica: async () => {
      const r = await buildTestApp({ database: db, clock, redisPrefix: t.config.redisPrefix, env: { SVC_PROVIDERS_FILE: file, ...env } });
      replicas.push(r);
      return r;
    },
    close: async () => {
      for (const r of replicas) await r.close();
      await t.close();
      await db.drop();
    },
  };
}

/** A chat completion naming `user` (or not), one short message. */
export const chat = (api: Client, user?: string, headers?: Record<string, string>) =>
  api.post('/v1/chat/completions', { model: PRICED, messages: [{ role: 'user', content: 'hi' }], ...(user !== undefined ? { user } : {}) }, { headers });
