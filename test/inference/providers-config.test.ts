import { spawnSync } from 'node:child_process';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError } from '../../src/config/environment.ts';
import { writeProvidersFile } from './fixtures.ts';

const good = () => ({
  providers: [
    {
      name: 'local',
      kind: 'openai',
      base_url: 'http://127.0.0.1:9101/v1',
      api_key_env: 'LOCAL_KEY',
      region: 'eu-west-1',
      timeout_ms: 5000,
      models: [{ id: 'gpt-test', input_per_mtok: 1.0, output_per_mtok: 2.0 }],
    },
  ],
});

const load = (file: string, env: Record<string, string> = {}) => loadConfig({ SVC_PROVIDERS_FILE: file, LOCAL_KEY: 'sk-local-secret', ...env });

function refusal(doc: unknown, env: Record<string, string> = {}, ext: 'json' | 'yaml' = 'json'): string {
  try {
    load(writeProvidersFile(doc, ext), env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe('SVC_PROVIDERS_FILE');
    return (err as Error).message;
  }
  throw new Error('the providers file was accepted');
}

describe('SVC_PROVIDERS_FILE', () => {
  it('reads the contract example (JSON), with the key from the named variable', () => {
    const config = load(writeProvidersFile(good()));
    expect(config.providers).toHaveLength(1);
    const p = config.providers[0]!;
    expect(p).toMatchObject({
      name: 'local',
      kind: 'openai',
      baseUrl: 'http://127.0.0.1:9101/v1',
      region: 'eu-west-1',
      timeoutMs: 5000,
      models: [{ id: 'gpt-test', inputPerMtok: 1, outputPerMtok: 2 }],
    });
    expect(p.apiKey!.reveal()).toBe('sk-local-secret');
  });

  it('reads the same fields from YAML', () => {
    const yaml = `providers:
  - name: local
    kind: openai
    base_url: http://127.0.0.1:9101/v1
    api_key_env: LOCAL_KEY
    region: eu-west-1
    timeout_ms: 5000
    models:
      - id: gpt-test
        input_per_mtok: 1.0
        output_per_mtok: 2.0
  - name: builtin
    kind: mock
    region: local
    models:
      - { id: mock-1, input_per_mtok: 0, output_per_mtok: 0 }
`;
    const config = load(writeProvidersFile(yaml, 'yaml'));
    expect(config.providers.map((p) => `${p.kind}:${p.name}`)).toEqual(['openai:local', 'mock:builtin']);
    expect(config.providers[1]!.timeoutMs).toBe(30_000);
  });

  it('uses the built-in mock provider when unset', () => {
    const config = loadConfig({});
    expect(config.providers).toEqual([
      expect.objectContaining({
        name: 'mock',
        kind: 'mock',
        region: 'local',
        models: [
          { id: 'mock-1', type: 'chat', inputPerMtok: 0, outputPerMtok: 0 },
          { id: 'mock-embed-1', type: 'embedding', inputPerMtok: 0, outputPerMtok: 0 },
        ],
      }),
    ]);
  });

  it('never shows the provider key when the config is printed or serialised', () => {
    const config = load(writeProvidersFile(good()));
    expect(JSON.stringify(config)).not.toContain('sk-local-secret');
    expect(inspect(config, { depth: 10 })).not.toContain('sk-local-secret');
  });

  const bad: Array<[string, (d: any) => unknown, RegExp]> = [
    ['an unknown provider field', (d) => ((d.providers[0].api_key = 'x'), d), /providers\[0\]\.api_key is not a known field/],
    ['an unknown model field', (d) => ((d.providers[0].models[0].price = 1), d), /providers\[0\]\.models\[0\]\.price is not a known field/],
    ['an unknown top-level field', (d) => ({ ...d, extra: true }), /\(root\)\.extra is not a known field/],
    ['an unknown kind', (d) => ((d.providers[0].kind = 'cohere'), d), /providers\[0\]\.kind must be one of "openai", "mock", "azure_openai", "anthropic", "gemini", "bedrock", got "cohere"/],
    ['a missing base_url for openai', (d) => (delete d.providers[0].base_url, d), /providers\[0\]\.base_url is required/],
    ['a base_url that is not http', (d) => ((d.providers[0].base_url = 'ftp://x/v1'), d), /providers\[0\]\.base_url must start with http/],
    ['a negative price', (d) => ((d.providers[0].models[0].input_per_mtok = -1), d), /providers\[0\]\.models\[0\]\.input_per_mtok must be a number/],
    ['a price as text', (d) => ((d.providers[0].models[0].output_per_mtok = '2'), d), /providers\[0\]\.models\[0\]\.output_per_mtok/],
    ['a price finer than a micro-dollar per million', (d) => ((d.providers[0].models[0].output_per_mtok = 0.0000001), d), /at most 6 decimals/],
    ['a timeout of 0', (d) => ((d.providers[0].timeout_ms = 0), d), /providers\[0\]\.timeout_ms must be a whole number/],
    ['a missing region', (d) => (delete d.providers[0].region, d), /providers\[0\]\.region is required/],
    ['no models', (d) => ((d.providers[0].models = []), d), /providers\[0\]\.models must be a non-empty array/],
    ['a duplicate provider name', (d) => ({ providers: [d.providers[0], d.providers[0]] }), /providers\[1\]\.name "local" is used by another provider/],
    ['a model id "auto"', (d) => ((d.providers[0].models[0].id = 'auto'), d), /providers\[0\]\.models\[0\]\.id/],
    ['a model listed twice', (d) => (d.providers[0].models.push({ ...d.providers[0].models[0] }), d), /models\[1\]\.id "gpt-test" is listed twice/],
    ['an empty providers list', () => ({ providers: [] }), /providers must be a non-empty array/],
  ];
  for (const [what, mutate, message] of bad) {
    it(`refuses ${what}, naming the field`, () => {
      expect(refusal(mutate(good()))).toMatch(message);
    });
  }

  it('refuses an api_key_env whose variable is not set, naming the variable but not any value', () => {
    const doc = good();
    doc.providers[0]!.api_key_env = 'MISSING_PROVIDER_KEY';
    expect(refusal(doc)).toMatch(/providers\[0\]\.api_key_env names MISSING_PROVIDER_KEY, which is not set/);
  });

  it('refuses a file that is not valid JSON or YAML, or is missing', () => {
    expect(refusal('{"providers": [', {}, 'json')).toMatch(/is not valid JSON/);
    expect(refusal('providers: [\n  - {', {}, 'yaml')).toMatch(/is not valid YAML/);
    expect(() => load('/nonexistent/providers.json')).toThrow(/SVC_PROVIDERS_FILE: cannot read .*ENOENT/);
  });

  it('stops the process at start with one line naming SVC_PROVIDERS_FILE and the field', () => {
    const doc = good();
    (doc.providers[0] as any).timeout_ms = 'soon';
    const file = writeProvidersFile(doc);
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: { PATH: process.env.PATH, SVC_PROVIDERS_FILE: file, LOCAL_KEY: 'k', SVC_DATA_DIR: '/tmp/svc-never-created' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).not.toBe(0);
    expect(run.stderr.trim().split('\n')).toEqual([
      'configuration error: SVC_PROVIDERS_FILE: providers[0].timeout_ms must be a whole number of milliseconds from 1 to 600000, got "soon"',
    ]);
  });
});
