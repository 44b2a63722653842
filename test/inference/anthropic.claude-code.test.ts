import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts';
import { writeProvidersFile } from './fixtures.ts';

/**
 * CONTRACT §19: Claude Code itself (`claude -p`, its non-interactive print mode) against the gateway, offline:
 * ANTHROPIC_BASE_URL set to the gateway, the svc key as ANTHROPIC_AUTH_TOKEN, the model a gateway model.
 *
 * The npm package (@anthropic-ai/claude-code, a ~380 MB native binary per platform) is not a dependency of the
 * repository: install it anywhere (`npm install @anthropic-ai/claude-code` in a temp dir) and point CLAUDE_CODE_BIN at
 * its `claude` (.ci/run does). Without CLAUDE_CODE_BIN the test is skipped and says so; in CI (CI set) it fails instead.
 */

const bin = process.env.CLAUDE_CODE_BIN;
const available = bin !== undefined && existsSync(bin);
if (!available && process.env.CI) throw new Error('CI: CLAUDE_CODE_BIN must point at a claude binary (.ci/run installs @anthropic-ai/claude-code)');
if (!available) console.warn('anthropic.claude-code.test.ts: CLAUDE_CODE_BIN is not set to a claude binary: skipped');

let t: TestApp;
let origin: string;
let secret: string;
let home: string;
let claude: FakeAnthropic;
const A_KEY = 'sk-ant-gateway-key-0123456789';

describe.skipIf(!available)('Claude Code print mode through the gateway', () => {
  beforeAll(async () => {
    claude = await startFakeAnthropic(A_KEY, { text: 'pong from the anthropic kind' });
    const file = writeProvidersFile({
      providers: [
        { name: 'builtin', kind: 'mock', region: 'local', models: [{ id: 'mock-1', input_per_mtok: 1, output_per_mtok: 2 }] },
        { name: 'claude', kind: 'anthropic', base_url: claude.url, api_key_env: 'A_KEY', region: 'local', models: [{ id: 'claude-sonnet', input_per_mtok: 1, output_per_mtok: 1 }] },
      ],
    });
    t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, A_KEY } });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    origin = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
    ({ secret } = await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write'] }));
    home = mkdtempSync(path.join(tmpdir(), 'svc-claude-home-'));
  }, 240_000);
  afterAll(async () => {
    await t?.close();
    await claude?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const run = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(bin!, args, {
        cwd: home,
        // No stdin: print mode would wait for piped input.
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 90_000,
        env: {
          PATH: process.env.PATH,
          HOME: home,
          ANTHROPIC_BASE_URL: origin,
          ANTHROPIC_AUTH_TOKEN: secret,
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
          DISABLE_AUTOUPDATER: '1',
          DISABLE_TELEMETRY: '1',
          DISABLE_ERROR_REPORTING: '1',
        },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });

  it('answers `claude -p` with the model text, and the gateway records its inference', async () => {
    const out = await run(['-p', 'Reply with the word pong', '--model', 'mock-1', '--output-format', 'json', '--tools', '']);
    expect(out.code, `stdout: ${out.stdout}\nstderr: ${out.stderr}`).toBe(0);
    const result = JSON.parse(out.stdout);
    expect(result).toMatchObject({ type: 'result', is_error: false });
    expect(result.result).toContain('pong');
    await t.deps.outcomes.flush();
    const records = await t.deps.db.usageRecord.findMany({ where: { model: 'mock-1', status: 'succeeded' } });
    expect(records.length).toBeGreaterThan(0);
  }, 120_000);

  it('runs against the anthropic kind: its system blocks, cache_control, thinking and anthropic-beta reach the provider', async () => {
    const out = await run(['-p', 'Say pong', '--model', 'claude-sonnet', '--output-format', 'json', '--tools', '']);
    expect(out.code, `stdout: ${out.stdout}\nstderr: ${out.stderr}`).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ type: 'result', is_error: false, result: 'pong from the anthropic kind' });
    const sent = claude.requests.find((r) => r.body?.stream === true)!;
    expect(sent.headers['anthropic-beta']).toContain('claude-code-');
    expect(sent.headers['x-api-key']).toBe(A_KEY);
    expect(JSON.stringify(sent.body.system)).toContain('cache_control');
    expect(sent.body.thinking).toBeDefined();
    expect(sent.body.model).toBe('claude-sonnet');
  }, 120_000);
});
