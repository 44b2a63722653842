import { CATALOG, type Catalog } from '../domain/auth/catalog.ts';
import { builder } from './builder.ts';

const CatalogAction = builder.objectRef<{ name: string; scopes: readonly string[] }>('CatalogAction').implement({
  description: 'An action a REST route or GraphQL field performs.',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'e.g. key.create.' }),
    scopes: t.stringList({ description: 'The scopes that allow it (any one is enough); empty: any valid key.', resolve: (a) => [...a.scopes] }),
  }),
});

const CatalogRef = builder.objectRef<Catalog>('Catalog').implement({
  description: 'The scopes, event types and actions of this gateway, as GET /v1/catalog.',
  fields: (t) => ({
    scopes: t.stringList({ description: 'Every scope a key may hold (spec §5).', resolve: (c) => [...c.scopes] }),
    events: t.stringList({ description: 'Every event type a webhook may subscribe to (spec §6.2).', resolve: (c) => [...c.events] }),
    actions: t.field({
      type: [CatalogAction],
      resolve: (c) => Object.entries(c.actions).map(([name, scopes]) => ({ name, scopes })),
    }),
  }),
});

builder.queryField('catalog', (t) =>
  t.field({
    type: CatalogRef,
    // Nullable like every scoped field: a refusal leaves the query's other fields their data.
    nullable: true,
    authScopes: { action: 'catalog.read' },
    resolve: () => CATALOG,
  }),
);
