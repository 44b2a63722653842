import type { Static, TSchema } from 'typebox';
import { Compile, type Validator } from 'typebox/compile';
import type { TLocalizedValidationError } from 'typebox/error';
import { Convert } from 'typebox/value';
import { pointer, problemFor, show, valueAt } from '../config/schema-errors.ts';
import { SvcError, invalid } from '../errors/svc-error.ts';

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

// ---- names: what a schema cannot say ----

/**
 * Names of people and keys, compared the way a person reads them. One rule for key names (domain/keys/service.ts) and
 * for the people of a risk case (assignee and reviewer, CONTRACT §16): NFC, surrounding white space dropped,
 * invisible and direction-changing characters refused, letters of lookalike scripts not mixed; two names are the same
 * when their folds (NFKC, case-folded) are equal.
 */

/** White space around a name is dropped (Unicode White_Space; U+FEFF is not white space and is refused below). */
const SURROUNDING_SPACE = /^\p{White_Space}+|\p{White_Space}+$/gu;

/**
 * Characters a name may not hold anywhere: controls (Cc), format characters (Cf: zero-width U+200B-U+200D, U+2060,
 * U+FEFF, the bidi marks, embeddings, overrides and isolates U+200E/U+200F, U+202A-U+202E, U+2066-U+2069, U+061C,
 * the soft hyphen …), lone surrogates (Cs), line and paragraph separators (Zl, Zp) and the Hangul fillers, which
 * render as nothing. Each can make two different names look the same, or a name look like another.
 */
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0]/u;
const FORBIDDEN_ALL = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0]/gu;

/** Scripts whose letters are confused with one another (a, а, α): a name may use letters of one of them only. */
const LOOKALIKE_SCRIPTS = [
  ['Latin', /\p{Script=Latin}/u],
  ['Cyrillic', /\p{Script=Cyrillic}/u],
  ['Greek', /\p{Script=Greek}/u],
] as const;

const hex = (cp: number): string => `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;

/**
 * A name as stored and returned: NFC, without surrounding white space, 1 to `maxChars` code points. Refuses (400
 * invalid_request naming `param`) invisible and direction-changing characters and names that mix Latin, Cyrillic and
 * Greek letters (UTS #39's single-script rule for the scripts with lookalikes).
 */
export function normalizeName(raw: unknown, param: string, maxChars: number): string {
  const size = `${param} must be a non-empty string of at most ${maxChars} characters`;
  if (typeof raw !== 'string') throw invalid(param, `${size}.`);
  const name = raw.normalize('NFC').replace(SURROUNDING_SPACE, '');
  // Characters are code points: 100 emoji are 100 characters, not 200 UTF-16 units.
  const chars = [...name];
  if (chars.length === 0 || chars.length > maxChars) {
    throw invalid(param, `${size} (surrounding white space is not counted).`);
  }
  const bad = chars.find((c) => FORBIDDEN.test(c));
  if (bad !== undefined) {
    throw invalid(param, `${param} must not contain control, invisible or text-direction characters (found ${hex(bad.codePointAt(0)!)}).`);
  }
  // Compatibility forms count too: fullwidth and mathematical letters are checked as the letters they stand for.
  const compat = name.normalize('NFKC');
  const scripts = LOOKALIKE_SCRIPTS.filter(([, re]) => re.test(compat)).map(([script]) => script);
  if (scripts.length > 1) {
    throw invalid(param, `${param} must not mix ${scripts.join(' and ')} letters (they have lookalikes of one another).`);
  }
  return name;
}

/**
 * The form two names are compared in: compatibility-normalized and case-folded (NFKC, upper then lower case, so
 * "ADMIN", "Admin", "ａｄｍｉｎ" and "admın" with a dotless i all equal "admin"; ß equals ss).
 */
export function nameFold(name: string): string {
  return name.normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC');
}

/**
 * The fold of a name that may predate these rules (a stored value never checked): the characters normalizeName
 * refuses are dropped and surrounding white space trimmed first, so "alice\u200b" stored long ago still equals "alice".
 */
export function storedNameFold(name: string): string {
  return nameFold(name.normalize('NFC').replace(FORBIDDEN_ALL, '').replace(SURROUNDING_SPACE, ''));
}
