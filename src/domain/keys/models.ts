import { Type } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { Nullable } from '../schema.ts';
import type { Caller } from '../context.ts';

/**
 * A key's model list (CONTRACT §22). Each entry is one of:
 * - `model`: that model id as the providers file names it, through any provider that serves it;
 * - `provider/model`: that model through one provider, named by its `name` or its `kind` in the providers file;
 * - `provider/*`: every model of that provider (by `name` or `kind`).
 * An entry matches a route when it is the route's model id, or `name/model`, `kind/model`, `name/*` or `kind/*` of it.
 * Entries naming a model no provider serves today are kept (the providers file may add it); only their shape is checked.
 */
export const MAX_KEY_MODELS = 100;
const MAX_ENTRY_CHARS = 200;
/** No whitespace or control characters; `*` only as the whole part after the first `/`. */
const ENTRY = /^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,62}\/\*|[^\s*/\u0000-\u001f\u007f][^\s*\u0000-\u001f\u007f]*)$/u;

const SHAPE = 'must be a non-empty array of model ids, provider/model or provider/* entries';

/** `models` of CreateKey: checked entry by entry by checkKeyModels (the refusal names the list, not an index). */
export const KeyModels = Nullable(
  // Each entry's shape and length are checked by checkKeyModels, so that the refusal names the list, not an index.
  Type.Array(Type.String(says('must be entries of the form model, provider/model or provider/*')), {
    minItems: 1,
    maxItems: MAX_KEY_MODELS,
    ...says({ type: SHAPE, minItems: `${SHAPE} (null: every model)`, maxItems: `must list at most ${MAX_KEY_MODELS} entries` }),
  }),
  {
    description:
      'The models the key may use: a model id (`gpt-4o-mini`), `provider/model` or `provider/*` (the provider\'s name or kind in the providers file). null or absent: every model.',
  },
);

/** The entries as stored (deduplicated, in order); refuses a malformed one (400 invalid_request, param models). */
export function checkKeyModels(entries: readonly string[] | null | undefined): string[] {
  if (entries === undefined || entries === null) return [];
  const bad = entries.find((e) => e.length > MAX_ENTRY_CHARS || !ENTRY.test(e) || e.endsWith('/'));
  if (bad !== undefined) {
    throw invalid('models', `models entries must be a model id, provider/model or provider/*: ${JSON.stringify(bad.slice(0, MAX_ENTRY_CHARS))} is not (at most ${MAX_ENTRY_CHARS} characters).`);
  }
  return [...new Set(entries)];
}

/** What a route is, for matching: its provider's name and kind, and the model id. */
export interface RouteName {
  provider: { name: string; kind: string };
  model: { id: string };
}

/** Whether a key's list (null: not narrowed) lets a request use this route. */
export function routeAllowed(models: readonly string[] | null | undefined, route: RouteName): boolean {
  if (!models) return true;
  const { name, kind } = route.provider;
  const id = route.model.id;
  for (const e of models) {
    if (e === id || e === `${name}/*` || e === `${kind}/*` || e === `${name}/${id}` || e === `${kind}/${id}`) return true;
  }
  return false;
}

/** The refusal of a model outside the key's list (CONTRACT §22: 403 insufficient_scope, param model). */
export function modelRefused(model: string): SvcError {
  return new SvcError('insufficient_scope', {
    param: 'model',
    message:
      model === 'auto'
        ? 'None of the routes "auto" would take is within this key\'s models.'
        : `This key may not use model ${JSON.stringify(model.slice(0, 200))} (it is outside the key's models).`,
  });
}

/** Refuses a named model none of whose routes the caller's key allows. `routes`: the model's routes. */
export function assertModelAllowed(caller: Pick<Caller, 'models'>, model: string, routes: readonly RouteName[]): void {
  if (!caller.models) return;
  if (!routes.some((r) => routeAllowed(caller.models, r))) throw modelRefused(model);
}

/** The routes within the caller's key's models; none left: 403 insufficient_scope, param model. */
export function routesWithinKey<R extends RouteName>(caller: Pick<Caller, 'models'>, model: string, routes: R[]): R[] {
  if (!caller.models) return routes;
  const within = routes.filter((r) => routeAllowed(caller.models, r));
  if (within.length === 0 && routes.length > 0) throw modelRefused(model);
  return within;
}

/**
 * The subset rule for models (CONTRACT §3, §22): the entries of `child` that `parent` does not cover (empty: within).
 * An entry is covered when the parent holds it, or, for `provider/model`, holds `provider/*`. A parent without a list
 * covers everything; a child without one is beyond any list. Read by the letter, not against today's providers file,
 * so a key's powers do not grow when the file changes.
 */
export function modelsBeyond(parent: readonly string[] | null, child: readonly string[] | null): string[] {
  if (parent === null) return [];
  if (child === null) return ['(every model)'];
  const held = new Set(parent);
  return child.filter((entry) => {
    if (held.has(entry)) return false;
    const slash = entry.indexOf('/');
    return !(slash > 0 && held.has(`${entry.slice(0, slash)}/*`));
  });
}

/** A stored list as the API shows it: null when the key is not narrowed. */
export const shownModels = (stored: readonly string[] | null | undefined): string[] | null => (stored && stored.length > 0 ? [...stored] : null);
