import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, MASTER_KEY, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { outputToEnd, startGateway, type GatewayProcess } from '../helpers/gateway-process.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { freePort } from '../helpers/ports.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';
import { loadPiiParsers, normalise, PiiRedaction } from '../../src/domain/privacy/pii.ts';

// Issue 36, Data: PII that reached the provider with `redact: true` (spellings the detectors did not read, tool-call
// arguments), and the embedded database opened by two processes at once (SVC_DATA_DIR's lock).

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('PII redaction: normalised matching, tool-call arguments (CONTRACT §11)', () => {
  let t: TestApp;
  let wire: MockOpenAI;
  let api: Client;
  let projectId: string;

  beforeAll(async () => {
    wire = await startMockOpenAI();
    const file = writeProvidersFile({
      providers: [
        { name: 'wire', kind: 'openai', base_url: wire.url, region: 'eu-west-1', timeout_ms: 5000, models: [{ id: 'wire-chat', input_per_mtok: 1, output_per_mtok: 2 }] },
        { name: 'local', kind: 'mock', region: 'eu-west-1', timeout_ms: 5000, models: [{ id: 'mock-1', input_per_mtok: 0, output_per_mtok: 0 }] },
      ],
    });
    // The deadline is tested elsewhere with an injected clock; a loaded test machine must not trip the real one.
    t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_PII_TIMEOUT_MS: '10000' } });
    const seeded = await seedProject(client(t.app), { scopes: ['inference:write', 'inference:read'] });
    api = client(t.app, seeded.secret);
    projectId = seeded.projectId;
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await wire?.close();
  });

  /** What the provider received in the last request, as JSON text: no original may appear anywhere in it. */
  const sent = () => wire.requests.at(-1)!.body;

  const FORMS = [
    { form: 'a card with no-break spaces', value: '4111\u00a01111\u00a01111\u00a01111', placeholder: '[CARD_1]', leaks: ['4111', '1111'] },
    { form: 'a card with dots', value: '4111.1111.1111.1111', placeholder: '[CARD_1]', leaks: ['4111', '1111'] },
    { form: 'a lower-case IBAN', value: 'de89 3704 0044 0532 0130 00', placeholder: '[IBAN_1]', leaks: ['de89', '3704', '0130'] },
    { form: 'an IPv4-mapped IPv6 address', value: '::ffff:192.168.1.10', placeholder: '[IP_1]', leaks: ['ffff', '192', '168', '1.10'] },
    { form: 'an e-mail with a zero-width space inside', value: 'jane.doe@exa\u200bmple.com', placeholder: '[EMAIL_1]', leaks: ['jane', 'doe', 'exa', 'mple'] },
  ];

  it.each(FORMS)('$form reaches the provider as its typed placeholder, and restore gives it back as sent', async ({ value, placeholder, leaks }) => {
    const prompt = `Details: ${value}. Thanks.`;
    const res = await api.post('/v1/chat/completions', { model: 'wire-chat', messages: [{ role: 'user', content: prompt }], pii: { redact: true, restore: true } });
    expect(res.status, res.raw).toBe(200);
    // The whole value is one placeholder: nothing of it is left around the placeholder.
    expect(sent().messages).toEqual([{ role: 'user', content: `Details: ${placeholder}. Thanks.` }]);
    const seen = JSON.stringify(sent());
    for (const part of [value, ...leaks]) expect(seen).not.toContain(part);
    // The provider echoed the placeholder; the caller gets exactly the characters it sent (no-break spaces, U+200B).
    expect(res.body.choices[0].message.content).toBe(prompt);
    expect(Object.values(res.body.pii.redacted)).toEqual([1]);
  });

  it("redacts an assistant's tool-call arguments (JSON) and the tool's output before the provider sees them", async () => {
    const args = JSON.stringify({ to: 'ann.lee@example.com', cc: ['bob@example.org'], note: 'card 4111 1111 1111 1111', ip: '::ffff:10.1.2.3' });
    const res = await api.post('/v1/chat/completions', {
      model: 'wire-chat',
      messages: [
        { role: 'user', content: 'Send the invoice.' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'send_mail', arguments: args } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'Sent to ann.lee@example.com' },
        { role: 'user', content: 'Did it reach ann.lee@example.com?' },
      ],
      pii: { redact: true },
    });
    expect(res.status, res.raw).toBe(200);
    const messages = sent().messages;
    const call = messages[1].tool_calls[0];
    expect(call.id).toBe('call_1');
    expect(call.function.name).toBe('send_mail');
    // Still JSON, each value its placeholder; the same e-mail is the same placeholder in every message.
    expect(JSON.parse(call.function.arguments)).toEqual({ to: '[EMAIL_1]', cc: ['[EMAIL_2]'], note: 'card [CARD_1]', ip: '[IP_1]' });
    expect(messages[2].content).toBe('Sent to [EMAIL_1]');
    expect(messages[3].content).toBe('Did it reach [EMAIL_1]?');
    const seen = JSON.stringify(sent());
    for (const original of ['ann.lee', 'bob@example.org', '4111', '10.1.2.3']) expect(seen).not.toContain(original);
    expect(res.body.pii.redacted).toEqual({ email: 4, card: 1, ip: 1 });
  });

  it('redacts JSON escapes as what they stand for, and a number that is a card, keeping the arguments JSON', async () => {
    const args = '{"to": "ann\\u200b@example.com", "card": 4111111111111111, "n": 3}';
    const res = await api.post('/v1/chat/completions', {
      model: 'wire-chat',
      messages: [
        { role: 'user', content: 'Go.' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_2', type: 'function', function: { name: 'pay', arguments: args } }] },
        { role: 'tool', tool_call_id: 'call_2', content: 'done' },
      ],
      pii: { redact: true },
    });
    expect(res.status, res.raw).toBe(200);
    const sentArgs = sent().messages[1].tool_calls[0].function.arguments;
    expect(sentArgs).toBe('{"to": "[EMAIL_1]", "card": "[CARD_1]", "n": 3}');
  });

  it("with restore, the answer's tool-call arguments carry the originals (whole and streamed in pieces)", async () => {
    const tools = [
      {
        type: 'function',
        function: {
          name: 'send_mail',
          parameters: { type: 'object', properties: { subject: { const: 'hi' }, to: { const: '[EMAIL_1]' }, from: { const: '[IP_1]' } }, required: ['subject', 'to', 'from'] },
        },
      },
    ];
    const prompt = 'Mail jane.doe@exa\u200bmple.com from ::ffff:192.168.1.10';
    const body = { messages: [{ role: 'user', content: prompt }], tools, pii: { redact: true, restore: true } };
    // The wire provider answers a call whose arguments hold the placeholders (the tool's schema's constants).
    const whole = await api.post('/v1/chat/completions', { ...body, model: 'wire-chat' });
    expect(whole.status, whole.raw).toBe(200);
    expect(sent().messages[0].content).toBe('Mail [EMAIL_1] from [IP_1]');
    const call = whole.body.choices[0].message.tool_calls[0];
    expect(JSON.parse(call.function.arguments)).toEqual({ subject: 'hi', to: 'jane.doe@exa\u200bmple.com', from: '::ffff:192.168.1.10' });

    // The built-in mock streams a call's arguments in two pieces, cut inside a placeholder.
    const streamed = await api.post('/v1/chat/completions', { ...body, model: 'mock-1', stream: true });
    expect(streamed.status, streamed.raw).toBe(200);
    const chunks = streamed.raw
      .split('\n\n')
      .filter((b) => b.startsWith('data: {'))
      .map((b) => JSON.parse(b.slice(6)));
    const pieces = chunks.flatMap((c) => c.choices?.[0]?.delta?.tool_calls ?? []).map((c: any) => c.function.arguments as string);
    expect(pieces.length).toBeGreaterThan(1);
    for (const p of pieces) expect(p).not.toMatch(/\[(?:EMAIL|IP)_\d+\]/);
    expect(JSON.parse(pieces.join(''))).toEqual({ subject: 'hi', to: 'jane.doe@exa\u200bmple.com', from: '::ffff:192.168.1.10' });
  });

  it('every form in one message: the provider sees only placeholders, the caller gets back exactly what it sent', async () => {
    // Distinct values (two spellings of one value share a placeholder, which restores to the first spelling).
    const prompt = [
      '0) 4111\u00a01111\u00a01111\u00a01111',
      '1) 5555.5555.5555.4444',
      '2) de89 3704 0044 0532 0130 00',
      '3) ::ffff:192.168.1.10',
      '4) jane.doe@exa\u200bmple.com',
      'and Ｊｏ＠ｅｘａｍｐｌｅ．ｏｒｇ, card 4012\u20138888\u20138888\u20131881, ip 10\u00ad.0.0.9',
    ].join('\n');
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'wire-chat', messages: [{ role: 'user', content: prompt }], pii: { redact: true, restore: true } });
    expect(res.status, res.raw).toBe(200);
    expect(sent().messages[0].content).toBe(
      '0) [CARD_1]\n1) [CARD_2]\n2) [IBAN_1]\n3) [IP_1]\n4) [EMAIL_1]\nand [EMAIL_2], card [CARD_3], ip [IP_2]',
    );
    expect(res.body.message.content).toBe(prompt);
    expect(res.body.pii.redacted).toEqual({ email: 2, iban: 1, card: 3, ip: 2 });
  });
});

