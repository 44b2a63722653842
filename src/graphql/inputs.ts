import type { TObject, TSchema } from 'typebox';
import { builder } from './builder.ts';

/**
 * GraphQL input types derived from the inputs' TypeBox schemas (domain/<capability>/schema.ts), and the way back: a
 * resolver hands the service `serviceInput(input)`, the schema's own snake_case shape, and the service checks it with
 * the same schema REST's route uses (domain/validation.ts), so both surfaces refuse the same values the same way.
 *
 * A property `budget_usd` becomes the field `budgetUsd`. Its type: string → String (ID for `*_id`), integer → Int
 * (UnixSeconds for `*_at`), number → Float, boolean → Boolean, a list of strings → [String!], a list of objects → a list
 * of the derived input type named in `lists`. Enums stay String, as before. A field is required (`!`) when the
 * schema requires it and does not accept null; descriptions are the schema's.
 */
export function inputTypeFrom(
  name: string,
  schema: TObject,
  opts: { omit?: string[]; partial?: boolean; description?: string; lists?: Record<string, string> } = {},
) {
  return builder.inputType(name, {
    ...(opts.description ? { description: opts.description } : {}),
    fields: (t) => {
      const required = new Set(opts.partial ? [] : (schema.required ?? []));
      const fields: Record<string, unknown> = {};
      for (const [prop, raw] of Object.entries(schema.properties as Record<string, TSchema>)) {
        if (opts.omit?.includes(prop)) continue;
        const { node, nullable } = unwrapNullable(raw);
        const description = (raw as { description?: string }).description ?? (node as { description?: string }).description;
        fields[camel(prop)] = t.field({
          type: graphqlType(prop, node, opts.lists ?? {}) as 'String',
          required: required.has(prop) && !nullable,
          ...(description ? { description } : {}),
        });
      }
      return fields as {};
    },
  });
}

/** Derived item types (RoutingTargetInput), built once and shared by every input that lists them. */
const itemTypes = new Map<string, ReturnType<typeof inputTypeFrom>>();

function graphqlType(prop: string, node: any, lists: Record<string, string>): unknown {
  if (node.type === 'array') {
    const item = unwrapNullable(node.items).node as any;
    if (item.type === 'object') {
      const typeName = lists[prop];
      if (!typeName) throw new Error(`inputTypeFrom: name the input type of the list ${prop} in opts.lists`);
      let ref = itemTypes.get(typeName);
      if (!ref) itemTypes.set(typeName, (ref = inputTypeFrom(typeName, item as TObject)));
      return [ref];
    }
    return [graphqlType(prop, item, lists)];
  }
  if (node.type === 'integer') return prop.endsWith('_at') ? 'UnixSeconds' : 'Int';
  if (node.type === 'number') return 'Float';
  if (node.type === 'boolean') return 'Boolean';
  if (node.type === 'string' || (Array.isArray(node.enum) && node.enum.every((v: unknown) => typeof v === 'string'))) {
    return prop.endsWith('_id') ? 'ID' : 'String';
  }
  throw new Error(`inputTypeFrom: no GraphQL type for ${prop}`);
}

/** `Nullable(X)` (anyOf [X, null]) is X, nullable. */
function unwrapNullable(node: TSchema): { node: TSchema; nullable: boolean } {
  const anyOf = (node as { anyOf?: TSchema[] }).anyOf;
  if (!anyOf) return { node, nullable: false };
  const rest = anyOf.filter((b) => (b as { type?: string }).type !== 'null');
  return rest.length === 1 && rest.length < anyOf.length ? { node: rest[0]!, nullable: true } : { node, nullable: false };
}

const camel = (snake: string) => snake.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
const snake = (camelCase: string) => camelCase.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * GraphQL's input (an input object, or a field's arguments) as the service's snake_case object: the fields given,
 * nulls included (the schema decides what null means), lists and nested objects alike.
 */
export function serviceInput(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(serviceInput);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [snake(k), serviceInput(v)]));
}

const CONNECTION_ARGS = new Set(['first', 'last', 'after', 'before']);

/**
 * A list field's filters (`projectId`, `action`, …) for the service's query: without the connection's own arguments
 * (serviceConnection turns those into limit and cursors) and without nulls, which on a filter mean "not given".
 */
export function listFilters(args: object): Record<string, unknown> {
  const given = Object.entries(args).filter(([k, v]) => !CONNECTION_ARGS.has(k) && v !== null && v !== undefined);
  return serviceInput(Object.fromEntries(given)) as Record<string, unknown>;
}
