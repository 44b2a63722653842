import { createRequire } from 'node:module';

/**
 * graphql 16 ships a CommonJS and an ESM copy, and two copies in one process break its `instanceof` checks ("Cannot
 * use GraphQLSchema from another module or realm"). Node hands every package (yoga, Pothos, graphql-armor) the
 * CommonJS copy, so our files take that one too, whichever loader runs them (tsx, vitest, a bundler).
 */
const graphql = createRequire(import.meta.url)('graphql') as typeof import('graphql');

export const { Kind, validate, visit, NoSchemaIntrospectionCustomRule, printSchema, lexicographicSortSchema } = graphql;
export const GraphQLError = graphql.GraphQLError;
export type GraphQLError = import('graphql').GraphQLError;