describe('PII normalisation (unit)', () => {
  beforeAll(async () => {
    await loadPiiParsers();
  });

  it('maps each normalised character back to the span it came from', () => {
    const n = normalise('a\u200bb\u00a0ｃﬁx\u200b\u200b—z');
    expect(n.text).toBe('ab cfix-z');
    expect([...n.text].map((_, i) => n.origin(i))).toEqual([
      { start: 0, end: 1 }, // a
      { start: 2, end: 3 }, // b (after the zero-width space)
      { start: 3, end: 4 }, // the no-break space
      { start: 4, end: 5 }, // full-width c
      { start: 5, end: 6 }, // the ligature's f…
      { start: 5, end: 6 }, // …and i
      { start: 6, end: 7 }, // x
      { start: 9, end: 10 }, // the em dash, after two zero-width spaces
      { start: 10, end: 11 }, // z
    ]);
    expect(normalise('plain text 1.2.3.4, Größe 東京').text).toBe('plain text 1.2.3.4, Größe 東京');
  });

  it('leaves what is still no value after normalisation, and keeps the text around a value untouched', () => {
    const r = new PiiRedaction({ timeoutMs: 10_000, now: () => performance.now() });
    const text = 'Größe 1.2.3.4.5, version 10.2.33.4444.5, café\u00a0au\u00a0lait, 東京 ab12 cdef ghij klmn';
    expect(r.redact(text)).toBe(text);
    expect(r.redact('Größe: jo@exa\u200bmple.com — ok')).toBe('Größe: [EMAIL_1] — ok');
    // Digits of other scripts (NFKC leaves them) read as ASCII digits: Arabic-Indic, Devanagari.
    expect(normalise('٤١١١ ४१११ ０').text).toBe('4111 4111 0');
    expect(r.redact('بطاقة ٤١١١ ١١١١ ١١١١ ١١١١')).toBe('بطاقة [CARD_1]');
  });
});

