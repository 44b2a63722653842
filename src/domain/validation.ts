import type { Static, TSchema } from 'typebox';
import { Compile, type Validator } from 'typebox/compile';
import type { TLocalizedValidationError } from 'typebox/error';
import { Convert } from 'typebox/value';
import { pointer, problemFor, show, valueAt } from '../config/schema-errors.ts';
import { SvcError } from '../errors/svc-error.ts';

/**
 * Input validation, once for both surfaces: each input's TypeBox schema (domain/<capability>/schema.ts) is the fastify
 * route schema (api/input.ts compiles it with this module) and the service's own check (GraphQL hands
 * the service the same snake_case object). The first error becomes 400 invalid_request with
 *   - `param`: the field's path as the API writes it (`scopes`, `targets[0].weight`, `messages[2].role`); an index into
 *     a list of plain values is left out (`scopes`, not `scopes[3]`);
 *   - a message: `<param> <problem>.`, the problem read from the schema's `x-problem` (config/schema-errors.ts), or
 *     "Missing required parameter: x." / "Unknown parameter: x.". A wording that starts with a capital letter is the
 *     whole sentence (`Unknown scope: {raw}`); `{value}` is the value as JSON, `{raw}` as text.
 *
 *   const input = parseInput(CreateKey, body);   // Static<typeof CreateKey>, or throws SvcError('invalid_request')
 */
export function parseInput<S extends TSchema>(schema: S, value: unknown): Static<S> {
  const validator = compiled(schema);
  if (validator.Check(value)) return value as Static<S>;
  throw inputError(schema, validator.Errors(value)[0]!, value);
}

/**
 * For text inputs (a query string, a path): values converted to the schema's types first (`limit=5` is the integer 5),
 * then checked as parseInput does. Returns the converted value.
 */
export function parseTextInput<S extends TSchema>(schema: S, value: unknown): Static<S> {
  return parseInput(schema, Convert(schema, value));
}

const validators = new WeakMap<TSchema, Validator>();

/** Each schema is compiled once, on first use. */
function compiled(schema: TSchema): Validator {
  let validator = validators.get(schema);
  if (!validator) {
    validator = Compile(schema);
    validators.set(schema, validator);
  }
  return validator;
}

/** The longest value a message quotes. */
const MAX_SHOWN = 80;

/** One TypeBox error as the API's invalid_request: param from the instance path, wording from the schema. */
export function inputError(schema: TSchema, error: TLocalizedValidationError, value: unknown): SvcError {
  const instance = pointer(error.instancePath);
  const schemaPath = pointer(error.schemaPath.slice(1));
  if (error.keyword === 'boolean' && schemaPath.at(-1) === 'additionalProperties') {
    return refused(fieldPath(schema, instance), (p) => `Unknown parameter: ${p}.`);
  }
  if (error.keyword === 'additionalProperties') {
    const [unknown] = (error.params as { additionalProperties: string[] }).additionalProperties;
    return refused(fieldPath(schema, [...instance, unknown!]), (p) => `Unknown parameter: ${p}.`);
  }
  if (error.keyword === 'required') {
    const [missing] = (error.params as { requiredProperties: string[] }).requiredProperties;
    return refused(fieldPath(schema, [...instance, missing!]), (p) => `Missing required parameter: ${p}.`);
  }
  const param = fieldPath(schema, instance);
  const found = valueAt(value, instance);
  const problem = problemFor(schema, schemaPath, error)
    .replace('{value}', () => clip(show(found)))
    .replace('{raw}', () => clip(String(found)));
  if (/^[A-Z]/.test(problem)) return refused(param, () => `${problem}.`);
  return refused(param, (p) => (p === null ? `The request ${problem}.` : `${p} ${problem}.`));
}

const clip = (text: string) => (text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text);

function refused(param: string | null, message: (param: string | null) => string): SvcError {
  return new SvcError('invalid_request', { param, message: message(param) });
}

/**
 * `['targets', '0', 'weight']` → `targets[0].weight`. A trailing index is kept only when the list holds objects
 * (`targets[1]` is not an object); in a list of values the list itself is the parameter (`scopes`).
 */
function fieldPath(schema: TSchema, segments: string[]): string | null {
  let path = '';
  let node: any = schema;
  segments.forEach((s, i) => {
    const isIndex = /^\d+$/.test(s) && node?.type === 'array';
    node = isIndex ? node.items : propertyOf(node, s);
    if (!isIndex) path += path === '' ? s : `.${s}`;
    else if (i < segments.length - 1 || isObjectSchema(node)) path += `[${s}]`;
  });
  return path === '' ? null : path;
}

/** The schema of property `name`, looking through a nullable union (`anyOf: [object, null]`). */
function propertyOf(node: any, name: string): any {
  if (node?.properties?.[name]) return node.properties[name];
  for (const branch of node?.anyOf ?? []) if (branch?.properties?.[name]) return branch.properties[name];
  return undefined;
}

const isObjectSchema = (node: any): boolean => node?.type === 'object' || (node?.anyOf ?? []).some(isObjectSchema);
