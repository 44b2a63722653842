/**
 * The key_name_fold migration on a database holding keys made before it (names stored as typed): active names are
 * folded, so the unique index holds case-insensitively; of names that differ only in case, the oldest keeps the
 * folded name and the others stay working under a name no new key can take.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { applyMigrations, type MigrationTarget } from '../../src/db/migrations.ts';
import { DATABASE_URL, dropSchema, uniqueName, withSchema } from '../helpers/services.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../prisma/migrations/', import.meta.url));
const ALL = readdirSync(MIGRATIONS_DIR, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
const FOLD = ALL.find((n) => n.endsWith('_key_name_fold'))!;

let target: MigrationTarget;
let query: (sql: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;
let close: () => Promise<void>;
let before: string;

beforeAll(async () => {
  // The migrations before this one, in a directory of their own.
  before = mkdtempSync(path.join(tmpdir(), 'svc-migrations-'));
  for (const name of ALL.filter((n) => n < FOLD)) cpSync(path.join(MIGRATIONS_DIR, name), path.join(before, name), { recursive: true });
  cpSync(path.join(MIGRATIONS_DIR, 'migration_lock.toml'), path.join(before, 'migration_lock.toml'));

  if (DATABASE_URL) {
    const schema = uniqueName('fold');
    target = { kind: 'postgres', url: withSchema(DATABASE_URL, schema) };
    const u = new URL(DATABASE_URL);
    u.searchParams.delete('schema');
    const client = new pg.Client({ connectionString: u.toString(), options: `-c search_path="${schema}"` });
    await applyMigrations(target, { migrationsDir: before });
    await client.connect();
    query = async (sql, params) => (await client.query(sql, params)).rows;
    close = async () => {
      await client.end();
      await dropSchema(DATABASE_URL!, schema);
    };
  } else {
    const pglite = new PGlite();
    await pglite.waitReady;
    target = { kind: 'pglite', pglite };
    await applyMigrations(target, { migrationsDir: before });
    query = async (sql, params) => (await pglite.query<Record<string, unknown>>(sql, params)).rows;
    close = () => pglite.close();
  }
});
afterAll(async () => {
  await close?.();
  rmSync(before, { recursive: true, force: true });
});

it('folds the active names of existing keys, keeping every key working', async () => {
  expect(FOLD).toBeDefined();
  await query(`INSERT INTO projects (id, name, created_at) VALUES ('prj_a', 'a', now()), ('prj_b', 'b', now())`);
  const keys: [string, string, string, string | null, string][] = [
    // id, project, name, active_name, status
    ['key_1', 'prj_a', 'Admin', 'Admin', 'active'],
    ['key_2', 'prj_a', 'admin', 'admin', 'active'],
    ['key_3', 'prj_a', 'ADMIN', 'ADMIN', 'active'],
    ['key_4', 'prj_a', 'Deploy', 'Deploy', 'active'],
    ['key_5', 'prj_a', 'deploy', null, 'revoked'],
    ['key_6', 'prj_b', 'ADMIN', 'ADMIN', 'active'],
  ];
  for (const [id, projectId, name, activeName, status] of keys) {
    await query(
      `INSERT INTO api_keys (id, project_id, name, active_name, scopes, secret_hash, secret_last4, status, created_at)
       VALUES ($1, $2, $3, $4, ARRAY['usage:read'], $5, 'abcd', $6, now())`,
      [id, projectId, name, activeName, `hash_${id}`, status],
    );
  }

  const result = await applyMigrations(target);
  expect(result.applied).toEqual(ALL.filter((n) => n >= FOLD));

  const rows = await query(`SELECT id, name, active_name, status FROM api_keys ORDER BY id`);
  expect(rows).toEqual([
    { id: 'key_1', name: 'Admin', active_name: 'admin', status: 'active' },
    { id: 'key_2', name: 'admin', active_name: 'admin\u0001key_2', status: 'active' },
    { id: 'key_3', name: 'ADMIN', active_name: 'admin\u0001key_3', status: 'active' },
    { id: 'key_4', name: 'Deploy', active_name: 'deploy', status: 'active' },
    { id: 'key_5', name: 'deploy', active_name: null, status: 'revoked' },
    { id: 'key_6', name: 'ADMIN', active_name: 'admin', status: 'active' },
  ]);
  // The index now refuses a new "admin" in prj_a, as the gateway would store it.
  await expect(
    query(
      `INSERT INTO api_keys (id, project_id, name, active_name, scopes, secret_hash, secret_last4, created_at)
       VALUES ('key_7', 'prj_a', 'aDmIn', 'admin', ARRAY['usage:read'], 'hash_key_7', 'abcd', now())`,
    ),
  ).rejects.toThrow();
});