// --- SVC_DATA_DIR's lock: one process at a time on the embedded database -----------------------------------------

/** Runs a script or the gateway to its exit (the second opener must exit promptly; a cap catches one that does not). */
async function runToExit(args: string[], env: Record<string, string>, capMs = 60_000): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const { code, signal, stdout, stderr } = await outputToEnd(child, { capMs });
  return { code: code ?? signal ?? -1, stdout, stderr };
}

/** An environment with no DATABASE_URL (the embedded database), no Redis. */
function embeddedEnv(dir: string, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', SVC_DATA_DIR: dir, SVC_MASTER_KEY: MASTER_KEY, LOG_LEVEL: 'warn', ...extra };
}

/** A pid that no process has: a child that has exited and been reaped. */
function deadPid(): number {
  const run = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(run.stdout);
}

describe('SVC_DATA_DIR lock (gateway, migrate script, Studio)', () => {
  // One directory for the whole sequence: creating and migrating a new embedded database costs seconds.
  let dir: string;
  let lockFile: string;
  let first: GatewayProcess | null = null;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'svc-lock-'));
    lockFile = path.join(dir, 'svc.lock');
  });
  afterAll(async () => {
    await first?.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('takes over a stale lock (its pid is gone); then a second gateway, the migrate script and Studio on the same directory exit with one line while the first keeps serving; SIGTERM removes the lock', { timeout: 180_000 }, async () => {
    // What kill -9 leaves behind: a lock naming a process that no longer exists.
    const stale = deadPid();
    writeFileSync(lockFile, `${stale}\n`);
    first = await startGateway({ SVC_DATA_DIR: dir, HOME: process.env.HOME ?? '' }, { timeoutMs: 120_000 });
    expect(readFileSync(lockFile, 'utf8').trim()).toBe(String(first.pid));
    const line = new RegExp(`^[a-z ]*:? ?SVC_DATA_DIR ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by process ${first.pid} \\(the gateway, Studio or the migrate script\\); stop it first\\.$`);

    const [second, migrate, studio] = await Promise.all([
      runToExit(['src/main.ts'], embeddedEnv(dir, { HOST: '127.0.0.1', PORT: String(await freePort()) })),
      runToExit(['scripts/db-migrate.ts', 'deploy'], embeddedEnv(dir)),
      runToExit(['scripts/studio.ts', '--port', String(await freePort())], embeddedEnv(dir)),
    ]);
    for (const run of [second, migrate, studio]) {
      expect(run.code, run.stdout + run.stderr).not.toBe(0);
      expect(typeof run.code).toBe('number'); // exited by itself, not killed at the cap
      const lines = run.stderr.trim().split('\n');
      expect(lines, run.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(line);
    }
    expect(second.stderr).toContain('startup failed: SVC_DATA_DIR');
    expect(migrate.stderr).toMatch(/^migrate: /);
    expect(studio.stderr).toMatch(/^studio: /);

    // The first still holds the lock and answers.
    expect((await first.call('GET', '/healthz', { key: null })).status).toBe(200);
    expect(readFileSync(lockFile, 'utf8').trim()).toBe(String(first.pid));

    expect(await first.stop('SIGTERM')).toBe(0);
    first = null;
    expect(existsSync(lockFile)).toBe(false);
  });

  it('the migrate script takes over a stale lock too, and releases it on its way out', { timeout: 120_000 }, async () => {
    writeFileSync(lockFile, `${deadPid()}\n`);
    const migrate = await runToExit(['scripts/db-migrate.ts', 'status'], embeddedEnv(dir));
    expect(migrate.code, migrate.stdout + migrate.stderr).toBe(0);
    expect(migrate.stdout).toContain('Database schema is up to date.');
    expect(existsSync(lockFile)).toBe(false);
  });
});
