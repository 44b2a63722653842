import SchemaBuilder from '@pothos/core';
import PrismaPlugin from '@pothos/plugin-prisma';
import RelayPlugin from '@pothos/plugin-relay';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import { GraphQLError, Kind } from './graphql-js.ts';
import type { Ctx } from '../domain/context.ts';
import type { DomainPorts } from '../domain/ports.ts';
import { allows, scopeWords, scopesFor, type Action } from '../domain/auth/actions.ts';
import { callerMay } from '../domain/operators/roles.ts';
import { refuseByRole } from '../domain/operators/service.ts';
import { SvcError } from '../errors/svc-error.ts';
import type PrismaTypes from '../generated/pothos-types.ts';
import { getDatamodel } from '../generated/pothos-types.ts';

/** Yoga's context: the same per-request Ctx the auth hook built for REST (`req.ctx`). */
export interface GraphQLContext {
  ctx: Ctx;
  /** Each capability's ports (src/domain/ports.ts), composed once in app-deps.ts. */
  ports: DomainPorts;
}

/** The one Pothos builder: Prisma-backed object types, Relay connections, and the spec's scopes (§5). */
export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  PrismaTypes: PrismaTypes;
  // A field names its action (domain/auth/actions.ts), the table REST's routes read too.
  AuthScopes: { action: Action; operator: boolean };
  Scalars: {
    UnixSeconds: { Input: number; Output: Date | number };
    JSON: { Input: unknown; Output: unknown };
  };
  DefaultFieldNullability: false;
  DefaultEdgesNullability: false;
  DefaultNodeNullability: false;
}>({
  // scope-auth first: it wraps every other plugin's resolvers.
  plugins: [ScopeAuthPlugin, PrismaPlugin, RelayPlugin],
  defaultFieldNullability: false,
  prisma: {
    client: (context) => context.ctx.db,
    dmmf: getDatamodel(),
    exposeDescriptions: false,
    // Resolvers call services, which choose their own queries; relations load in batches (see README, GraphQL).
    onUnusedQuery: null,
  },
  relay: {
    // Ids are plain spec ids (`key_…`), not global ids: no node/nodes root fields.
    nodeQueryOptions: false,
    nodesQueryOptions: false,
    clientMutationId: 'omit',
    cursorType: 'String',
    edgesFieldOptions: { nullable: false },
    nodeFieldOptions: { nullable: false },
  },
  scopeAuth: {
    // The operator holds every scope (CONTRACT §2); its Caller already lists them all.
    authScopes: (context) => ({
      // A console session also needs its role in the project (issue 22: a viewer reads only); a refusal is audited.
      action: (action: Action) => {
        if (!allows(action, context.ctx.caller.scopes)) return false;
        if (callerMay(context.ctx.caller, action)) return true;
        return refuseByRole(context.ports.operators, context.ctx, action).then(() => false);
      },
      operator: context.ctx.caller.kind === 'operator',
    }),
    unauthorizedError: (_parent, _context, info, result) => {
      const scope = missingScope(result.failure);
      return new SvcError('insufficient_scope', {
        message: scope
          ? `${info.parentType.name}.${info.fieldName} requires the ${scope} scope.`
          : `${info.parentType.name}.${info.fieldName} is not available to this key.`,
      });
    },
  },
});

type Failure = { kind?: string; scope?: string; parameter?: unknown; failures?: Failure[] };

/** The scopes a scope-auth failure is about (`{ action: 'key.create' }` fails as an AuthScope inside AnyAuthScopes). */
function missingScope(failure: Failure): string | null {
  if (failure.kind === 'AuthScope' && failure.scope === 'action') return scopeWords(scopesFor(failure.parameter as Action)) || null;
  for (const inner of failure.failures ?? []) {
    const found = missingScope(inner);
    if (found) return found;
  }
  return null;
}

function parseUnixSeconds(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new GraphQLError('UnixSeconds must be an integer number of seconds since the Unix epoch.');
  }
  return value;
}

// Int is 32 bits in GraphQL and would overflow in 2038; REST's timestamps are JSON integers, so is this scalar.
builder.scalarType('UnixSeconds', {
  description: 'A point in time as an integer number of seconds since the Unix epoch (UTC), as in REST.',
  serialize: (value) => (value instanceof Date ? Math.floor(value.getTime() / 1000) : Math.floor(Number(value))),
  parseValue: parseUnixSeconds,
  parseLiteral: (ast) => {
    if (ast.kind !== Kind.INT) throw new GraphQLError('UnixSeconds must be an integer literal.');
    return parseUnixSeconds(Number(ast.value));
  },
});

builder.scalarType('JSON', {
  description: 'Any JSON value (an event or audit payload, as REST returns it).',
  serialize: (value) => value,
  parseValue: (value) => value,
});

builder.queryType({});
builder.mutationType({});
