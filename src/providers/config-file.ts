import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { Type, type Static } from 'typebox';
import type { TLocalizedValidationError } from 'typebox/error';
import { Errors } from 'typebox/value';
import { parse as parseYaml } from 'yaml';
import { pointer, problemFor, says, show, valueAt } from '../config/schema-errors.ts';
import { isExactPrice, MAX_PRICE_USD_PER_MTOK } from '../kernel/money.ts';
import { REGION_PATTERN } from '../kernel/region.ts';
import type { ProviderKind } from './types.ts';

/** A secret that prints as [redacted] everywhere (JSON, util.inspect, pino): only reveal() gives the value. */
export class SecretValue {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return '[redacted]';
  }
  toString(): string {
    return '[redacted]';
  }
  [inspect.custom](): string {
    return 'SecretValue([redacted])';
  }
}

export interface ModelSpec {
  id: string;
  /** CONTRACT §9: `chat` (default) or `embedding` (served by POST /v1/embeddings only). */
  type: 'chat' | 'embedding';
  /** USD per million tokens. */
  inputPerMtok: number;
  outputPerMtok: number;
  /** USD per million prompt tokens read from / written to the provider's prompt cache (absent: the input price). */
  cacheReadPerMtok?: number;
  cacheWritePerMtok?: number;
  /** Kind azure_openai: the deployment serving this model (default: the model id). */
  deployment?: string;
}

/** Kind bedrock: the AWS region signed for and the credentials, read from the named variables at start. */
export interface AwsSpec {
  region: string;
  accessKeyIdEnv: string;
  secretAccessKeyEnv: string;
  sessionTokenEnv: string | null;
  accessKeyId: SecretValue;
  secretAccessKey: SecretValue;
  sessionToken: SecretValue | null;
}

export interface ProviderSpec {
  name: string;
  kind: ProviderKind;
  /** The kind's default when the file leaves it out (anthropic, gemini, bedrock); required for openai, azure_openai. */
  baseUrl: string | null;
  apiKeyEnv: string | null;
  apiKey: SecretValue | null;
  region: string;
  timeoutMs: number;
  models: ModelSpec[];
  /** azure_openai: the `api-version` query parameter; anthropic: the `anthropic-version` header. */
  apiVersion?: string | null;
  /** gemini: the key in the `x-goog-api-key` header (default) or the `key` query parameter. */
  apiKeyIn?: 'header' | 'query';
  /** anthropic: max_tokens when the request sets none (Anthropic requires one). */
  defaultMaxTokens?: number;
  /** bedrock. */
  aws?: AwsSpec | null;
}

/** A bad providers file; config.ts turns it into a ConfigError naming SVC_PROVIDERS_FILE. */
export class ProvidersFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProvidersFileError';
  }
}

export const DEFAULT_PROVIDER_TIMEOUT_MS = 30_000;

/** CONTRACT §1: without SVC_PROVIDERS_FILE, a built-in mock so that `npm start` serves inference at once. */
export const BUILTIN_PROVIDERS: readonly ProviderSpec[] = Object.freeze([
  {
    name: 'mock',
    kind: 'mock',
    baseUrl: null,
    apiKeyEnv: null,
    apiKey: null,
    region: 'local',
    timeoutMs: DEFAULT_PROVIDER_TIMEOUT_MS,
    models: [
      { id: 'mock-1', type: 'chat', inputPerMtok: 0, outputPerMtok: 0 },
      // CONTRACT §9: deterministic vectors, 256 dimensions.
      { id: 'mock-embed-1', type: 'embedding', inputPerMtok: 0, outputPerMtok: 0 },
    ],
  },
]);

const PRICE_PROBLEM = `must be a number of USD per million tokens from 0 to ${MAX_PRICE_USD_PER_MTOK} with at most 6 decimals, got {value}`;
const BASE_URL_PROBLEM = 'is required for kinds openai and azure_openai and must be a URL, got {value}';
const KINDS = ['openai', 'mock', 'azure_openai', 'anthropic', 'gemini', 'bedrock'] as const;
const ENV_NAME = { pattern: '^[A-Za-z_][A-Za-z0-9_]*$', ...says('must be the name of an environment variable, got {value}') };
export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';
export const DEFAULT_ANTHROPIC_MAX_TOKENS = 4096;

