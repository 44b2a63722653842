import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError } from '../../src/config/environment.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';

const ENV = {
  AZURE_KEY: 'azure-secret-0123456789',
  ANTHROPIC_KEY: 'sk-ant-secret-0123456789',
  GEMINI_KEY: 'AIzaSecret0123456789abcdefghijklmnopqrs',
  AWS_KEY_ID: 'AKIAEXAMPLEKEY000001',
  AWS_SECRET: 'aws-secret-access-key-0123456789',
};
const model = (id: string, more: Record<string, unknown> = {}) => ({ id, input_per_mtok: 1, output_per_mtok: 2, ...more });

/** One provider of each new kind, with only the required fields. */
const kinds = (): { providers: Array<Record<string, any>> } => ({
  providers: [
    { name: 'az', kind: 'azure_openai', base_url: 'https://my-resource.openai.azure.com', api_key_env: 'AZURE_KEY', api_version: '2024-10-21', region: 'westeurope', models: [model('gpt-4o', { deployment: 'prod-4o' }), model('gpt-4o-mini')] },
    { name: 'claude', kind: 'anthropic', api_key_env: 'ANTHROPIC_KEY', region: 'us-east-1', models: [model('claude-sonnet-4-5')] },
    { name: 'gem', kind: 'gemini', api_key_env: 'GEMINI_KEY', region: 'us-central1', models: [model('gemini-2.5-flash'), model('text-embedding-004', { type: 'embedding' })] },
    {
      name: 'br',
      kind: 'bedrock',
      region: 'eu-central-1',
      aws_region: 'eu-central-1',
      aws_access_key_id_env: 'AWS_KEY_ID',
      aws_secret_access_key_env: 'AWS_SECRET',
      models: [model('anthropic.claude-3-5-sonnet-20240620-v1:0')],
    },
  ],
});

const load = (doc: unknown, env: Record<string, string> = ENV) => loadConfig({ SVC_PROVIDERS_FILE: writeProvidersFile(doc), ...env });

