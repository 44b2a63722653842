import { Type, type Static, type TSchema } from 'typebox';
import { Errors } from 'typebox/value';
import { invalid } from '../../errors/svc-error.ts';
import { ROLES } from './roles.ts';

/** PUT /v1/operator-groups/{group_id}/roles: the group's whole role list (replaces the previous one). */
export const SetGroupRoles = Type.Object(
  {
    roles: Type.Array(
      Type.Object({ project_id: Type.String({ minLength: 1, maxLength: 64 }), role: Type.Enum([...ROLES]) }, { additionalProperties: false }),
      { maxItems: 1000 },
    ),
  },
  { additionalProperties: false },
);
export type SetGroupRolesInput = Static<typeof SetGroupRoles>;

/** PUT /v1/projects/{project_id}/ip-allowlist: CIDRs or addresses; an empty list allows every address. */
export const SetIpAllowlist = Type.Object(
  {
    project_id: Type.Optional(Type.String()),
    cidrs: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 100 }),
  },
  { additionalProperties: false },
);
export type SetIpAllowlistInput = Static<typeof SetIpAllowlist>;

/** `/roles/1/role` → `roles[1].role`: the REST name of the field, as `param` says it. */
const paramOf = (pointer: string): string =>
  pointer
    .split('/')
    .filter(Boolean)
    .reduce((out, part) => (/^\d+$/.test(part) ? `${out}[${part}]` : out ? `${out}.${part}` : part), '');

/** The service's own check (GraphQL passes the same snake_case object): the first problem is 400 naming the field. */
export function checkInput<S extends TSchema>(schema: S, value: unknown): Static<S> {
  const [error] = Errors(schema, value);
  if (error) {
    // A missing property is reported at its parent: name the property itself.
    const missing = (error.params as { requiredProperties?: string[] } | undefined)?.requiredProperties?.[0];
    const at = missing ? `${error.instancePath}/${missing}` : error.instancePath;
    throw invalid(paramOf(at) || null, `${paramOf(at) || 'body'} ${error.message}.`);
  }
  return value as Static<S>;
}
