import Mustache from 'mustache';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import type { TemplateMessage, TemplateVariable } from './schema.ts';

/** A declared variable as stored: `required` resolved (default true). */
export interface Variable {
  name: string;
  required: boolean;
  default?: unknown;
}

export const normalizeVariables = (vars: readonly TemplateVariable[] | undefined): Variable[] =>
  (vars ?? []).map((v) => ({ name: v.name, required: v.required ?? true, ...(v.default !== undefined ? { default: v.default } : {}) }));

type Token = [string, string, number, number, Token[]?, ...unknown[]];

/**
 * The names a content uses at its top level (`{{x}}`, `{{{x}}}`, `{{&x}}`, `{{#x}}`, `{{^x}}`; `a.b` counts as `a`).
 * Inside a `{{#section}}` names may be the items' own fields, so only the section's name is checked; inside an
 * inverted section `{{^x}}` nothing is iterated, so its names count too.
 */
function usedNames(tokens: Token[], out: Set<string>): void {
  for (const t of tokens) {
    const [type, value] = t;
    if (type === 'name' || type === '&' || type === '{' || type === '#' || type === '^') {
      if (value !== '.') out.add(value.split('.')[0]!);
    }
    if (type === '^' && Array.isArray(t[4])) usedNames(t[4], out);
  }
}

/**
 * What the schema cannot say about a version: unique variable names, Mustache that parses, no partials, and no
 * `{{x}}` that is not declared (CONTRACT §10: 400 param messages).
 */
export function checkVersion(messages: readonly TemplateMessage[], variables: readonly Variable[]): void {
  const declared = new Set<string>();
  variables.forEach((v, i) => {
    if (declared.has(v.name)) throw invalid(`variables[${i}].name`, `Variable "${v.name}" is declared twice.`);
    declared.add(v.name);
  });
  messages.forEach((m, i) => {
    let tokens: Token[];
    try {
      tokens = Mustache.parse(m.content) as unknown as Token[];
    } catch (err) {
      throw invalid('messages', `messages[${i}].content is not a valid Mustache template: ${(err as Error).message}`);
    }
    if (JSON.stringify(tokens).includes('[">"')) throw invalid('messages', `messages[${i}].content uses a partial ({{> …}}), which templates do not support.`);
    const used = new Set<string>();
    usedNames(tokens, used);
    for (const name of used) {
      if (!declared.has(name)) {
        throw invalid('messages', `messages[${i}].content uses {{${name}}}, which is not among the template's variables: declare it in variables.`);
      }
    }
  });
}

/** No HTML escaping (CONTRACT §10); a list or object printed by `{{x}}` is its JSON. */
const escape = (v: unknown): string => (typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v));

/**
 * The messages with the variables filled in: the given values, else the defaults. A required variable with neither
 * is 400 template_variable_missing with `param` `<paramPrefix>.<name>`; a value for a variable the version does not
 * declare is 400 invalid_request naming it (a typo would otherwise render an empty string).
 */
export function renderMessages(
  messages: readonly TemplateMessage[],
  variables: readonly Variable[],
  values: Record<string, unknown> | undefined,
  paramPrefix: string,
): TemplateMessage[] {
  const given = values ?? {};
  const view: Record<string, unknown> = {};
  for (const v of variables) {
    if (Object.hasOwn(given, v.name) && given[v.name] !== null && given[v.name] !== undefined) view[v.name] = given[v.name];
    else if (v.default !== undefined) view[v.name] = v.default;
    else if (v.required) {
      throw new SvcError('template_variable_missing', {
        param: `${paramPrefix}.${v.name}`,
        message: `The template's required variable "${v.name}" is absent and has no default.`,
      });
    }
  }
  const declared = new Set(variables.map((v) => v.name));
  for (const name of Object.keys(given)) {
    if (!declared.has(name)) throw invalid(`${paramPrefix}.${name}`, `The template declares no variable "${name.slice(0, 64)}".`);
  }
  return messages.map((m) => ({ role: m.role, content: Mustache.render(m.content, view, undefined, { escape }) }));
}
