import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../../src/project-root.ts';
import { asAnthropicSdk, asCurl, asOpenAiSdk, chatBody, type PlaygroundRequest } from '../../src/admin/app/screens/playground-snippets.ts';

// The Playground's "copy as" code, run as it is copied: curl, and the official openai and Anthropic SDKs for Node
// (installed here), against a listening gateway. Each must get the answer and leave a usage record.

const run = promisify(execFile);

let t: TestApp;
let operator: Client;
let base: string;
let project: { projectId: string; keyId: string; secret: string };

beforeAll(async () => {
  t = await buildTestApp();
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  operator = client(t.app);
  project = await seedProject(operator, { scopes: ['inference:write', 'templates:manage', 'usage:read'] });
});
afterAll(() => t.close());

const request = (over: Partial<PlaygroundRequest> = {}): PlaygroundRequest => ({
  baseUrl: base,
  model: 'mock-1',
  system: 'You are terse.',
  messages: [{ role: 'user', content: "It's a snippet test" }],
  stream: false,
  maxTokens: null,
  temperature: null,
  template: null,
  rag: null,
  schema: null,
  ...over,
});

const env = () => ({ ...process.env, SVC_API_KEY: project.secret, ANTHROPIC_BASE_URL: base, ANTHROPIC_API_KEY: project.secret });

/** Runs a Node snippet as an ES module from the project root (so `openai` and `@anthropic-ai/sdk` resolve). */
async function node(code: string): Promise<string> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], { cwd: PROJECT_ROOT, env: env(), timeout: 20_000 });
  return stdout;
}

async function lastRecord() {
  await t.deps.outcomes.flush({ timeoutMs: 10_000 });
  return t.deps.db.usageRecord.findFirst({ where: { projectId: project.projectId }, orderBy: { requestId: 'desc' } });
}

describe('copy as code', () => {
  it('never puts a secret in the code: the key is $SVC_API_KEY', () => {
    for (const make of [asCurl, asOpenAiSdk, asAnthropicSdk]) {
      const code = make(request());
      expect(code).not.toContain('svc_sk_');
      expect(code).toMatch(/SVC_API_KEY/);
    }
  });

  it('curl, with a quote in the message, gets the answer', async () => {
    const { stdout } = await run('bash', ['-c', asCurl(request())], { env: env(), timeout: 20_000 });
    expect(JSON.parse(stdout).choices[0].message.content).toBe("It's a snippet test");
    expect(await lastRecord()).toMatchObject({ keyId: project.keyId, model: 'mock-1', status: 'succeeded' });
  });

  it('the openai SDK streams the answer, with a template and a JSON schema passed through', async () => {
    const tpl = await client(t.app, project.secret).post('/v1/templates', {
      project_id: project.projectId,
      name: 'snippet',
      messages: [{ role: 'system', content: 'Answer about {{topic}}.' }],
      variables: [{ name: 'topic' }],
    });
    expect(tpl.status, tpl.raw).toBe(200);
    const streamed = await node(asOpenAiSdk(request({ stream: true, template: { id: tpl.body.id, variables: { topic: 'gateways' } } })));
    expect(streamed.trim()).toBe("It's a snippet test");
    expect(await lastRecord()).toMatchObject({ templateId: tpl.body.id, templateVersion: 1, status: 'succeeded' });

    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };
    const structured = await node(asOpenAiSdk(request({ schema })));
    expect(Object.keys(JSON.parse(structured))).toEqual(['answer']);
    expect(chatBody(request({ schema })).response_format).toMatchObject({ type: 'json_schema', json_schema: { schema } });
  });

  it('the Anthropic SDK reaches /v1/messages through ANTHROPIC_BASE_URL, whole and streamed', async () => {
    expect((await node(asAnthropicSdk(request()))).trim()).toBe("It's a snippet test");
    expect((await node(asAnthropicSdk(request({ stream: true })))).trim()).toBe("It's a snippet test");
    expect(await lastRecord()).toMatchObject({ keyId: project.keyId, status: 'succeeded' });
  });
});
