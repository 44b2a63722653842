import type { FastifySchemaCompiler } from 'fastify';
import type { TSchema } from 'typebox';
import { parseInput, parseTextInput } from '../domain/validation.ts';

/** Whether a route schema was built with TypeBox (its nodes carry a `~kind`), not written as plain JSON Schema. */
const isTypeBox = (schema: unknown): schema is TSchema =>
  typeof schema === 'object' && schema !== null && Object.prototype.hasOwnProperty.call(schema, '~kind');

/**
 * fastify's validator compiler: a TypeBox route schema (domain/<capability>/schema.ts) is checked by the same
 * parseInput the services call, so a bad value gets the same SvcError (code, param, message) on REST as on GraphQL;
 * query strings and path parameters are text, converted to the schema's types first. Plain JSON schemas go to
 * `fallback` (ajv).
 */
export function routeValidatorCompiler(fallback: FastifySchemaCompiler<any>): FastifySchemaCompiler<any> {
  return (route) => {
    const { schema, httpPart } = route;
    if (!isTypeBox(schema)) return fallback(route);
    const parse = httpPart === 'body' ? parseInput : parseTextInput;
    return (value: unknown) => {
      try {
        // A POST without a body (fastify: null) sends no parameters (as Stripe's API reads it): `{}`, so a missing required field is
        // named rather than the whole body refused.
        return { value: parse(schema, httpPart === 'body' && (value === undefined || value === null) ? {} : value) };
      } catch (error) {
        return { error: error as Error };
      }
    };
  };
}
