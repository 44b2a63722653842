import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';

/**
 * With DATABASE_URL / REDIS_URL set the suites run against the real services, each run in its own schema and Redis key
 * prefix; unset, against an in-memory PGlite and the in-process store. A set URL whose service does not answer fails
 * the test: it never silently skips.
 */
export const DATABASE_URL = process.env.DATABASE_URL || null;
export const REDIS_URL = process.env.REDIS_URL || null;

export const uniqueName = (prefix: string) => `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;

export function withSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('schema', schema);
  return u.toString();
}

export async function dropSchema(url: string, schema: string): Promise<void> {
  const u = new URL(url);
  u.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: u.toString() });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
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