function refusal(doc: unknown, env: Record<string, string> = ENV): string {
  try {
    load(doc, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('the providers file was accepted');
}

describe('SVC_PROVIDERS_FILE: the kinds azure_openai, anthropic, gemini, bedrock', () => {
  it('reads one of each, with each kind\'s defaults', () => {
    const [az, claude, gem, br] = load(kinds()).providers;
    expect(az).toMatchObject({ kind: 'azure_openai', baseUrl: 'https://my-resource.openai.azure.com', apiVersion: '2024-10-21' });
    expect(az!.models.map((m) => m.deployment)).toEqual(['prod-4o', 'gpt-4o-mini']);
    expect(az!.apiKey!.reveal()).toBe(ENV.AZURE_KEY);
    expect(claude).toMatchObject({ kind: 'anthropic', baseUrl: 'https://api.anthropic.com', apiVersion: '2023-06-01', defaultMaxTokens: 4096 });
    expect(gem).toMatchObject({ kind: 'gemini', baseUrl: 'https://generativelanguage.googleapis.com/v1beta', apiKeyIn: 'header' });
    expect(gem!.models.map((m) => m.type)).toEqual(['chat', 'embedding']);
    expect(br).toMatchObject({ kind: 'bedrock', baseUrl: 'https://bedrock-runtime.eu-central-1.amazonaws.com', apiKey: null });
    expect(br!.aws).toMatchObject({ region: 'eu-central-1', accessKeyIdEnv: 'AWS_KEY_ID', secretAccessKeyEnv: 'AWS_SECRET', sessionTokenEnv: null, sessionToken: null });
    expect(br!.aws!.secretAccessKey.reveal()).toBe(ENV.AWS_SECRET);
  });

  it('never shows a key or an AWS credential when the config is printed or serialised', () => {
    const config = load(kinds());
    for (const text of [JSON.stringify(config), inspect(config, { depth: 12 })]) {
      for (const secret of Object.values(ENV)) expect(text).not.toContain(secret);
    }
  });

  const bad: Array<[string, (d: ReturnType<typeof kinds>) => unknown, RegExp]> = [
    ['azure_openai without api_version', (d) => (delete d.providers[0]!.api_version, d), /providers\[0\]\.api_version is required for kind azure_openai/],
    ['azure_openai without base_url', (d) => (delete d.providers[0]!.base_url, d), /providers\[0\]\.base_url is required for kinds openai and azure_openai/],
    ['azure_openai without api_key_env', (d) => (delete d.providers[0]!.api_key_env, d), /providers\[0\]\.api_key_env is required for kind azure_openai/],
    ['a bad api_version', (d) => ((d.providers[0]!.api_version = 'x y'), d), /providers\[0\]\.api_version must be an API version/],
    ['a bad deployment name', (d) => ((d.providers[0]!.models[0].deployment = 'a/b'), d), /providers\[0\]\.models\[0\]\.deployment must be an Azure deployment name/],
    ['a deployment on another kind', (d) => ((d.providers[1]!.models[0].deployment = 'x'), d), /providers\[1\]\.models\[0\]\.deployment is not a field of kind anthropic/],
    ['anthropic without api_key_env', (d) => (delete d.providers[1]!.api_key_env, d), /providers\[1\]\.api_key_env is required for kind anthropic/],
    ['a default_max_tokens of 0', (d) => ((d.providers[1]!.default_max_tokens = 0), d), /providers\[1\]\.default_max_tokens must be a whole number of tokens/],
    ['default_max_tokens on gemini', (d) => ((d.providers[2]!.default_max_tokens = 10), d), /providers\[2\]\.default_max_tokens is not a field of kind gemini \(only of anthropic\)/],
    ['an embedding model on anthropic', (d) => ((d.providers[1]!.models[0].type = 'embedding'), d), /providers\[1\]\.models\[0\]\.type "embedding" is not served by kind anthropic/],
    ['api_key_in on anthropic', (d) => ((d.providers[1]!.api_key_in = 'query'), d), /providers\[1\]\.api_key_in is not a field of kind anthropic \(only of gemini\)/],
    ['a bad api_key_in', (d) => ((d.providers[2]!.api_key_in = 'cookie'), d), /providers\[2\]\.api_key_in must be "header" or "query", got "cookie"/],
    ['api_version on gemini', (d) => ((d.providers[2]!.api_version = 'v1'), d), /providers\[2\]\.api_version is not a field of kind gemini \(only of azure_openai, anthropic\)/],
    ['bedrock without aws_region', (d) => (delete d.providers[3]!.aws_region, d), /providers\[3\]\.aws_region is required for kind bedrock/],
    ['a bad aws_region', (d) => ((d.providers[3]!.aws_region = 'Frankfurt'), d), /providers\[3\]\.aws_region must be an AWS region such as us-east-1, got "Frankfurt"/],
    ['bedrock without its secret key variable', (d) => (delete d.providers[3]!.aws_secret_access_key_env, d), /providers\[3\]\.aws_secret_access_key_env is required for kind bedrock/],
    ['an api_key_env on bedrock', (d) => ((d.providers[3]!.api_key_env = 'ANTHROPIC_KEY'), d), /providers\[3\]\.api_key_env is not a field of kind bedrock/],
    ['aws fields on another kind', (d) => ((d.providers[1]!.aws_region = 'us-east-1'), d), /providers\[1\]\.aws_region is not a field of kind anthropic \(only of bedrock\)/],
    ['an unknown field', (d) => ((d.providers[3]!.aws_profile = 'default'), d), /providers\[3\]\.aws_profile is not a known field/],
  ];
  for (const [what, mutate, message] of bad) {
    it(`refuses ${what}, naming the field`, () => {
      expect(refusal(mutate(kinds()))).toMatch(message);
    });
  }

  it('refuses AWS credential variables that are not set, naming the variable', () => {
    expect(refusal(kinds(), { ...ENV, AWS_SECRET: '' })).toMatch(/providers\[3\]\.aws_secret_access_key_env names AWS_SECRET, which is not set/);
    const doc = kinds();
    doc.providers[3]!.aws_session_token_env = 'AWS_TOKEN';
    expect(refusal(doc)).toMatch(/providers\[3\]\.aws_session_token_env names AWS_TOKEN, which is not set/);
    expect(load(doc, { ...ENV, AWS_TOKEN: 'tok' }).providers[3]!.aws!.sessionToken!.reveal()).toBe('tok');
  });
});
