import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { lexicographicSortSchema, printSchema } from '../../src/graphql/graphql-js.ts';
import { schema } from '../../src/graphql/schema.ts';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const printed = `${printSchema(lexicographicSortSchema(schema))}\n`;

async function printSchemaScript(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'scripts/print-schema.ts', ...args], { cwd: root });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('schema.graphql', () => {
  it('is the schema the builder prints (run `npm run schema:print` after changing src/graphql)', () => {
    expect(readFileSync(path.join(root, 'schema.graphql'), 'utf8')).toBe(printed);
  });

  it('names no internal column: hashes, encrypted secrets and leases stay out of the API', () => {
    for (const hidden of ['secretHash', 'previousSecretHash', 'secretEncrypted', 'leaseUntil', 'activeName']) {
      expect(printed).not.toContain(hidden);
    }
  });

  it('schema:check passes on a current file and fails, saying where, on a stale one', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-schema-'));
    const file = path.join(dir, 'schema.graphql');
    writeFileSync(file, printed);
    const ok = await printSchemaScript('--check', '--file', file);
    expect(ok.code).toBe(0);

    writeFileSync(file, printed.replace('type ApiKey {', 'type ApiKey {\n  extra: String'));
    const stale = await printSchemaScript('--check', '--file', file);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/schema:check failed: schema\.graphql differs .*first difference at line \d+/);
    expect(stale.stderr).toContain('npm run schema:print');

  }, 60_000);
});