const Price = Type.Number({ minimum: 0, maximum: MAX_PRICE_USD_PER_MTOK, ...says(PRICE_PROBLEM) });

const Model = Type.Object(
  {
    id: Type.String({
      pattern: '^(?!auto$)[^\\s]{1,200}$',
      ...says('must be a model id of 1 to 200 characters without spaces (and not "auto"), got {value}'),
    }),
    type: Type.Optional(Type.Enum(['chat', 'embedding'], says('must be "chat" or "embedding", got {value}'))),
    input_per_mtok: Price,
    output_per_mtok: Price,
    cache_read_per_mtok: Type.Optional(Price),
    cache_write_per_mtok: Type.Optional(Price),
    deployment: Type.Optional(
      Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$', ...says('must be an Azure deployment name (letters, digits, ".", "_", "-"), got {value}') }),
    ),
  },
  { additionalProperties: false, ...says('must be an object') },
);

const Provider = Type.Object(
  {
    name: Type.String({
      pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$',
      ...says('must be 1 to 63 letters, digits, ".", "_" or "-", got {value}'),
    }),
    kind: Type.Enum([...KINDS], says(`must be one of ${KINDS.map((k) => `"${k}"`).join(', ')}, got {value}`)),
    base_url: Type.Optional(Type.String(says(BASE_URL_PROBLEM))),
    api_key_env: Type.Optional(
      Type.Union([Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }), Type.Null()], says('must be the name of an environment variable, got {value}')),
    ),
    region: Type.String({ pattern: REGION_PATTERN, ...says('is required: a lower-case region name such as eu-west-1, got {value}') }),
    timeout_ms: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 600_000, ...says('must be a whole number of milliseconds from 1 to 600000, got {value}') }),
    ),
    models: Type.Array(Model, { minItems: 1, ...says('must be a non-empty array') }),
    api_version: Type.Optional(
      Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$', ...says('must be an API version such as 2024-10-21, got {value}') }),
    ),
    api_key_in: Type.Optional(Type.Enum(['header', 'query'], says('must be "header" or "query", got {value}'))),
    default_max_tokens: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1_000_000, ...says('must be a whole number of tokens from 1 to 1000000, got {value}') }),
    ),
    aws_region: Type.Optional(
      Type.String({ pattern: '^[a-z]{2}(-[a-z]+)+-\\d+$', ...says('must be an AWS region such as us-east-1, got {value}') }),
    ),
    aws_access_key_id_env: Type.Optional(Type.String(ENV_NAME)),
    aws_secret_access_key_env: Type.Optional(Type.String(ENV_NAME)),
    aws_session_token_env: Type.Optional(Type.String(ENV_NAME)),
  },
  { additionalProperties: false, ...says('must be an object') },
);

/** Which kinds take each kind-specific field, and which of them require it. */
const KIND_FIELDS: Record<string, { kinds: readonly ProviderKind[]; required?: readonly ProviderKind[]; what: string }> = {
  api_key_env: { kinds: ['openai', 'mock', 'azure_openai', 'anthropic', 'gemini'], required: ['azure_openai', 'anthropic', 'gemini'], what: 'the name of the variable holding the API key' },
  api_version: { kinds: ['azure_openai', 'anthropic'], required: ['azure_openai'], what: 'the Azure OpenAI api-version, such as 2024-10-21' },
  api_key_in: { kinds: ['gemini'], what: '"header" or "query"' },
  default_max_tokens: { kinds: ['anthropic'], what: 'max_tokens when a request sets none' },
  aws_region: { kinds: ['bedrock'], required: ['bedrock'], what: 'the AWS region, such as us-east-1' },
  aws_access_key_id_env: { kinds: ['bedrock'], required: ['bedrock'], what: 'the name of the variable holding the AWS access key id' },
  aws_secret_access_key_env: { kinds: ['bedrock'], required: ['bedrock'], what: 'the name of the variable holding the AWS secret access key' },
  aws_session_token_env: { kinds: ['bedrock'], what: 'the name of the variable holding an AWS session token' },
};

