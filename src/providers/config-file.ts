import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { Type, type Static } from 'typebox';
import type { TLocalizedValidationError } from 'typebox/error';
import { Errors } from 'typebox/value';
import { parse as parseYaml } from 'yaml';
import { pointer, problemFor, says, show, valueAt } from '../config/schema-errors.ts';
import { isExactPrice, MAX_PRICE_USD_PER_MTOK } from '../kernel/money.ts';
import { REGION_PATTERN } from '../kernel/region.ts';

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
    models: [
      { id: 'mock-1', type: 'chat', inputPerMtok: 0, outputPerMtok: 0 },
      // CONTRACT §9: deterministic vectors, 256 dimensions.
      { id: 'mock-embed-1', type: 'embedding', inputPerMtok: 0, outputPerMtok: 0 },
    ],
  },
]);

const PRICE_PROBLEM = `must be a number of USD per million tokens from 0 to ${MAX_PRICE_USD_PER_MTOK} with at most 6 decimals, got {value}`;
const BASE_URL_PROBLEM = 'is required for kind openai and must be a URL, got {value}';

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
  },
  { additionalProperties: false, ...says('must be an object') },
);

const Provider = Type.Object(
  {
    name: Type.String({
      pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$',
      ...says('must be 1 to 63 letters, digits, ".", "_" or "-", got {value}'),
    }),
    kind: Type.Enum(['openai', 'mock'], says('must be "openai" or "mock", got {value}')),
    base_url: Type.Optional(Type.String(says(BASE_URL_PROBLEM))),
    api_key_env: Type.Optional(
      Type.Union([Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }), Type.Null()], says('must be the name of an environment variable, got {value}')),
    ),
    region: Type.String({ pattern: REGION_PATTERN, ...says('is required: a lower-case region name such as eu-west-1, got {value}') }),
    timeout_ms: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 600_000, ...says('must be a whole number of milliseconds from 1 to 600000, got {value}') }),
    ),
    models: Type.Array(Model, { minItems: 1, ...says('must be a non-empty array') }),
  },
  { additionalProperties: false, ...says('must be an object') },
);

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
 * first (the first error it reports), then the rules it cannot say: unique names, base_url for kind openai, the key's
 * variable set, exact prices.
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

    let baseUrl: string | null = null;
    if (p.base_url !== undefined || p.kind === 'openai') baseUrl = providerUrl(p.base_url, `${at}.base_url`);

    let apiKey: SecretValue | null = null;
    if (p.api_key_env) {
      const value = env[p.api_key_env];
      if (value === undefined || value.trim() === '') fail(`${at}.api_key_env`, `names ${p.api_key_env}, which is not set in the environment`);
      apiKey = new SecretValue(value!.trim());
    }

    const ids = new Set<string>();
    const models = p.models.map((m, j) => {
      const mat = `${at}.models[${j}]`;
      if (ids.has(m.id)) fail(`${mat}.id`, `"${m.id}" is listed twice for this provider`);
      ids.add(m.id);
      for (const field of ['input_per_mtok', 'output_per_mtok'] as const) {
        if (!isExactPrice(m[field])) fail(`${mat}.${field}`, PRICE_PROBLEM, m[field]);
      }
      return { id: m.id, type: m.type ?? 'chat', inputPerMtok: m.input_per_mtok, outputPerMtok: m.output_per_mtok };
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
