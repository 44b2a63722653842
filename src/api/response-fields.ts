import { Type, type TSchema } from 'typebox';

/**
 * Building blocks of the response schemas (fast-json-stringify writes what they name, in their order, and
 * openapi.json shows their descriptions). A field a presenter writes as `x ?? null` is `Nullable`; one it spreads in
 * only sometimes is `Type.Optional`; a stored JSON value of the caller's or the model's making is `Json`, written as
 * it is (JSON.stringify) whatever its shape or key order.
 */
export const Nullable = <T extends TSchema>(schema: T, description?: string) =>
  Type.Union([schema, Type.Null()], description ? { description } : {});

export const Str = (description: string) => Type.String({ description });
export const NullableStr = (description: string) => Nullable(Type.String(), description);
export const Int = (description: string) => Type.Integer({ description });
export const NullableInt = (description: string) => Nullable(Type.Integer(), description);
export const Num = (description: string) => Type.Number({ description });
export const Bool = (description: string) => Type.Boolean({ description });

/** Unix seconds. */
export const Unix = (description: string) => Type.Integer({ description: `${description} (Unix seconds).` });
export const UnixOrNull = (description: string) => Nullable(Type.Integer(), `${description} (Unix seconds), or null.`);

/** Any JSON value (null included), written as stored. */
export const Json = (description: string) => Type.Unknown({ description });

/** The object's type, always this string. */
export const ObjectType = <T extends string>(value: T) => Type.Literal(value, { description: `Always "${value}".` });

/** Token counts, as OpenAI writes them. */
export const TokenUsage = Type.Object(
  {
    prompt_tokens: Int('Input tokens.'),
    completion_tokens: Int('Output tokens.'),
    total_tokens: Int('prompt_tokens + completion_tokens.'),
  },
  { description: 'Token counts.' },
);
