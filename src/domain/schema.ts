import { Type, type TProperties, type TSchema, type TSchemaOptions, type TString } from 'typebox';
import { says } from '../config/schema-errors.ts';
import { REGION_EXAMPLE, REGION_PATTERN } from '../kernel/region.ts';

/**
 * Pieces the capabilities' input schemas (domain/<capability>/schema.ts) share. Wording (`says`) is what follows the
 * field's name in a refusal; see domain/validation.ts.
 */

/** A request body or query: an object whose unknown fields are refused ("Unknown parameter: x."). */
export const Input = <P extends TProperties>(properties: P, options: TSchemaOptions = {}) =>
  Type.Object(properties, { additionalProperties: false, ...says({ type: 'must be a JSON object' }), ...options });

/** A value or null (REST's JSON null, GraphQL's null). */
export const Nullable = <S extends TSchema>(schema: S, options: TSchemaOptions = {}) => Type.Union([schema, Type.Null()], options);

/** CONTRACT §2: a write may name its project in the body; else X-Svc-Project, else the key's own (domain/context.ts (tenancy)). */
export const ProjectIdField = Type.Optional(
  Nullable(Type.String(), {
    description: 'The project the call addresses (prj_…); else the X-Svc-Project header, else the key\'s own project.',
    ...says('must be a project id'),
  }),
);

/** A read's project filter in the query string. */
export const ProjectIdFilter = Type.Optional(
  Type.String({ description: 'The project to read (prj_…); a key reads only its own project.', ...says('must be a project id') }),
);

/** The name of a project or a routing policy: not blank, at most 100 characters (code points). */
export const Name = (description: string) =>
  Type.String({
    minLength: 1,
    maxLength: 100,
    pattern: '\\S',
    description,
    ...says('must be a non-empty string of at most 100 characters'),
  });

/** A region name (kernel/region.ts). */
export const Region = (description: string) =>
  Type.String({ pattern: REGION_PATTERN, description, ...says(`must be a lower-case region name such as ${REGION_EXAMPLE}`) });

/** A path id (`/v1/keys/{key_id}`). */
export const PathId = <N extends string>(name: N, description: string) =>
  Type.Object({ [name]: Type.String({ description }) } as Record<N, TString>);
