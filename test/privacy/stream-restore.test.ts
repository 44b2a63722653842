import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';

// CONTRACT §11 over the wire: an OpenAI-kind provider receives the placeholders, and its stream, cut in the middle of
// placeholders, reaches the caller with the originals put back.

let t: TestApp;
let wire: MockOpenAI;
let api: Client;
let projectId: string;

beforeAll(async () => {
  wire = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [{ name: 'wire', kind: 'openai', base_url: wire.url, region: 'eu-west-1', timeout_ms: 5000, models: [{ id: 'wire-chat', input_per_mtok: 1, output_per_mtok: 2 }] }],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_PII_TIMEOUT_MS: '10000' } });
  const seeded = await seedProject(client(t.app), { scopes: ['inference:write', 'inference:read'] });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
}, 120_000);
afterAll(async () => {
  await t.close();
  await wire.close();
});

const PROMPT = 'Ask jane@example.com or call (415) 555-2671 about IBAN GB82 WEST 1234 5698 7654 32';

function deltas(raw: string): string[] {
  return raw
    .split('\n\n')
    .filter((b) => b.startsWith('event: delta'))
    .map((b) => JSON.parse(/data: (.*)/.exec(b)![1]!).delta.content as string);
}

describe('PII restore across a provider stream', () => {
  it('sends placeholders to the provider and restores them across chunk boundaries', async () => {
    wire.set({ chunks: ['Mail [EM', 'AIL_1] and ring [PHO', 'NE_1', '] re [', 'IBAN_1]. Done [x]'] });
    const res = await api.post('/v1/inference', {
      project_id: projectId,
      model: 'wire-chat',
      stream: true,
      messages: [{ role: 'user', content: PROMPT }],
      pii: { redact: true, restore: true },
    });
    expect(res.status, res.raw).toBe(200);
    expect(wire.requests.at(-1)!.body.messages).toEqual([{ role: 'user', content: 'Ask [EMAIL_1] or call [PHONE_1] about IBAN [IBAN_1]' }]);
    const parts = deltas(res.raw);
    expect(parts.join('')).toBe('Mail jane@example.com and ring (415) 555-2671 re GB82 WEST 1234 5698 7654 32. Done [x]');
    // No piece carries a placeholder or a part of one.
    for (const p of parts) expect(p).not.toMatch(/\[(?:E|EM|EMA|EMAIL|EMAIL_|P|PH|PHO|PHON|PHONE|PHONE_|I|IB|IBA|IBAN|IBAN_)\d*\]?$|\[[A-Z]+_\d+\]/);
    const done = JSON.parse(/event: done\ndata: (.*)/.exec(res.raw)![1]!);
    expect(done.pii).toEqual({ redacted: { email: 1, phone: 1, iban: 1 } });
    expect(done.message.content).toBe('Mail jane@example.com and ring (415) 555-2671 re GB82 WEST 1234 5698 7654 32. Done [x]');
  });

  it('without restore the caller gets what the provider said', async () => {
    wire.reset(); // answers with what it received
    const res = await api.post('/v1/chat/completions', { model: 'wire-chat', messages: [{ role: 'user', content: PROMPT }], pii: { redact: true } });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.choices[0].message.content).toBe('Ask [EMAIL_1] or call [PHONE_1] about IBAN [IBAN_1]');
    expect(res.body.pii).toEqual({ redacted: { email: 1, phone: 1, iban: 1 } });
  });
});