/** The providers file (CONTRACT §8), JSON or YAML. */
export const ProvidersDocument = Type.Object(
  { providers: Type.Array(Provider, { minItems: 1, ...says('must be a non-empty array') }) },
  { additionalProperties: false, ...says('must be an object with a "providers" array') },
);

type Env = Record<string, string | undefined>;

const fail = (field: string, problem: string, value?: unknown): never => {
  throw new ProvidersFileError(`${field} ${problem.replace('{value}', () => show(value))}`);
};

/** Reads and validates the file named by SVC_PROVIDERS_FILE (JSON, or YAML for .yaml/.yml). */
export function loadProvidersFile(path: string, env: Env): ProviderSpec[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ProvidersFileError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let doc: unknown;
  const yaml = /\.ya?ml$/i.test(path);
  try {
    doc = yaml ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new ProvidersFileError(`${path} is not valid ${yaml ? 'YAML' : 'JSON'} (${(err as Error).message.split('\n')[0]})`);
  }
  return parseProvidersDocument(doc, env);
}

/**
 * Strict: unknown fields, wrong types, duplicates and unset key variables are refused with the field's path. The schema
 * first (the first error it reports), then the rules it cannot say: unique names, each kind's own fields (KIND_FIELDS:
 * allowed and required per kind; base_url for kinds openai and azure_openai), the key's variables set, exact prices.
 */
export function parseProvidersDocument(doc: unknown, env: Env): ProviderSpec[] {
  const [error] = Errors(ProvidersDocument, doc);
  if (error) refusal(error, doc);
  const { providers } = doc as Static<typeof ProvidersDocument>;
  const names = new Set<string>();
  return providers.map((p, i) => {
    const at = `providers[${i}]`;
    if (names.has(p.name)) fail(`${at}.name`, `"${p.name}" is used by another provider`);
    names.add(p.name);

    for (const [field, rule] of Object.entries(KIND_FIELDS)) {
      const given = (p as Record<string, unknown>)[field];
      if (given !== undefined && given !== null && !rule.kinds.includes(p.kind)) {
        fail(`${at}.${field}`, `is not a field of kind ${p.kind} (only of ${rule.kinds.filter((k) => k !== 'mock').join(', ')})`);
      }
      if ((given === undefined || given === null) && rule.required?.includes(p.kind)) {
        fail(`${at}.${field}`, `is required for kind ${p.kind}: ${rule.what}`);
      }
    }

    let baseUrl: string | null = null;
    if (p.base_url !== undefined || p.kind === 'openai' || p.kind === 'azure_openai') baseUrl = providerUrl(p.base_url, `${at}.base_url`);
    else if (p.kind === 'anthropic') baseUrl = 'https://api.anthropic.com';
    else if (p.kind === 'gemini') baseUrl = 'https://generativelanguage.googleapis.com/v1beta';
    else if (p.kind === 'bedrock') baseUrl = `https://bedrock-runtime.${p.aws_region}.amazonaws.com`;

    const secret = (field: string, name: string | null | undefined): SecretValue | null => {
      if (!name) return null;
      const value = env[name];
      if (value === undefined || value.trim() === '') fail(`${at}.${field}`, `names ${name}, which is not set in the environment`);
      return new SecretValue(value!.trim());
    };
    const apiKey = secret('api_key_env', p.api_key_env);
    const aws: AwsSpec | null =
      p.kind === 'bedrock'
        ? {
            region: p.aws_region!,
            accessKeyIdEnv: p.aws_access_key_id_env!,
            secretAccessKeyEnv: p.aws_secret_access_key_env!,
            sessionTokenEnv: p.aws_session_token_env ?? null,
            accessKeyId: secret('aws_access_key_id_env', p.aws_access_key_id_env)!,
            secretAccessKey: secret('aws_secret_access_key_env', p.aws_secret_access_key_env)!,
            sessionToken: secret('aws_session_token_env', p.aws_session_token_env),
          }
        : null;

    const ids = new Set<string>();
    const models = p.models.map((m, j) => {
      const mat = `${at}.models[${j}]`;
      if (ids.has(m.id)) fail(`${mat}.id`, `"${m.id}" is listed twice for this provider`);
      ids.add(m.id);
      for (const field of ['input_per_mtok', 'output_per_mtok', 'cache_read_per_mtok', 'cache_write_per_mtok'] as const) {
        if (m[field] !== undefined && !isExactPrice(m[field])) fail(`${mat}.${field}`, PRICE_PROBLEM, m[field]);
      }
      if (m.deployment !== undefined && p.kind !== 'azure_openai') fail(`${mat}.deployment`, `is not a field of kind ${p.kind} (only of azure_openai)`);
      if (m.type === 'embedding' && (p.kind === 'anthropic' || p.kind === 'bedrock')) {
        fail(`${mat}.type`, `"embedding" is not served by kind ${p.kind} (embedding models: kinds openai, azure_openai, gemini, mock)`);
      }
      const model: ModelSpec = { id: m.id, type: m.type ?? 'chat', inputPerMtok: m.input_per_mtok, outputPerMtok: m.output_per_mtok };
      if (m.cache_read_per_mtok !== undefined) model.cacheReadPerMtok = m.cache_read_per_mtok;
      if (m.cache_write_per_mtok !== undefined) model.cacheWritePerMtok = m.cache_write_per_mtok;
      if (p.kind === 'azure_openai') model.deployment = m.deployment ?? m.id;
      return model;
    });

    return {
      name: p.name,
      kind: p.kind,
      baseUrl,
      apiKeyEnv: p.api_key_env ?? null,
      apiKey,
      region: p.region,
      timeoutMs: p.timeout_ms ?? DEFAULT_PROVIDER_TIMEOUT_MS,
      models,
      ...(p.kind === 'azure_openai' ? { apiVersion: p.api_version! } : {}),
      ...(p.kind === 'anthropic'
        ? { apiVersion: p.api_version ?? DEFAULT_ANTHROPIC_VERSION, defaultMaxTokens: p.default_max_tokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS }
        : {}),
      ...(p.kind === 'gemini' ? { apiKeyIn: p.api_key_in ?? 'header' } : {}),
      ...(aws ? { aws } : {}),
    };
  });
}

