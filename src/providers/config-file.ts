import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { isExactPrice } from './pricing.ts';

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
  /** USD per million tokens. */
  inputPerMtok: number;
  outputPerMtok: number;
}

export interface ProviderSpec {
  name: string;
  kind: 'openai' | 'mock';
  baseUrl: string | null;
  apiKeyEnv: string | null;
  apiKey: SecretValue | null;
  region: string;
  timeoutMs: number;
  models: ModelSpec[];
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
    models: [{ id: 'mock-1', inputPerMtok: 0, outputPerMtok: 0 }],
  },
]);

const PROVIDER_FIELDS = ['name', 'kind', 'base_url', 'api_key_env', 'region', 'timeout_ms', 'models'];
const MODEL_FIELDS = ['id', 'input_per_mtok', 'output_per_mtok'];
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const REGION_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
const ENV_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MODEL_RE = /^[^\s]{1,200}$/;

type Env = Record<string, string | undefined>;

const fail = (field: string, problem: string): never => {
  throw new ProvidersFileError(`${field} ${problem}`);
};
const show = (v: unknown) => (typeof v === 'string' ? `"${v}"` : JSON.stringify(v) ?? String(v));

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function onlyFields(obj: Record<string, unknown>, allowed: string[], where: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) fail(`${where}.${k}`, `is not a known field (allowed: ${allowed.join(', ')})`);
  }
}

function price(v: unknown, field: string): number {
  if (typeof v !== 'number' || !isExactPrice(v)) {
    fail(field, `must be a number of USD per million tokens from 0 to 1000000 with at most 6 decimals, got ${show(v)}`);
  }
  return v as number;
}

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

/** Strict: unknown fields, wrong types, duplicates and unset key variables are refused with the field's path. */
export function parseProvidersDocument(doc: unknown, env: Env): ProviderSpec[] {
  if (!isPlainObject(doc)) fail('the document', 'must be an object with a "providers" array');
  const root = doc as Record<string, unknown>;
  onlyFields(root, ['providers'], '(root)');
  const list = root.providers;
  if (!Array.isArray(list) || list.length === 0) fail('providers', 'must be a non-empty array');
  const names = new Set<string>();
  return (list as unknown[]).map((raw, i) => {
    const at = `providers[${i}]`;
    if (!isPlainObject(raw)) fail(at, 'must be an object');
    const p = raw as Record<string, unknown>;
    onlyFields(p, PROVIDER_FIELDS, at);

    if (typeof p.name !== 'string' || !NAME_RE.test(p.name)) {
      fail(`${at}.name`, `must be 1 to 63 letters, digits, ".", "_" or "-", got ${show(p.name)}`);
    }
    const name = p.name as string;
    if (names.has(name)) fail(`${at}.name`, `"${name}" is used by another provider`);
    names.add(name);

    if (p.kind !== 'openai' && p.kind !== 'mock') fail(`${at}.kind`, `must be "openai" or "mock", got ${show(p.kind)}`);
    const kind = p.kind as 'openai' | 'mock';

    let baseUrl: string | null = null;
    if (p.base_url !== undefined || kind === 'openai') {
      if (typeof p.base_url !== 'string') fail(`${at}.base_url`, `is required for kind openai and must be a URL, got ${show(p.base_url)}`);
      let u: URL | null = null;
      try {
        u = new URL(p.base_url as string);
      } catch {
        fail(`${at}.base_url`, `is not a valid URL: ${show(p.base_url)}`);
      }
      if (u!.protocol !== 'http:' && u!.protocol !== 'https:') fail(`${at}.base_url`, 'must start with http:// or https://');
      if (u!.username || u!.password || u!.search || u!.hash) {
        fail(`${at}.base_url`, 'must not carry credentials, a query or a fragment (put the key in api_key_env)');
      }
      baseUrl = u!.toString().replace(/\/+$/, '');
    }

    let apiKeyEnv: string | null = null;
    let apiKey: SecretValue | null = null;
    if (p.api_key_env !== undefined && p.api_key_env !== null) {
      if (typeof p.api_key_env !== 'string' || !ENV_RE.test(p.api_key_env)) {
        fail(`${at}.api_key_env`, `must be the name of an environment variable, got ${show(p.api_key_env)}`);
      }
      apiKeyEnv = p.api_key_env as string;
      const value = env[apiKeyEnv];
      if (value === undefined || value.trim() === '') {
        fail(`${at}.api_key_env`, `names ${apiKeyEnv}, which is not set in the environment`);
      }
      apiKey = new SecretValue(value!.trim());
    }

    if (typeof p.region !== 'string' || !REGION_RE.test(p.region)) {
      fail(`${at}.region`, `is required: a lower-case region name such as eu-west-1, got ${show(p.region)}`);
    }

    let timeoutMs = DEFAULT_PROVIDER_TIMEOUT_MS;
    if (p.timeout_ms !== undefined) {
      if (typeof p.timeout_ms !== 'number' || !Number.isInteger(p.timeout_ms) || p.timeout_ms < 1 || p.timeout_ms > 600_000) {
        fail(`${at}.timeout_ms`, `must be a whole number of milliseconds from 1 to 600000, got ${show(p.timeout_ms)}`);
      }
      timeoutMs = p.timeout_ms as number;
    }

    if (!Array.isArray(p.models) || p.models.length === 0) fail(`${at}.models`, 'must be a non-empty array');
    const ids = new Set<string>();
    const models = (p.models as unknown[]).map((rawModel, j) => {
      const mat = `${at}.models[${j}]`;
      if (!isPlainObject(rawModel)) fail(mat, 'must be an object');
      const m = rawModel as Record<string, unknown>;
      onlyFields(m, MODEL_FIELDS, mat);
      if (typeof m.id !== 'string' || !MODEL_RE.test(m.id) || m.id === 'auto') {
        fail(`${mat}.id`, `must be a model id of 1 to 200 characters without spaces (and not "auto"), got ${show(m.id)}`);
      }
      if (ids.has(m.id as string)) fail(`${mat}.id`, `"${m.id}" is listed twice for this provider`);
      ids.add(m.id as string);
      return {
        id: m.id as string,
        inputPerMtok: price(m.input_per_mtok, `${mat}.input_per_mtok`),
        outputPerMtok: price(m.output_per_mtok, `${mat}.output_per_mtok`),
      };
    });

    return { name, kind, baseUrl, apiKeyEnv, apiKey, region: p.region as string, timeoutMs, models };
  });
}
