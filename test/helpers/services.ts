import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';
import { createSchemaRole, pooledUrl } from './pgbouncer.ts';

/**
 * With DATABASE_URL / REDIS_URL set the suites run against the real services, each run in its own schema and Redis key
 * prefix; unset, against an in-memory PGlite and the in-process store. A set URL whose service does not answer fails
 * the test: it never silently skips.
 */
export const DATABASE_URL = process.env.DATABASE_URL || null;
export const REDIS_URL = process.env.REDIS_URL || null;
/**
 * `npm run test:pgbouncer` (docs/TESTING.md): a transaction-pooling PgBouncer in front of DATABASE_URL's server. The
 * gateways the tests build then reach their schema through it as DATABASE_URL (as the schema's own role), with
 * DATABASE_DIRECT_URL direct (migrations, LISTEN, advisory locks).
 */
export const PGBOUNCER_URL = (DATABASE_URL && process.env.SVC_TEST_PGBOUNCER_URL) || null;

export const uniqueName = (prefix: string) => `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;

export function withSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('schema', schema);
  return u.toString();
}

/**
 * What a gateway gets as DATABASE_URL / DATABASE_DIRECT_URL for `schema` on the server of `base`: the schema directly
 * (no direct URL), or, with PGBOUNCER_URL and `base` the shared DATABASE_URL, through the pooler.
 */
export async function gatewayDatabaseUrls(base: string, schema: string): Promise<{ url: string; directUrl: string | null }> {
  const direct = withSchema(base, schema);
  if (!PGBOUNCER_URL || base !== DATABASE_URL) return { url: direct, directUrl: null };
  await createSchemaRole(base, schema);
  return { url: pooledUrl(PGBOUNCER_URL, schema), directUrl: direct };
}

/** DATABASE_DIRECT_URL for a gateway given `databaseUrl` through the test run's PgBouncer; {} otherwise. */
export function directDatabaseEnv(databaseUrl: string | undefined): { DATABASE_DIRECT_URL?: string } {
  if (!PGBOUNCER_URL || !databaseUrl || new URL(databaseUrl).host !== new URL(PGBOUNCER_URL).host) return {};
  const schema = new URL(databaseUrl).searchParams.get('schema');
  return schema ? { DATABASE_DIRECT_URL: withSchema(DATABASE_URL!, schema) } : {};
}

export async function dropSchema(url: string, schema: string): Promise<void> {
  const u = new URL(url);
  u.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: u.toString() });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    if (PGBOUNCER_URL) await client.query(`DROP ROLE IF EXISTS "${schema}"`);
  } finally {
    await client.end();
  }
}

export async function deleteRedisPrefix(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