/** An http(s) URL without credentials, query or fragment, without its trailing slashes. */
function providerUrl(value: string | undefined, field: string): string {
  if (value === undefined) return fail(field, BASE_URL_PROBLEM, value);
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return fail(field, 'is not a valid URL: {value}', value);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') fail(field, 'must start with http:// or https://');
  if (u.username || u.password || u.search || u.hash) {
    fail(field, 'must not carry credentials, a query or a fragment (put the key in api_key_env)');
  }
  return u.toString().replace(/\/+$/, '');
}

/**
 * The schema's first error as the one line the operator sees: the field's path as written in the file
 * (`providers[0].timeout_ms`, from the error's instancePath) and the wording from the schema (problemFor).
 */
function refusal(error: TLocalizedValidationError, doc: unknown): never {
  const instance = pointer(error.instancePath);
  const schema = pointer(error.schemaPath.slice(1));
  let unknown: string | undefined;
  if (error.keyword === 'boolean' && schema.at(-1) === 'additionalProperties') {
    unknown = instance.pop();
    schema.pop();
  } else if (error.keyword === 'additionalProperties') {
    unknown = (error.params as { additionalProperties: string[] }).additionalProperties[0];
  } else if (error.keyword === 'required') {
    const name = (error.params as { requiredProperties: string[] }).requiredProperties[0]!;
    instance.push(name);
    schema.push('properties', name);
  }
  if (unknown !== undefined) {
    const allowed = Object.keys(valueAt(ProvidersDocument, schema)?.properties ?? {}).join(', ');
    fail(`${instance.length > 0 ? fieldPath(instance, doc) : '(root)'}.${unknown}`, `is not a known field (allowed: ${allowed})`);
  }
  return fail(fieldPath(instance, doc), problemFor(ProvidersDocument, schema, error), valueAt(doc, instance));
}

/** `providers[0].models[1].id`; "the document" for the root. */
function fieldPath(segments: string[], doc: unknown): string {
  if (segments.length === 0) return 'the document';
  return segments.reduce((path, s, i) => path + (Array.isArray(valueAt(doc, segments.slice(0, i))) ? `[${s}]` : i > 0 ? `.${s}` : s), '');
}
