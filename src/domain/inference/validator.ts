import type { Static, TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import type { TLocalizedValidationError } from 'typebox/error';
import { SvcError } from '../../errors/svc-error.ts';

/**
 * The inference inputs' validator (schema.ts's schemas): the fastify validator of the inference routes and the
 * services' check. It is not domain/validation.ts's parseInput: for the same schema the two answer differently (this
 * one picks the union branch a value was meant for and names the field inside it, `input[0].content[0].text`; keeps a
 * list index on lists of plain values, `stop[1]`; uses a node's own wording, not its union's; says `body` for the
 * root), and the inference tests pin those answers.
 */

// ---- validation: one compiled check per schema, errors naming the field ----
// A small local helper until the shared validation helper (issue 15) replaces it.

type Check = (value: unknown) => { value: unknown } | { error: SvcError };
const compiled = new WeakMap<object, Check>();
/** Inputs already checked against their schema (by the route's validator): the service does not walk them again. */
const checked = new WeakMap<object, TSchema>();

/** A fastify-style validator (`{value}` or `{error}`) for a schema: the compiled check, and on failure the named error. */
export function validatorOf(schema: TSchema): Check {
  let check = compiled.get(schema);
  if (!check) {
    const validator = Compile(schema);
    check = (value) => {
      if (!validator.Check(value)) return { error: refusal(schema, validator.Errors(value), value) };
      if (typeof value === 'object' && value !== null) checked.set(value, schema);
      return { value };
    };
    compiled.set(schema, check);
  }
  return check;
}

/** The value, checked against its schema (once: a value the route's validator passed is not checked again); else 400
 *  invalid_request naming the field. */
export function parseInput<T extends TSchema>(schema: T, value: unknown): Static<T> {
  if (typeof value === 'object' && value !== null && checked.get(value) === schema) return value as Static<T>;
  const r = validatorOf(schema)(value);
  if ('error' in r) throw r.error;
  return r.value as Static<T>;
}

/** A value built from checked input that satisfies `schema` by construction (a translated Responses request). */
export function markChecked<T extends TSchema>(schema: T, value: Static<T>): Static<T> {
  checked.set(value as object, schema);
  return value;
}

const pointer = (p: string): string[] =>
  p === '' || p === '#' ? [] : p.replace(/^#/, '').slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
const at = (root: any, segments: string[]): any => segments.reduce((node, s) => node?.[s], root);
const show = (v: unknown): string => (typeof v === 'string' ? `"${v.slice(0, 100)}"` : (JSON.stringify(v) ?? String(v)).slice(0, 100));

/** `messages[2].content[0].type`: array indexes in brackets. */
function fieldPath(segments: string[], doc: unknown): string {
  let out = '';
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    out += Array.isArray(at(doc, segments.slice(0, i))) ? `[${s}]` : out === '' ? s : `.${s}`;
  }
  return out;
}

const TYPE_OF = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

/** Whether a value is of the kind a union branch describes (its type, its literal), ignoring the branch's details. */
function kindMatches(branch: any, v: unknown): boolean {
  if (branch.anyOf) return (branch.anyOf as any[]).some((b) => kindMatches(b, v));
  if ('const' in branch) return branch.const === v;
  if (Array.isArray(branch.enum)) return typeof v === typeof branch.enum[0];
  const t = branch.type;
  if (t === undefined) return true;
  const k = TYPE_OF(v);
  return (Array.isArray(t) ? t : [t]).some((x: string) => x === k || (x === 'integer' && k === 'number'));
}

/** The branch of a union a value was meant for: by kind, then by its `type` (or `role`) discriminator. */
function branchFor(anyOf: any[], v: unknown): number {
  let candidates = anyOf.map((b, i) => ({ b, i })).filter(({ b }) => kindMatches(b, v));
  if (candidates.length > 1 && TYPE_OF(v) === 'object') {
    const obj = v as Record<string, unknown>;
    for (const key of ['type', 'role']) {
      const narrowed = candidates.filter(({ b }) => {
        const p = b.properties?.[key];
        if (!p) return false;
        if (obj[key] === undefined) return !(b.required ?? []).includes(key);
        return 'const' in p ? p.const === obj[key] : Array.isArray(p.enum) ? p.enum.includes(obj[key]) : true;
      });
      if (narrowed.length >= 1) candidates = narrowed;
      if (candidates.length === 1) break;
    }
  }
  if (candidates.length === 1) return candidates[0]!.i;
  // A nullable field holding something else: the non-null branch says what is wrong.
  const nonNull = anyOf.map((b, i) => ({ b, i })).filter(({ b }) => b.type !== 'null');
  return candidates.length === 0 && nonNull.length === 1 ? nonNull[0]!.i : -1;
}

const KEYWORD_PROBLEM: Record<string, string> = {
  minItems: 'must not have fewer than {minItems} items',
  maxItems: 'must not have more than {maxItems} items',
};

function problem(node: any, keyword: string, fallback: string, value: unknown): string {
  const said: string | undefined = node?.['x-problem'];
  let text = said ?? KEYWORD_PROBLEM[keyword]?.replace(/\{(\w+)\}/g, (_, k: string) => String(node?.[k])) ?? fallback;
  if (!said && keyword === 'enum' && Array.isArray(node?.enum)) text = `must be one of ${node.enum.join(', ')}, got {value}`;
  return text.replace('{value}', () => show(value));
}

/**
 * The first error as a client should read it: the field's path and what is wrong with it. A union's errors are
 * those of the branch the value was meant for (a `null` on a nullable field, a part's `type`); when no branch fits,
 * the union itself is named with its own wording.
 */
function refusal(root: TSchema, errors: TLocalizedValidationError[], doc: unknown): SvcError {
  let scope = errors;
  let prefix = '#';
  for (let depth = 0; depth < 32; depth++) {
    // A wrong `type` (a tool of another kind, an unknown part) says more than the fields that kind would need.
    const first =
      scope.find((e) => e.keyword === 'const' && e.instancePath.endsWith('/type')) ?? scope.find((e) => e.keyword !== 'anyOf') ?? scope[0];
    if (!first) break;
    const rest = first.schemaPath.slice(prefix.length);
    const u = rest.indexOf('/anyOf/');
    if (u === -1) return named(root, first, doc);
    const unionPath = prefix + rest.slice(0, u);
    const union = at(root, pointer(unionPath));
    const where = instanceAt(pointer(unionPath), pointer(first.schemaPath), pointer(first.instancePath));
    const value = at(doc, where);
    const k = branchFor(union?.anyOf ?? [], value);
    const field = fieldPath(where, doc) || 'body';
    if (k === -1) {
      return invalidField(field, problem(union, 'anyOf', 'has an invalid value', value));
    }
    prefix = `${unionPath}/anyOf/${k}`;
    const inBranch = scope.filter((e) => e.schemaPath === prefix || e.schemaPath.startsWith(`${prefix}/`));
    if (inBranch.length === 0) return invalidField(field, problem(union, 'anyOf', 'has an invalid value', value));
    scope = inBranch;
  }
  return new SvcError('invalid_request', { message: 'The request body is invalid.' });
}

/** The instance path at a schema node on an error's way: `properties/x` and `items` step into the value, `anyOf/k` does not. */
function instanceAt(upto: string[], schema: string[], instance: string[]): string[] {
  const out: string[] = [];
  let j = 0;
  for (let i = 0; i < upto.length; i++) {
    const s = schema[i];
    if (s === 'properties' || s === 'patternProperties' || s === 'anyOf' || s === 'prefixItems') {
      if (s !== 'anyOf' && i + 1 < upto.length) out.push(instance[j++]!);
      i++;
    } else if (s === 'items' || s === 'additionalProperties') out.push(instance[j++]!);
  }
  return out;
}

function named(root: TSchema, e: TLocalizedValidationError, doc: unknown): SvcError {
  const segments = pointer(e.instancePath);
  const schemaSegments = pointer(e.schemaPath);
  if (e.keyword === 'boolean' && schemaSegments.at(-1) === 'additionalProperties') {
    const field = fieldPath(segments, doc);
    return invalidField(field, null, `Unknown parameter: ${field}.`);
  }
  if (e.keyword === 'additionalProperties') {
    const field = fieldPath([...segments, (e.params as { additionalProperties: string[] }).additionalProperties[0]!], doc);
    return invalidField(field, null, `Unknown parameter: ${field}.`);
  }
  if (e.keyword === 'required') {
    const field = fieldPath([...segments, (e.params as { requiredProperties: string[] }).requiredProperties[0]!], doc);
    return invalidField(field, null, `Missing required parameter: ${field}.`);
  }
  const node = at(root, schemaSegments.at(-1) === e.keyword ? schemaSegments.slice(0, -1) : schemaSegments);
  const field = fieldPath(segments, doc) || 'body';
  return invalidField(field, problem(node, e.keyword, e.message, at(doc, segments)));
}

function invalidField(field: string, problemText: string | null, message?: string): SvcError {
  const param = field === 'body' ? null : field;
  return new SvcError('invalid_request', { param, message: message ?? `${field} ${problemText}.` });
}
