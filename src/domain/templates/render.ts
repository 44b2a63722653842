import { LRUCache } from 'lru-cache';
import Mustache from 'mustache';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import type { TemplateMessage, TemplateVariable } from './schema.ts';

/**
 * Bounds on a template's cost (Mustache sections over lists multiply: five nested sections over a 30-item list are
 * 30^5 = 24 million renders). At save time: sections (`{{#x}}`, `{{^x}}`) nest at most MAX_SECTION_DEPTH deep. At
 * render time, counted while rendering (Mustache is synchronous: a check afterwards would come too late), over all the
 * messages of one render: at most MAX_SECTION_ITERATIONS section renders (a section over a list renders once per
 * item), MAX_RENDER_TAGS tags and text pieces rendered, and MAX_RENDER_OUTPUT characters of output. Versions stored
 * before the depth bound are bounded by the render-time ones all the same.
 */
export const MAX_SECTION_DEPTH = 4;
export const MAX_SECTION_ITERATIONS = 10_000;
export const MAX_RENDER_TAGS = 250_000;
export const MAX_RENDER_OUTPUT = 1_000_000;

/** A declared variable as stored: `required` resolved (default true). */
export interface Variable {
  name: string;
  required: boolean;
  default?: unknown;
}

export const normalizeVariables = (vars: readonly TemplateVariable[] | undefined): Variable[] =>
  (vars ?? []).map((v) => ({ name: v.name, required: v.required ?? true, ...(v.default !== undefined ? { default: v.default } : {}) }));

type Token = [string, string, number, number, Token[]?, ...unknown[]];

/** A render went over one of the bounds above: `what` says which, for the 400's message. */
class RenderBound extends Error {}

/** The deepest nesting of sections in `tokens` (0: none). */
function sectionDepth(tokens: Token[]): number {
  let deepest = 0;
  for (const t of tokens) {
    if ((t[0] === '#' || t[0] === '^') && Array.isArray(t[4])) deepest = Math.max(deepest, 1 + sectionDepth(t[4]));
  }
  return deepest;
}

/**
 * Mustache's own Writer with a counting render loop (renderTokens, renderSection and renderInverted as mustache 4.2.0
 * writes them, plus the counts): throws RenderBound the moment a bound is passed. A list item that is null renders
 * its section with nothing in scope (mustache itself throws a TypeError there). Parsed templates are kept in a bounded
 * LRU (mustache's default cache keeps every template it ever parsed).
 */
class BoundedWriter extends Mustache.Writer {
  private iterations = 0;
  private tags = 0;
  private output = 0;

  constructor() {
    super();
    const parsed = new LRUCache<string, string>({ max: 2_000 });
    (this as unknown as { templateCache: Mustache.TemplateCache }).templateCache = {
      set: (k, v) => void parsed.set(k, v),
      get: (k) => parsed.get(k),
      clear: () => parsed.clear(),
    };
  }

  /** Starts a render's counts (one render: every message of a version). */
  reset(): void {
    this.iterations = 0;
    this.tags = 0;
    this.output = 0;
  }

  private iterate(): void {
    if (++this.iterations > MAX_SECTION_ITERATIONS) {
      throw new RenderBound(`more than ${MAX_SECTION_ITERATIONS} section iterations (a section over a list renders once per item)`);
    }
  }

  override renderTokens(tokens: string[][], context: Mustache.Context, partials?: undefined, originalTemplate?: string, config?: Mustache.RenderOptions): string {
    let buffer = '';
    for (const token of tokens) {
      if (++this.tags > MAX_RENDER_TAGS) throw new RenderBound(`more than ${MAX_RENDER_TAGS} tags rendered`);
      const symbol = token[0];
      let value: unknown;
      if (symbol === '#') value = this.renderSection(token, context, partials, originalTemplate, config);
      else if (symbol === '^') value = this.renderInverted(token, context, partials, originalTemplate, config);
      else {
        // Partials ({{> x}}) are refused when a version is saved: none is rendered here.
        if (symbol === '&') value = this.unescapedValue(token, context);
        else if (symbol === 'name') value = this.escapedValue(token, context, config);
        else if (symbol === 'text') value = this.rawValue(token);
        if (value !== undefined) {
          value = String(value);
          this.output += (value as string).length;
          if (this.output > MAX_RENDER_OUTPUT) throw new RenderBound(`more than ${MAX_RENDER_OUTPUT} characters of output`);
        }
      }
      if (value !== undefined) buffer += value as string;
    }
    return buffer;
  }

  override renderSection(token: string[], context: Mustache.Context, partials?: undefined, originalTemplate?: string, config?: Mustache.RenderOptions): string {
    const value = context.lookup(token[1]!);
    const body = token[4] as unknown as string[][];
    if (!value) return undefined as unknown as string;
    if (Array.isArray(value)) {
      let buffer = '';
      for (const item of value) {
        this.iterate();
        const scope = item === null || item === undefined ? context.push(Object.create(null)) : context.push(item);
        if (item === null || item === undefined) (scope as unknown as { cache: Record<string, unknown> }).cache['.'] = undefined;
        buffer += this.renderTokens(body, scope, partials, originalTemplate, config);
      }
      return buffer;
    }
    if (typeof value === 'function') return super.renderSection(token, context, partials, originalTemplate, config);
    this.iterate();
    const scope = typeof value === 'object' || typeof value === 'string' || typeof value === 'number' ? context.push(value) : context;
    return this.renderTokens(body, scope, partials, originalTemplate, config);
  }

  override renderInverted(token: string[], context: Mustache.Context, partials?: undefined, originalTemplate?: string, config?: Mustache.RenderOptions): string {
    const value = context.lookup(token[1]!);
    if (value && !(Array.isArray(value) && value.length === 0)) return undefined as unknown as string;
    this.iterate();
    return this.renderTokens(token[4] as unknown as string[][], context, partials, originalTemplate, config);
  }
}

const writer = new BoundedWriter();

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
      tokens = writer.parse(m.content) as Token[];
    } catch (err) {
      throw invalid('messages', `messages[${i}].content is not a valid Mustache template: ${(err as Error).message}`);
    }
    if (JSON.stringify(tokens).includes('[">"')) throw invalid('messages', `messages[${i}].content uses a partial ({{> …}}), which templates do not support.`);
    const depth = sectionDepth(tokens);
    if (depth > MAX_SECTION_DEPTH) {
      throw invalid('messages', `messages[${i}].content nests sections ({{#…}} / {{^…}}) ${depth} deep; at most ${MAX_SECTION_DEPTH} are allowed.`);
    }
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
  writer.reset();
  try {
    return messages.map((m) => ({ role: m.role, content: writer.render(m.content, view, undefined, { escape }) }));
  } catch (err) {
    if (!(err instanceof RenderBound)) throw err;
    throw invalid(paramPrefix, `Rendering the template with these variables takes ${err.message}: pass shorter lists or smaller values.`);
  } finally {
    writer.reset();
  }
}
