import { Type, type Static } from 'typebox';
import { EVENT_TYPES, type EventType } from '../events/outbox.ts';
import { SCOPES, type Scope } from '../keys/scopes.ts';
import { ACTIONS, scopesFor, type Action } from './actions.ts';

/**
 * The gateway's own tables as data, for clients that show them (the admin console's scope and event pickers, which
 * screen needs which scope): GET /v1/catalog and GraphQL `catalog`. Read from the tables, so it cannot drift from them.
 */
export interface Catalog {
  /** The scope table (spec §5), in its order. */
  scopes: readonly Scope[];
  /** The event catalog (spec §6.2), in its order. */
  events: readonly EventType[];
  /** Each action and the scopes that allow it (any one is enough); empty: any valid key. */
  actions: Readonly<Record<Action, readonly Scope[]>>;
}

export const CATALOG: Catalog = Object.freeze({
  scopes: SCOPES,
  events: EVENT_TYPES,
  actions: Object.freeze(Object.fromEntries(Object.keys(ACTIONS).map((action) => [action, scopesFor(action as Action)]))) as Catalog['actions'],
});

/** The REST body of GET /v1/catalog. */
export const CatalogBody = Type.Object(
  {
    object: Type.Literal('svc.catalog'),
    scopes: Type.Array(Type.String(), { description: 'Every scope a key may hold (spec §5).' }),
    events: Type.Array(Type.String(), { description: 'Every event type a webhook may subscribe to (spec §6.2).' }),
    actions: Type.Record(Type.String(), Type.Array(Type.String()), {
      description: 'Each action a route or GraphQL field performs, and the scopes that allow it (any one is enough); an empty list: any valid key.',
    }),
  },
  { description: 'The scopes, event types and actions of this gateway.' },
);
export type CatalogBody = Static<typeof CatalogBody>;
